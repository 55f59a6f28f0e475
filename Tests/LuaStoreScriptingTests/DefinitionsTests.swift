import Foundation
import LuaKit
@testable import LuaStoreScripting
import LuaStoreTestSupport
import Testing

/// `lua/luastore.d.lua` (editor definitions) says exactly what the `luastore` module has.
@Suite struct DefinitionsTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// `function luastore.name(parameters)` declarations in a file: name → parameters.
    static func declarations(in path: String) throws -> [String: String] {
        let text = try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
        var found: [String: String] = [:]
        for match in text.matches(of: #/\nfunction luastore\.([A-Za-z_]+)\(([^)]*)\)/#) {
            found[String(match.1)] = String(match.2)
        }
        return found
    }

    @Test func theDefinitionsFileDeclaresEveryFunctionOfTheModuleWithItsParameters() async throws {
        let defined = try Self.declarations(in: "lua/luastore.d.lua")
        let implemented = try Self.declarations(in: "Sources/LuaStoreScripting/Effects/luastore.lua")
        #expect(!implemented.isEmpty)
        #expect(defined == implemented)
        // And what the running module exports is what its file declares.
        let exported = try await withTaskExecutorPreference(LuaThread(name: "DefinitionsTests")) { () throws -> [String] in
            let vm = try LuaVM(limits: .unhurried)
            try EffectsModule.define(in: vm)
            let names = try vm.run("""
                local names = {}
                for name in pairs(require("luastore")) do names[#names + 1] = name end
                table.sort(names)
                return table.concat(names, " ")
                """, chunkName: "names.lua")
            return names.first?.string?.split(separator: " ").map(String.init) ?? []
        }
        #expect(exported == implemented.keys.sorted())
    }
}
