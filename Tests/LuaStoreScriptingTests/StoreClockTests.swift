import Foundation
import LuaKit
import LuaStoreCore
import LuaStoreScripting
import LuaStoreTestSupport
import Testing

/// A scripted store's `os` reads the store's clock (`StoreClock`): read once per run, recorded with each journal
/// entry, given again by a replay, shown by time travel.
@Suite struct StoreClockTests {
    static let app = """
        local app = {}
        function os.stamp() return os.date("!%H:%M:%S") end -- an addition to os, as the app loads
        function app.init() return { stamps = {}, started = os.stamp(), region = os.getenv("REGION") or "-" } end
        function app.reduce(state, action)
          if action.type == "stamp" then
            state.stamps[#state.stamps + 1] = { at = os.time(), clock = os.clock(), text = os.stamp(), day = os.date("%Y-%m-%d") }
          elseif action.type == "fail" then
            error("failed at " .. os.time())
          elseif action.type == "replace" then
            os.time = function() return 0 end
          end
        end
        function app.props(state) return { n = #state.stamps, now = os.stamp() } end
        return app
        """

    /// A clock the test moves: milliseconds since 1970.
    final class TestClock: Sendable {
        let millis = Protected<Int64>(1_772_357_400_000) // 2026-03-01 09:30:00 UTC
        var clock: StoreClock { StoreClock(now: { StoreClock.date(millis: self.millis.value) }, utcOffsetSeconds: 3600, environment: ["REGION": "eu"]) }
        func advance(_ milliseconds: Int64) { millis.withLock { $0 += milliseconds } }
    }

    /// The app in a store on a `TestClock`.
    static func open(historyEntries: Int = 0) async throws -> (AppFolder, TestClock, ScriptedStore) {
        let folder = try AppFolder(["app.lua": Self.app])
        let clock = TestClock()
        var options = Recorder().options
        options.clock = clock.clock
        options.historyEntries = historyEntries
        do {
            return (folder, clock, try await ScriptedStore(app: folder.url, options: options))
        } catch {
            folder.remove()
            throw error
        }
    }

    /// The scripts read the clock the host gave (the time, the offset, the environment, `os.clock()` from the
    /// store's start); each entry records the time its run read; a failed action records it too; replacing a
    /// standard function of `os` is refused, adding one is not.
    @Test func scriptsReadTheStoresClockAndEachEntryRecordsIt() async throws {
        let (folder, clock, store) = try await Self.open()
        defer { folder.remove(); store.shutdown() }
        #expect(try await store.state()["started"] == "09:30:00")
        #expect(try await store.state()["region"] == "eu")
        #expect(store.recordedClock == RecordedClock(started: 1_772_357_400_000, utcOffsetSeconds: 3600, environment: ["REGION": "eu"]))
        clock.advance(1_500)
        let first = try #require(await store.send(["type": "stamp"]).entry)
        #expect(first.time == 1_772_357_401_500)
        clock.advance(60_000)
        let second = try #require(await store.send(["type": "stamp"]).entry)
        #expect(second.time == 1_772_357_461_500)
        let stamps = try await store.state()["stamps"]
        #expect(stamps[1] == ["at": 1_772_357_401, "clock": 1.5, "text": "09:30:01", "day": "2026-03-01"])
        #expect(stamps[2] == ["at": 1_772_357_461, "clock": 61.5, "text": "09:31:01", "day": "2026-03-01"])
        #expect(try await store.props() == ["n": 2, "now": "09:31:01"], "props read the time of the last run")
        let failed = try #require(await store.send(["type": "fail"]).failure)
        #expect(failed.error.message == "failed at 1772357461")
        let replaced = try #require(await store.send(["type": "replace"]).failure)
        #expect(replaced.error.message.contains("cannot replace os.time"), "\(replaced.error.message)")
    }

    /// A replay gives each action the time it was recorded with — a window of actions with several times runs
    /// as several runs — so that what the reducers read is what they read then; its entries carry those times.
    @Test func aReplayGivesEachActionItsRecordedTime() async throws {
        let folder = try AppFolder(["app.lua": Self.app])
        defer { folder.remove() }
        let clock = RecordedClock(started: 1_000_000, utcOffsetSeconds: 0, environment: [:])
        let replayer = try await Replayer(app: folder.url, from: nil, clock: clock, time: 1_000_000, options: Recorder().options)
        defer { replayer.store.shutdown() }
        let times: [Int64] = [1_000_000, 1_000_000, 1_005_000, 1_005_000, 1_005_000, 2_000_000, 1_500_000, 1_500_000]
        let steps = times.enumerated().map { index, time in
            Replayer.Step(sequence: UInt64(index + 1), action: ["type": "stamp"], recorded: Replayer.Recorded(failure: nil), time: time)
        }
        replayer.start(steps: steps)
        let now = await replayer.finish(steps.count)
        #expect(now.map { $0?.time } == times.map { Optional($0) })
        let stamps = try await replayer.store.state()["stamps"]
        for (index, time) in times.enumerated() {
            let stamp = stamps[.integer(Int64(index + 1))]
            #expect(stamp["at"] == .integer(time / 1000), "action \(index + 1)")
            #expect(stamp["clock"] == .number(Double(time - 1_000_000) / 1000), "action \(index + 1)")
        }
        // (An action dispatched without a time, once the recorded ones ran, reads the host's clock.)
        let live = try #require(await replayer.store.send(["type": "stamp"]).entry)
        #expect(live.time > 1_700_000_000_000)
    }

    /// Time travel shows what the user saw: at a past entry the props read the time that entry ran at; back at
    /// the newest, the time of the last run.
    @Test func timeTravelShowsTheTimeAnEntryWasSeenAt() async throws {
        let (folder, clock, store) = try await Self.open(historyEntries: 10)
        defer { folder.remove(); store.shutdown() }
        var sequences: [UInt64] = []
        for _ in 1...3 {
            clock.advance(3_600_000)
            sequences.append(try #require(await store.send(["type": "stamp"]).entry?.sequence))
        }
        #expect(try await store.props()["now"] == "12:30:00")
        try await store.jump(to: sequences[0])
        #expect(try await store.props() == ["n": 1, "now": "10:30:00"])
        try await store.jump(to: sequences[1])
        #expect(try await store.props() == ["n": 2, "now": "11:30:00"])
        await store.resume()
        #expect(try await store.props() == ["n": 3, "now": "12:30:00"])
    }
}
