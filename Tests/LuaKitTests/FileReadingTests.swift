import Foundation
import LuaKit
import LuaStoreTestSupport
import Testing

/// `io.open` and `io.lines` where the host gives the system (`luakit`, `luastore test`): a file of the project's
/// folder or the module path is read as Lua reads it (`Differential/files` compares every format with stock
/// `lua5.4`); nothing else is opened, nothing is written, and nothing waits on the system. In a store `io` stays
/// output only.
@Suite struct FileReadingTests {
    static var system: LuaLimits {
        var limits = LuaLimits.unhurried
        limits.system = .system
        return limits
    }

    /// Runs `script` in a VM whose project folder is `root`, returning what it returns.
    static func run(_ script: String, root: URL, modulePath: [String] = [], limits: LuaLimits = system) async throws -> [LuaValue] {
        try await withTaskExecutorPreference(testThread) {
            let vm = try LuaVM(limits: limits, moduleRoot: root, modulePath: modulePath)
            return try vm.run(script, chunkName: "probe.lua")
        }
    }

    @Test func readsTheProjectsFilesAndTheModulePathsOnly() async throws {
        let folder = try makeTemporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let project = folder.appendingPathComponent("project"), shared = folder.appendingPathComponent("shared")
        for place in [project, shared, project.appendingPathComponent("spec/fixtures")] {
            try FileManager.default.createDirectory(at: place, withIntermediateDirectories: true)
        }
        try Data("inside\n".utf8).write(to: project.appendingPathComponent("spec/fixtures/data.txt"))
        try Data("shared data\n".utf8).write(to: shared.appendingPathComponent("table.txt"))
        let secret = folder.appendingPathComponent("secret.txt")
        try Data("outside\n".utf8).write(to: secret)
        try FileManager.default.createSymbolicLink(at: project.appendingPathComponent("link.txt"), withDestinationURL: secret)
        try FileManager.default.createSymbolicLink(at: project.appendingPathComponent("inner.txt"),
                                                   withDestinationURL: project.appendingPathComponent("spec/fixtures/data.txt"))
        let fifo = project.appendingPathComponent("pipe")
        #expect(mkfifo(fifo.path, 0o600) == 0)
        let results = try await Self.run("""
            local function try(path, mode)
              local file, message, number = io.open(path, mode)
              if file then local text = file:read("a"); file:close(); return text end
              return message .. " #" .. tostring(number)
            end
            return try("spec/fixtures/data.txt"), try("./spec/../spec/fixtures/data.txt", "rb"), try("inner.txt"),
              try("\(shared.path)/table.txt"), try("../secret.txt"), try("\(secret.path)"), try("link.txt"),
              try("spec"), try("pipe"), try("absent.txt"), try("/etc/passwd")
            """, root: project, modulePath: [shared.path + "/?.lua"])
        #expect(results == [
            "inside\n", "inside\n", "inside\n", "shared data\n",
            "../secret.txt: Permission denied (the sandbox reads only the project's folder and the module path) #13",
            "\(secret.path): Permission denied (the sandbox reads only the project's folder and the module path) #13",
            "link.txt: Permission denied (the sandbox reads only the project's folder and the module path) #13",
            "spec: Permission denied (not a regular file) #13",
            "pipe: Permission denied (not a regular file) #13",
            "absent.txt: No such file or directory #2",
            "/etc/passwd: Permission denied (the sandbox reads only the project's folder and the module path) #13",
        ])
    }

    /// Opening to write, append or update answers as a read-only file system would, naming the path, and the file
    /// stays as it was (or absent).
    @Test(arguments: ["w", "a", "r+", "w+", "a+b", "wb"])
    func writingIsRefusedNamingThePath(mode: String) async throws {
        let folder = try makeTemporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let kept = folder.appendingPathComponent("kept.txt")
        try Data("as it was".utf8).write(to: kept)
        let results = try await Self.run("""
            local a, message, number = io.open("kept.txt", "\(mode)")
            local b, created = io.open("new.txt", "\(mode)")
            return a == nil and b == nil, message, number, created
            """, root: folder)
        #expect(results == [true, "kept.txt: Permission denied (the sandbox's files are read-only)", 13,
                            "new.txt: Permission denied (the sandbox's files are read-only)"])
        #expect(try Data(contentsOf: kept) == Data("as it was".utf8))
        #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent("new.txt").path))
    }

    /// A store's scripts (no system) have no files: `io.open`, `io.lines` and `io.close` say so.
    @Test func aStoresIoHasNoFiles() async throws {
        let folder = try makeTemporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        try Data("data".utf8).write(to: folder.appendingPathComponent("data.txt"))
        let results = try await Self.run("""
            local _, open = pcall(io.open, "data.txt")
            local _, lines = pcall(io.lines, "data.txt")
            return open, lines
            """, root: folder, limits: .unhurried)
        #expect(results.count == 2)
        #expect(results[0].string?.contains("io.open: not available in the sandbox") == true, "\(results)")
        #expect(results[1].string?.contains("io.lines: not available in the sandbox") == true, "\(results)")
    }

    /// A file larger than the VM may hold is refused when it opens, naming its size, rather than failing a read.
    @Test func aFileLargerThanTheHeapAllowsIsRefusedWhenItOpens() async throws {
        let folder = try makeTemporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        try Data(count: 3 << 20).write(to: folder.appendingPathComponent("large.bin"))
        var limits = Self.system
        limits.memoryBytes = 8 << 20
        let results = try await Self.run("return (select(2, io.open('large.bin')))", root: folder, limits: limits)
        #expect(results == ["large.bin: File too large (3145728 bytes; the limit is 2097152)"])
    }
}
