import Foundation
import LuaKit

/// What `luastore test` takes from an app folder as busted would: the spec files (`ROOT`, `pattern`,
/// `exclude-pattern`) and where modules load from (`lpath`), from busted's defaults or a `.busted` file's
/// `_all` and `default` tasks (`default` wins). Other options of `.busted` (output, tags, …) are left alone.
struct BustedProject {
    /// Files or folders the specs are found in, relative to the app folder.
    var roots: [String] = ["spec"]
    /// Lua patterns: a file in a root folder is a spec file if its name matches one and ends in `.lua`.
    var patterns: [String] = ["_spec"]
    /// Lua patterns of names left out.
    var excludes: [String] = []
    /// Module path templates searched first (busted's default `./src/?.lua;./src/?/?.lua;./src/?/init.lua`).
    var lpath: [String] = ["./src/?.lua", "./src/?/?.lua", "./src/?/init.lua"]
    /// A Lua file of the project run before the spec files (`helper`: their shared globals, hooks, assertions),
    /// relative to the project's folder.
    var helper: String?
    /// Whether a `.busted` file said where the specs are (otherwise the app folder's own `*_spec.lua` count too).
    var configured = false

    struct Problem: Error, CustomStringConvertible {
        let description: String
    }

    /// Reads `.busted` in `folder`, if there is one (it is Lua, run in a sandbox of its own).
    static func load(folder: URL) throws(Problem) -> BustedProject {
        var project = BustedProject()
        let file = folder.appendingPathComponent(".busted")
        guard FileManager.default.fileExists(atPath: file.path) else { return project }
        guard let source = try? String(contentsOf: file, encoding: .utf8) else { throw Problem(description: ".busted: cannot be read as UTF-8 text") }
        let value: LuaValue
        do throws(LuaError) {
            let vm = try LuaVM(moduleRoot: folder)
            value = try vm.run(source, chunkName: ".busted").first ?? .nil
        } catch {
            throw Problem(description: ".busted: \(error.location.map { $0 + ": " } ?? "")\(error.message)")
        }
        guard let tasks = value.table else { throw Problem(description: ".busted: must return a table of tasks (got \(value.typeName))") }
        for task in ["_all", "default"] {
            let settings = tasks[.string(task)]
            if case .nil = settings { continue }
            guard settings.table != nil else { throw Problem(description: ".busted: '\(task)' must be a table (got \(settings.typeName))") }
            if let roots = try strings(settings[.string("ROOT")], "\(task).ROOT") { project.roots = roots; project.configured = true }
            if let patterns = try strings(settings[.string("pattern")], "\(task).pattern") { project.patterns = patterns }
            if let excludes = try strings(settings[.string("exclude-pattern")], "\(task).exclude-pattern") { project.excludes = excludes }
            switch settings[.string("helper")] {
            case .nil: break
            case .string(let path):
                guard !path.hasPrefix("/"), !path.split(separator: "/").contains(".."),
                      FileManager.default.fileExists(atPath: folder.appendingPathComponent(path).path) else {
                    throw Problem(description: ".busted: '\(task).helper' \(path.debugDescription) is not a file of the project folder \(folder.standardizedFileURL.path)")
                }
                project.helper = path
            case let other:
                throw Problem(description: ".busted: '\(task).helper' must be a string (got \(other.typeName))")
            }
            if let lpath = try strings(settings[.string("lpath")], "\(task).lpath") {
                // (Relative to the project's root, where busted runs: `src/?.lua` is `./src/?.lua`, never a path
                // from wherever `luastore test` was started.)
                project.lpath = lpath.flatMap { $0.split(separator: ";").map(String.init) }.filter { !$0.isEmpty }
                    .map { $0.hasPrefix("/") || $0.hasPrefix("./") ? $0 : "./" + $0 }
            }
        }
        return project
    }

    /// A string or a list of strings (as busted takes `ROOT` and `pattern`), or nil when unset.
    private static func strings(_ value: LuaValue, _ name: String) throws(Problem) -> [String]? {
        switch value {
        case .nil: return nil
        case .string(let text): return [text]
        case .table(let table):
            let list = table.array.compactMap(\.string)
            guard list.count == table.count else { throw Problem(description: ".busted: '\(name)' must be a string or a list of strings") }
            return list
        default: throw Problem(description: ".busted: '\(name)' must be a string or a list of strings (got \(value.typeName))")
        }
    }

    /// The spec files, relative to `folder`, in busted's order (each root's files sorted): without a `.busted`
    /// `ROOT`, the folder's own `*_spec.lua` first. Names are matched against the patterns by Lua in `vm`.
    func specFiles(in folder: URL, vm: LuaVM) throws(Problem) -> [String] {
        var files: [String] = []
        if !configured {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
            files += names.filter { $0.hasSuffix("_spec.lua") }.sorted()
        }
        let matcher: LuaReference
        do throws(LuaError) {
            matcher = try vm.load("""
                local name, patterns, excludes = ...
                for _, pattern in ipairs(excludes) do if pattern ~= "" and name:find(pattern) then return false end end
                for _, pattern in ipairs(patterns) do if name:find(pattern) then return true end end
                return #patterns == 0
                """, chunkName: "=(busted patterns)")
        } catch {
            throw Problem(description: error.message)
        }
        let patterns = LuaValue.table(LuaTable(array: self.patterns.map { .string($0) }))
        let excludes = LuaValue.table(LuaTable(array: self.excludes.map { .string($0) }))
        let inside = folder.standardizedFileURL.resolvingSymlinksInPath().path
        for root in roots {
            let url = folder.appendingPathComponent(root)
            // (Specs are the project's: a ROOT out of its folder — `..`, or a link — is refused, naming it.)
            let resolved = url.standardizedFileURL.resolvingSymlinksInPath().path
            guard resolved == inside || resolved.hasPrefix(inside + "/") else {
                throw Problem(description: ".busted: ROOT '\(root)' leads outside the project folder \(folder.path): specs are read from it only")
            }
            var isFolder: ObjCBool = false
            guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isFolder) else {
                if configured { throw Problem(description: ".busted: ROOT '\(root)' does not exist in \(folder.path)") }
                continue
            }
            if !isFolder.boolValue {
                files.append(root)
                continue
            }
            var found: [String] = []
            let enumerator = FileManager.default.enumerator(at: url, includingPropertiesForKeys: [.isRegularFileKey],
                                                            options: [.skipsHiddenFiles])
            while let item = enumerator?.nextObject() as? URL {
                guard item.pathExtension == "lua",
                      (try? item.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true else { continue }
                let relative = String(item.standardizedFileURL.path.dropFirst(folder.standardizedFileURL.path.count + 1))
                do throws(LuaError) {
                    if try vm.call(matcher, .string(item.lastPathComponent), patterns, excludes).first == true { found.append(relative) }
                } catch {
                    throw Problem(description: ".busted: pattern: \(error.message)")
                }
            }
            files += found.sorted()
        }
        var seen = Set<String>()
        return files.filter { seen.insert($0).inserted }
    }
}
