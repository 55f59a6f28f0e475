import Foundation
import LuaStoreTestSupport
import Testing

/// Every ```swift block of README.md, docs/ and the DocC catalogs (`Sources/*/*.docc`) compiles against the built
/// libraries: each is type-checked as a program of its own (`main.swift`, every library imported). What a block needs
/// and does not show is said just above it, in HTML comments the page does not show:
/// `<!-- snippet: CODE -->` goes before it (a `vm` an earlier block made, say); `<!-- snippet-types: APP PREFIX
/// [testing] -->` adds the Swift types `luastore swift-types` writes for APP; `<!-- snippet: not compiled (WHY) -->`
/// leaves it out (a part of a Package.swift, which is not a program; a whole one, `// swift-tools-version` first, is
/// left out by itself).
@Suite struct SwiftSnippetsTests {
    struct Snippet: CustomStringConvertible {
        let file: String
        let line: Int
        let code: String
        var context: [String] = []
        var types: [String] = []
        var skipped = false
        var description: String { "\(file):\(line)" }
    }

    static let imports = ["Foundation", "LuaKit", "LuaStoreConcurrency", "LuaStoreCore", "LuaStoreContract", "LuaStoreScripting",
                          "LuaStoreTesting", "LuaStoreDevtools", "LuaStorePersistence", "LuaStoreBundles"]

    /// The pages: README, docs/*.md and the catalogs' articles.
    static func pages() throws -> [String] {
        let root = CLI.packageRoot
        let files = FileManager.default
        var pages = ["README.md"]
        pages += try files.contentsOfDirectory(atPath: root.appendingPathComponent("docs").path).filter { $0.hasSuffix(".md") }.sorted()
            .map { "docs/\($0)" }
        for target in try files.contentsOfDirectory(atPath: root.appendingPathComponent("Sources").path).sorted() {
            let catalog = "Sources/\(target)/\(target).docc"
            guard let articles = try? files.contentsOfDirectory(atPath: root.appendingPathComponent(catalog).path) else { continue }
            pages += articles.filter { $0.hasSuffix(".md") }.sorted().map { "\(catalog)/\($0)" }
        }
        return pages
    }

    static func snippets(in page: String) throws -> [Snippet] {
        let lines = try String(contentsOf: CLI.packageRoot.appendingPathComponent(page), encoding: .utf8)
            .components(separatedBy: "\n")
        var found: [Snippet] = []
        var index = 0
        while index < lines.count {
            defer { index += 1 }
            guard lines[index].trimmingCharacters(in: .whitespaces) == "```swift" else { continue }
            guard let end = lines[(index + 1)...].firstIndex(where: { $0.trimmingCharacters(in: .whitespaces) == "```" }) else { break }
            var snippet = Snippet(file: page, line: index + 1, code: lines[(index + 1)..<end].joined(separator: "\n"))
            // (The comments just above the block, nearest last.)
            var above = index - 1
            while above >= 0, lines[above].hasPrefix("<!-- snippet") {
                let text = String(lines[above].dropFirst(4).dropLast(lines[above].hasSuffix("-->") ? 3 : 0))
                    .trimmingCharacters(in: .whitespaces)
                if text.hasPrefix("snippet: not compiled") {
                    snippet.skipped = true
                } else if text.hasPrefix("snippet-types:") {
                    snippet.types.append(String(text.dropFirst("snippet-types:".count)).trimmingCharacters(in: .whitespaces))
                } else if text.hasPrefix("snippet:") {
                    snippet.context.insert(String(text.dropFirst("snippet:".count)).trimmingCharacters(in: .whitespaces), at: 0)
                }
                above -= 1
            }
            // (A Package.swift is not a program: its tools-version line says what it is.)
            if snippet.code.hasPrefix("// swift-tools-version") { snippet.skipped = true }
            found.append(snippet)
            index = end
        }
        return found
    }

    /// The flags that let swiftc import the built libraries: their modules, and the module maps of the C modules
    /// beneath them.
    static func compilerFlags() throws -> [String] {
        let build = CLI.buildFolder
        let files = FileManager.default
        var maps: [String] = []
        for entry in try files.contentsOfDirectory(atPath: build.path) where entry.hasSuffix(".build") && !entry.hasSuffix("-tool.build") {
            let map = build.appendingPathComponent(entry).appendingPathComponent("module.modulemap")
            if files.fileExists(atPath: map.path) { maps.append(map.path) }
        }
        for root in [CLI.packageRoot.appendingPathComponent("Sources"), CLI.packageRoot.appendingPathComponent(".build/checkouts")] {
            let walk = files.enumerator(atPath: root.path)
            while let path = walk?.nextObject() as? String {
                if path.hasSuffix("/module.modulemap") { maps.append(root.appendingPathComponent(path).path) }
            }
        }
        return ["-I", build.appendingPathComponent("Modules").path] + maps.flatMap { ["-Xcc", "-fmodule-map-file=\($0)"] }
    }

    @Test(.startsChildProcesses) func everySwiftSnippetCompiles() async throws {
        let snippets = try Self.pages().flatMap { try Self.snippets(in: $0) }
        #expect(snippets.count >= 15, "found \(snippets.count) snippets")
        let flags = try Self.compilerFlags()
        let place = FileManager.default.temporaryDirectory.appendingPathComponent("luastore-snippets-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: place) }
        var compiled = 0
        for (number, snippet) in snippets.enumerated() where !snippet.skipped {
            let folder = place.appendingPathComponent("\(number)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            var sources = [folder.appendingPathComponent("main.swift")]
            let program = Self.imports.map { "import \($0)" } + snippet.context + [snippet.code]
            try Data(program.joined(separator: "\n").utf8).write(to: sources[0])
            for (index, types) in snippet.types.enumerated() {
                let words = types.split(separator: " ").map(String.init)
                let file = folder.appendingPathComponent("Types\(index).swift")
                let written = try await CLI.run(["swift-types", words[0], "--prefix", words.count > 1 ? words[1] : "", "-o", file.path]
                                                + (words.contains("testing") ? ["--testing"] : []))
                #expect(written.status == 0, "\(snippet): swift-types \(types): \(written.errors)")
                sources.append(file)
            }
            let checked = try await runChildProcess(URL(fileURLWithPath: "/usr/bin/env"), ["swiftc", "-typecheck"] + sources.map(\.path) + flags,
                                                    timeout: .seconds(300))
            #expect(checked.status == 0, "\(snippet) does not compile:\n\(checked.errors)")
            compiled += 1
        }
        #expect(compiled >= 12)
    }
}
