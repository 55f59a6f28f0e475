import Foundation
import LuaKit

/// The sandbox's string library, measured inside one VM against Lua's own functions (which trusted code reaches
/// as `referencestrings`), on the same inputs: the price of the budget and of the no-addresses rule.
extension Scenarios {
    /// One workload per function, as a loop of `n` calls through `lib` (the sandbox's `string` table or Lua's
    /// own functions): short lines, as templating, trimming and parsing code calls them.
    static let stringWorkloads = """
        local lib, n = ...
        local find, match, gmatch, gsub, format, tostring = lib.find, lib.match, lib.gmatch, lib.gsub, lib.format, lib.tostring
        local line, sentence, padded = "  timeout = 250 ; retries=3", "the quick brown fox jumps over the lazy dog", "   hello world   "
        return {
          find_plain = function() for _ = 1, n do find(line, "retries", 1, true) end end,
          find_pattern = function() for _ = 1, n do find(line, "%d+") end end,
          match = function() for _ = 1, n do match(line, "^%s*(%w+)%s*=%s*(%w+)") end end,
          gmatch = function() for _ = 1, n / 8 do for _ in gmatch(sentence, "%a+") do end end end,
          gsub = function() for _ = 1, n do gsub(padded, "^%s+", "") end end,
          format = function() for i = 1, n do format("%s=%d (%.2f)", "key", i, 1.5) end end,
          tostring = function() for i = 1, n do tostring(i) end end,
        }
        """

    static let stringFunctions = ["find_plain", "find_pattern", "match", "gmatch", "gsub", "format", "tostring"]

    func strings() async throws -> [Scenario] {
        let thread = LuaThread(name: "bench-strings")
        return try await withTaskExecutorPreference(thread) { () throws -> [Scenario] in
            var limits = LuaLimits()
            limits.timeBudget = .seconds(60)
            let vm = try LuaVM(limits: limits)
            var rows: [Scenario] = []
            let calls = quick ? 20_000 : 200_000
            let sandboxLibrary = try vm.callForReferences(try vm.load("""
                return { find = string.find, match = string.match, gmatch = string.gmatch, gsub = string.gsub,
                         format = string.format, tostring = tostring }
                """, chunkName: "sandbox_library.lua"), arguments: [])[0]!
            let luaLibrary = try vm.callForReferences(try vm.loadTrusted("return referencestrings", chunkName: "bench"), arguments: [])[0]!
            let workloads = try vm.load(Self.stringWorkloads, chunkName: "string_workloads.lua")
            let sandboxed = try vm.callForReferences(workloads, arguments: [.reference(sandboxLibrary), .value(.integer(Int64(calls)))])[0]!
            let own = try vm.callForReferences(workloads, arguments: [.reference(luaLibrary), .value(.integer(Int64(calls)))])[0]!
            for name in Self.stringFunctions {
                let sandboxRun = try vm.field(.string(name), of: sandboxed)!
                let ownRun = try vm.field(.string(name), of: own)!
                let times = try await Harness.alternate(
                    rounds: rounds, sides: sides,
                    { try Harness.nanosecondsSync(operations: calls) { _ = try vm.call(sandboxRun) } },
                    { try Harness.nanosecondsSync(operations: calls) { _ = try vm.call(ownRun) } })
                rows.append(Scenario(name: "strings.\(name)_ratio", value: times.ratio, unit: "×", goal: "≤ 1.3",
                                     pass: times.ratio <= 1.3))
            }

            // A plain `find` of a needle that is never found (a long run of `a`s and a `b`) in a subject twice as
            // long takes twice as long: the search is linear, however needle and subject are shaped (Lua's own
            // first-byte scan is quadratic on this needle).
            let size = quick ? 200_000 : 2_000_000
            let search = try vm.load("""
                local size = ...
                local subject, needle = string.rep('a', size), string.rep('a', 100000) .. 'b'
                return function() return subject:find(needle, 1, true) end
                """, chunkName: "plain_find.lua")
            let small = try vm.callForReferences(search, arguments: [.value(.integer(Int64(size)))])[0]!
            let large = try vm.callForReferences(search, arguments: [.value(.integer(Int64(size * 2)))])[0]!
            let linearity = try await Harness.alternate(
                rounds: rounds,
                { try Harness.nanosecondsSync(operations: 1) { _ = try vm.call(large) } },
                { try Harness.nanosecondsSync(operations: 1) { _ = try vm.call(small) } })
            rows.append(Scenario(name: "strings.plain_find_linearity_ratio", value: linearity.ratio, unit: "×",
                                 goal: "≤ 2.5 (2 is linear)", pass: linearity.ratio <= 2.5))
            return rows
        }
    }

    /// Whole scripts, whole processes: `luakit FILE` ÷ the stock `lua5.4 FILE` (Debian's; the row is left out,
    /// with a note, where it is not installed), for a templating / trimming / url-encoding script and a JSON
    /// encoder and decoder in plain Lua round-tripping a ≈ 1.2 MB document.
    func stringScripts() async throws -> [Scenario] {
        guard let stock = Self.stockLua else {
            FileHandle.standardError.write(Data("bench: lua5.4 is not installed; the whole-script rows are left out\n".utf8))
            return []
        }
        let luakit = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("luakit").path
        var rows: [Scenario] = []
        for (name, file) in [("text", EmbeddedLua.textWorkload), ("json", EmbeddedLua.jsonWorkload)] {
            let script = workspace.appendingPathComponent("\(name)_workload.lua")
            try Data(file.source.utf8).write(to: script)
            func seconds(_ executable: String, _ arguments: [String]) throws -> Double {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: executable)
                process.arguments = arguments
                process.standardOutput = FileHandle.nullDevice
                let clock = ContinuousClock()
                let start = clock.now
                try process.run()
                process.waitUntilExit()
                guard process.terminationStatus == 0 else {
                    throw BenchFailure("\(executable) \(arguments.joined(separator: " ")) exited with \(process.terminationStatus)")
                }
                return Harness.milliseconds(clock.now - start) / 1000
            }
            let times = try await Harness.alternate(
                rounds: quick ? 1 : 5, sides: sides,
                { try seconds(luakit, [script.path, "--time-budget-ms", "600000", "--memory-mb", "1024"]) },
                { try seconds(stock, [script.path]) })
            rows.append(Scenario(name: "strings.\(name)_script_vs_stock_lua_ratio", value: times.ratio, unit: "×",
                                 goal: "≤ 1.2", pass: times.ratio <= 1.2))
        }
        return rows
    }
}

extension Scenarios {
    /// Debian's stock interpreter, when installed.
    static var stockLua: String? {
        ["/usr/bin/lua5.4", "/usr/local/bin/lua5.4"].first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// What `executable arguments…` printed; an error unless it exits with 0.
    static func output(of executable: String, _ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw BenchFailure("\(executable) \(arguments.joined(separator: " ")) exited with \(process.terminationStatus)")
        }
        return String(decoding: data, as: UTF8.self)
    }
}

/// A benchmark that could not run.
struct BenchFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
