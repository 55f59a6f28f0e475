import Foundation
import LuaKit
import LuaStoreContract
import LuaStoreScripting

/// What `luastore check` says of an app's globals, as luacheck would: a global read inside a function that nothing
/// in its namespace sets (the standard ones, an assignment anywhere in the namespace's files, a name given with
/// `--globals`) is most likely a typo, which Lua reads as `nil`. Each namespace is linted on its own: the app's
/// files, and each folder with a manifest of its own (a plugin it mounts).
struct GlobalsLint {
    /// A global read in a function that nothing sets: `app.lua:12: global 'totl' is read but nothing sets it`.
    struct Finding: Equatable, CustomStringConvertible {
        let file: String
        let line: Int
        let name: String
        var description: String { "\(file):\(line): global '\(name)' is read but nothing sets it (a typo? Lua reads it as nil)" }
    }

    /// The findings in the app at `folder` (file paths relative to it, in the order of files and lines). A file
    /// that does not compile is left to the load, which names it.
    static func findings(in folder: URL, known: Set<String>) async -> [Finding] {
        let thread = LuaThread(name: "luastore-check")
        return await thread.perform { () -> [Finding] in
            // (The globals a store's scripts see: its `os` reads the store's recorded clock.)
            var limits = LuaLimits()
            limits.system = .recorded
            guard let vm = try? LuaVM(limits: limits),
                  let listed = try? vm.run("local names = {} for name in pairs(_G) do names[#names + 1] = name end return names",
                                           chunkName: "globals"),
                  let standard = listed.first?.table?.array.compactMap(\.string) else { return [] }
            var findings: [Finding] = []
            for namespace in AppFiles.namespaces(in: folder) {
                var reads: [(file: String, access: LuaGlobalAccess)] = []
                var set = known.union(standard)
                for file in namespace {
                    guard let data = FileManager.default.contents(atPath: folder.appendingPathComponent(file).path),
                          let accesses = try? vm.globalAccesses(in: String(decoding: data, as: UTF8.self), chunkName: file) else { continue }
                    for access in accesses {
                        if access.writes { set.insert(access.name) } else if access.inFunction { reads.append((file, access)) }
                    }
                }
                for (file, access) in reads where !set.contains(access.name) {
                    findings.append(Finding(file: file, line: access.line, name: access.name))
                }
            }
            return findings
        }
    }
}
