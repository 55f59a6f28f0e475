import Foundation
import LuaKit
import LuaStoreTestSupport
import Testing

/// The thread every test VM lives on (8 MiB stack), shared so tests do not each start one.
let testThread = LuaThread(name: "LuaKitTests")

/// Runs `body` with a fresh VM on the test thread, inside the calling test's task (so expectations made in
/// `body` are attributed to the test).
func withVM<T>(
    limits: LuaLimits = .unhurried, moduleRoot: URL? = nil, modulePath: [String] = [],
    print: @escaping @Sendable (String) -> Void = { _ in },
    _ body: (LuaVM) throws -> T
) async throws -> T {
    try await withTaskExecutorPreference(testThread) { () throws -> T in
        #expect(testThread.isCurrent)
        let vm = try LuaVM(limits: limits, moduleRoot: moduleRoot, modulePath: modulePath, print: print)
        let result = try body(vm)
        #expect(vm.stackDepth == 0, "the stack is empty after every call")
        #expect(vm.isCollectorRunning, "the collector keeps running")
        return result
    }
}

/// A fresh temporary folder, removed when the test ends (callers `defer` the removal).
func makeTemporaryFolder() throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("luakit-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}
