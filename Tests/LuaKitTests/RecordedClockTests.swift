import Foundation
import LuaKit
import LuaStoreConcurrency
import LuaStoreTestSupport
import Testing

/// `os` where the clock is recorded (`SystemAccess.recorded`, a scripted store's): it reads the time, the offset from
/// UTC and the environment the host set, and nothing else; dates are what stock Lua prints at the same time in a time
/// zone of the same fixed offset.
@Suite struct RecordedClockTests {
    static var limits: LuaLimits {
        var limits = LuaLimits.unhurried
        limits.system = .recorded
        return limits
    }

    /// The same script (dates and date tables at fixed times, every conversion C99 defines, `os.time(t)`'s
    /// normalizing and its errors) prints the same bytes under stock `lua5.4` in a time zone of a fixed offset and
    /// in a VM whose recorded clock has that offset.
    @Test(.enabled(if: stockLua != nil, "needs Debian's lua5.4"),
          arguments: [(0, "UTC"), (19_800, "<+0530>-05:30"), (-28_800, "<-08>+8")])
    func datesAreWhatStockLuaPrintsAtTheSameOffset(offset: Int32, zone: String) async throws {
        let folder = DifferentialTests.fixtures.appendingPathComponent("recorded-clock")
        let stock = try await runChildProcess(URL(fileURLWithPath: stockLua!), ["clock.lua"], directory: folder, environment: ["TZ": zone])
        #expect(stock.status == 0, "\(stock.errors)")
        let source = try String(contentsOf: folder.appendingPathComponent("clock.lua"), encoding: .utf8)
        let lines = Protected<[String]>([])
        try await withVM(limits: Self.limits, print: { line in lines.withLock { $0.append(line) } }) { vm throws in
            vm.utcOffsetSeconds = offset
            vm.clockMillis = 1_772_357_400_123
            _ = try vm.run(source, chunkName: "clock.lua")
        }
        let printed = lines.withLock { $0.joined(separator: "\n") } + "\n"
        if printed != stock.output { // (the first line that differs, rather than two pages)
            let mine = printed.split(separator: "\n", omittingEmptySubsequences: false), theirs = stock.output.split(separator: "\n", omittingEmptySubsequences: false)
            let at = (0..<min(mine.count, theirs.count)).first { mine[$0] != theirs[$0] } ?? min(mine.count, theirs.count)
            Issue.record("line \(at + 1): the sandbox printed \(at < mine.count ? String(mine[at]) : "nothing"), stock Lua \(at < theirs.count ? String(theirs[at]) : "nothing")")
        }
        #expect(stock.output.split(separator: "\n").count > 200)
    }

    /// `os.time()`, `os.date()` and `os.clock()` read the clock the host set (whole seconds, rounded down, before
    /// 1970 too); `os.getenv` finds what the host passed and nothing of the process's environment; `require("os")`
    /// is `os`; what would end or change the process, or touch files, raises naming the function.
    @Test func theClockAndTheEnvironmentAreTheHosts() async throws {
        try await withVM(limits: Self.limits) { vm throws in
            vm.clockStartMillis = 1_000_000
            vm.clockMillis = 1_772_357_400_999
            #expect(try vm.run("return os.time(), os.date('!%H:%M:%S'), os.clock(), require('os') == os", chunkName: "c.lua")
                    == [1_772_357_400, "09:30:00", .number(1_772_356_400.999), true])
            vm.clockMillis = -1
            #expect(try vm.run("return os.time(), os.date('!%Y-%m-%d %H:%M:%S')", chunkName: "c.lua") == [-1, "1969-12-31 23:59:59"])
            vm.clockMillis = 0
            vm.utcOffsetSeconds = 3600
            #expect(try vm.run("return os.date('%H:%M %Z'), os.date('!%H:%M %Z'), os.time({year = 1970, month = 1, day = 1, hour = 1})",
                               chunkName: "c.lua") == ["01:00 +01", "00:00 GMT", 0])
            #expect(try vm.run("return os.getenv('HOME'), os.getenv('PATH')", chunkName: "c.lua") == [.nil, .nil], "nothing of the process")
            vm.setEnvironment(["REGION": "eu", "EMPTY": ""])
            #expect(try vm.run("return os.getenv('REGION'), os.getenv('EMPTY'), os.getenv('HOME')", chunkName: "c.lua") == ["eu", "", .nil])
            vm.setEnvironment([:])
            #expect(try vm.run("return os.getenv('REGION')", chunkName: "c.lua") == [.nil])
            let notString = luaError { _ = try vm.run("return os.getenv({})", chunkName: "c.lua") }
            #expect(notString?.message == "bad argument #1 to 'getenv' (string expected, got table)", "\(String(describing: notString))")
            for name in ["exit", "execute", "remove", "rename", "tmpname", "setlocale"] {
                let refused = luaError { _ = try vm.run("os.\(name)('x')", chunkName: "os.lua") }
                #expect(refused?.message == "os.\(name) is not available in the sandbox (a script may not end or change the process, nor touch files)")
                #expect(refused?.location == "os.lua:1")
            }
        }
    }
}
