import Foundation
import LuaStoreTestSupport
import Testing

/// docs/design.md is the map of the house, so it must match the code: every file it names exists, every type it
/// names (and the member it names of one) is declared in the sources, every C function it names is defined, and
/// every target it gives a section to is in Package.swift (or the server's, serve/Package.swift).
@Suite struct DesignMapTests {
    static let root = CLI.packageRoot
    static var page: String { (try? String(contentsOf: root.appendingPathComponent("docs/design.md"), encoding: .utf8)) ?? "" }

    /// Every source and test file of the package, by path from its root.
    static let files: [String] = {
        var found: [String] = []
        for folder in ["Sources", "Tests", "Plugins", "samples", "scripts", "lua", "docs", "serve/Sources", "serve/Tests"] {
            let base = root.appendingPathComponent(folder)
            guard let walker = FileManager.default.enumerator(at: base, includingPropertiesForKeys: nil) else { continue }
            for case let url as URL in walker {
                found.append(folder + "/" + url.path.dropFirst(base.path.count + 1))
            }
        }
        return found
    }()

    /// The text of every Swift, C and Lua source.
    static let sources: String = files.filter { $0.hasPrefix("Sources/") || $0.hasPrefix("Tests/") || $0.hasPrefix("Plugins/") || $0.hasPrefix("serve/") }
        .filter { [".swift", ".c", ".h", ".lua"].contains(where: $0.hasSuffix) }
        .compactMap { try? String(contentsOf: root.appendingPathComponent($0), encoding: .utf8) }
        .joined(separator: "\n")

    /// What the page writes in backticks.
    static var named: [String] {
        page.matches(of: #/`([^`\n]+)`/#).map { String($0.output.1) }
    }

    @Test func everyFileItNamesExists() {
        let extensions = [".swift", ".c", ".h", ".lua", ".py", ".md", ".html"]
        let paths = Self.named.filter { name in
            !name.contains(" ") && !name.hasPrefix("host:") && !name.hasPrefix(".")
                && (name.contains("/") || extensions.contains(where: name.hasSuffix))
        }
        #expect(paths.count >= 30, "the map names the files it describes")
        for path in paths {
            let trimmed = path.hasSuffix("/") ? String(path.dropLast()) : path
            let exists = FileManager.default.fileExists(atPath: Self.root.appendingPathComponent(trimmed).path)
                || Self.files.contains { $0.hasSuffix("/" + trimmed) }
            #expect(exists, "docs/design.md names \(path), which is not in the package")
        }
    }

    /// The names the sources declare as types (and the targets, which the page names as modules), and as members.
    static let declared: (types: Set<String>, members: Set<String>) = {
        var types = Set(targets), members = Set<String>()
        for match in sources.matches(of: #/(?:struct|class|enum|protocol|actor|typealias|extension) ([A-Z][A-Za-z0-9]*)/#) {
            types.insert(String(match.output.1))
        }
        for match in sources.matches(of: #/typedef struct ([A-Z][A-Za-z0-9]*)/#) { types.insert(String(match.output.1)) }
        for match in sources.matches(of: #/(?:func|var|let|case) ([a-z][A-Za-z0-9]*)/#) { members.insert(String(match.output.1)) }
        return (types, members)
    }()

    /// The targets of Package.swift and of the server's package, serve/Package.swift.
    static let targets: [String] = {
        let manifest = ["Package.swift", "serve/Package.swift"]
            .map { (try? String(contentsOf: root.appendingPathComponent($0), encoding: .utf8)) ?? "" }.joined(separator: "\n")
        return manifest.matches(of: #/\.(?:target|executableTarget|systemLibrary|testTarget)\(\s*name: "([^"]+)"/#).map { String($0.output.1) }
    }()

    @Test func everyTypeAndMemberItNamesIsDeclared() {
        // `Type`, `Type.member`, `Type.member(label:)`: the type declared, the member declared in the sources.
        var checked = 0
        for name in Self.named where ![".swift", ".c", ".h", ".lua", ".md"].contains(where: name.hasSuffix) {
            guard let match = name.wholeMatch(of: #/([A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*)(?:\.([a-z][A-Za-z0-9]*)(?:\([a-zA-Z_:]*\))?)?/#) else { continue }
            let type = String(match.output.1)
            let typeDeclared = Self.declared.types.contains(type)
            #expect(typeDeclared, "docs/design.md names the type \(type), which no source declares")
            if let member = match.output.2 {
                let memberDeclared = Self.declared.members.contains(String(member))
                #expect(memberDeclared, "docs/design.md names \(type).\(member), which no source declares")
            }
            checked += 1
        }
        #expect(checked >= 40, "the map names the types it describes")
    }

    @Test func everyCFunctionItNamesIsDefined() {
        let functions = Self.named.compactMap { $0.wholeMatch(of: #/([a-z]+_[a-z_]+)(?:\(\))?/#).map { String($0.output.1) } }
        #expect(functions.count >= 8)
        for function in functions {
            #expect(Self.sources.contains(try! Regex("\\b\(function)\\(")), "docs/design.md names \(function), which no source defines")
        }
    }

    @Test func everyTargetHasItsSectionAndEverySectionItsTarget() {
        let targets = Set(Self.targets)
        // (The sections of "The targets": from its heading to the next of its level.)
        let page = Self.page
        guard let start = page.range(of: "\n## The targets\n") else {
            Issue.record("docs/design.md has no section \"The targets\"")
            return
        }
        let end = page.range(of: "\n## ", range: start.upperBound..<page.endIndex)?.lowerBound ?? page.endIndex
        let sections = page[start.upperBound..<end].matches(of: #/\n### ([^\n]+)/#).map { String($0.output.1) }
        let mentioned = sections.joined(separator: " ")
        let helpers = ["embed-lua", "luastore-demo-api", "LuaStoreDemoAPI", "RawHTTPClient", "swift-host", "LuaStoreTestSupport", "LocalPostgres"]
        for target in targets where !target.hasSuffix("Tests") && !helpers.contains(target) {
            #expect(mentioned.contains(target), "Package.swift has \(target); docs/design.md has no section for it")
        }
        for section in sections {
            let words = section.split(whereSeparator: { !$0.isLetter && !$0.isNumber && $0 != "-" }).map(String.init)
            #expect(words.contains { targets.contains($0) } || section == "Embedded Lua",
                    "docs/design.md has a section \(section) for no target of Package.swift")
        }
    }
}
