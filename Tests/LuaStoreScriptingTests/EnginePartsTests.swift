import Foundation
import LuaKit
import LuaStoreCore
@testable import LuaStoreScripting
import LuaStoreTestSupport
import Testing

/// The engine's parts on their own (docs/design.md, LuaStoreScripting): what each keeps, decided without a VM.
@Suite struct EnginePartsTests {
    /// The history keeps the newest entries within its count and its bytes (the newest always), says how many of
    /// the oldest the runtime must drop for the bytes, and finds the runtime's index for any entry kept.
    @Test func theHistoryKeepsTheNewestWithinItsBoundsAndFindsEntries() throws {
        var history = History()
        #expect(history.setLimits(entries: 3, bytes: .max) == 0)
        for sequence: UInt64 in [1, 2, 4, 5] { #expect(history.keep(sequence, changeCount: 1, time: Int64(sequence) * 1000) == 0) }
        #expect(history.sequences == [2, 4, 5], "three kept: the oldest went")
        #expect(history.firstIndex == 2)
        #expect(history.newestIndex == 4)
        #expect(try history.index(for: 4, newest: 5) == 3)
        #expect(try history.index(for: 3, newest: 5) == 2, "a failed entry (3) is where the entry before it left the state")
        #expect(try history.index(before: 4, newest: 5) == 2)
        #expect(throws: ScriptFailure.self) { try history.index(for: 1, newest: 5) }
        #expect(throws: ScriptFailure.self) { try history.index(for: 9, newest: 5) }

        let entrySize = History.size(changes: 1)
        #expect(history.setLimits(entries: 3, bytes: 2 * entrySize) == 1, "over the bytes: the runtime drops the oldest")
        #expect(history.sequences == [4, 5])
        #expect(history.keep(6, changeCount: 100, time: 6000) == 2, "a large entry pushes the others out")
        #expect(history.sequences == [6], "the newest always stays")
    }

    /// The readers are found by ID among many, in any order of adding and removing (kept sorted, found by a search):
    /// one removed from the middle leaves the others found, an ID never added or removed is not found, and `all`
    /// lists them by ID.
    @Test func theReadersAreFoundByIDAsTheyComeAndGo() {
        var readers = Readers()
        func reader(_ kind: ReaderKind) -> Readers.Reader {
            Readers.Reader(kind: kind, delivery: ObserverDelivery(Observer<LuaValue> { _ in .active }))
        }
        var ids: [Int64] = []
        for index in 0..<40 {
            let id = readers.makeID()
            ids.append(id)
            readers[id] = reader(index % 2 == 0 ? .props : .path([.integer(Int64(index))]))
        }
        for id in ids where id % 3 == 0 {
            let removed = readers.remove(id)
            #expect(removed)
        }
        let again = readers.remove(3), never = readers.remove(999)
        #expect(!again, "already gone")
        #expect(!never, "never there")
        for id in ids {
            let found = readers.kind(of: id)
            if id % 3 == 0 {
                #expect(found == nil && readers[id] == nil, "reader \(id) was removed")
            } else if case .path(let keys) = found {
                #expect(keys == [.integer(id - 1)], "reader \(id) keeps its own kind")
            } else {
                #expect(found != nil && (id - 1) % 2 == 0, "reader \(id) is the props")
            }
        }
        #expect(readers.all.map(\.id) == ids.filter { $0 % 3 != 0 }, "every reader listed, by ID")
        // A reader set again under its ID replaces itself; one set under an ID between others goes in its place.
        readers[2] = reader(.childProps(7))
        readers[3] = reader(.props)
        if case .childProps(7) = readers.kind(of: 2) {} else { Issue.record("reader 2 was replaced") }
        #expect(readers.all.map(\.id).prefix(4) == [1, 2, 3, 4])
    }

    /// Traveling holds actions; going back to the newest gives them up in order; a rewind drops what came after.
    @Test func travelingHoldsActionsAndARewindTruncates() throws {
        var history = History()
        _ = history.setLimits(entries: 10, bytes: .max)
        for sequence: UInt64 in 1...4 { _ = history.keep(sequence, changeCount: 1, time: Int64(sequence) * 1000) }
        history.traveled(to: try history.index(for: 2, newest: 4), sequence: 2)
        #expect(history.traveling && history.position == 2)
        history.hold(["type": "a"], source: .outside)
        history.hold(run: [["type": "b"], ["type": "c"]])
        #expect(history.heldCount == 3)
        #expect(history.takeHeld().map(\.action) == [["type": "a"], ["type": "b"], ["type": "c"]])
        #expect(history.heldCount == 0)
        history.truncate(after: try history.index(for: 2, newest: 4))
        #expect(history.sequences == [1, 2] && !history.traveling && history.position == 2)
    }

    /// A new set of subscriptions tells who listens what it launches and cancels, and nothing when it is the same.
    @Test func aNewSetOfSubscriptionsSaysWhatChanged() throws {
        let heard = Protected<[SubscriptionChange]>([])
        var set = SubscriptionSet()
        set.changed = { change in heard.withLock { $0.append(change) } }
        let tick = try ScriptEffect(validating: ["kind": "timer", "every": 1, "action": ["type": "tick"]], name: "tick")
        let poll = try ScriptEffect(validating: ["kind": "timer", "every": 5, "action": ["type": "poll"]], name: "poll")
        #expect(set.dirty)
        set.replace(with: ["tick": tick, "poll": poll], after: 3)
        #expect(!set.dirty)
        set.replace(with: ["tick": tick, "poll": poll], after: 4)
        set.markDirty()
        set.replace(with: ["tick": tick], after: 5)
        let changes = heard.value
        #expect(changes.count == 2, "the same set twice is heard once")
        #expect(changes.first?.after == 3 && changes.first?.launched.keys.sorted() == ["poll", "tick"])
        #expect(changes.last?.after == 5 && changes.last?.launched.isEmpty == true && changes.last?.cancelled == ["poll"])
    }

    /// Commands are numbered in the order reducers return them, across calls; a run that ends early shortens the
    /// next, one taken whole doubles it.
    @Test func runsNumberCommandsAndSizeTheirSpans() throws {
        var runs = Runs()
        let log = try ScriptEffect(validating: ["kind": "log", "message": "x"], name: "command #1")
        var first = [log, log]
        var second = [log]
        runs.number(&first)
        runs.number(&second)
        #expect(first.map(\.sequence) == [1, 2] && second.map(\.sequence) == [3])
        let start = runs.span.length
        runs.ran(start, of: start)
        #expect(runs.span.length == 2 * start)
        runs.ran(3, of: 2 * start)
        #expect(runs.span.length == 3)
        runs.notificationInterval = 1
        #expect(runs.notifiesEveryAction)
    }
    /// A replay's schedule hands out its times in order, a run of equal times at a time (at most what the run
    /// holds), and goes on past thousands of runs; a clock whose run it did not time leaves it alone.
    @Test func aReplaysScheduleHandsOutTimesInOrder() {
        let schedule = TimeSchedule()
        #expect(schedule.next(upTo: 10) == nil, "none wait")
        schedule.add([5, 5, 5, 7, 9, 9])
        #expect(schedule.next(upTo: 10)! == (5, 3))
        #expect(schedule.next(upTo: 2)! == (5, 2), "no more than the run holds")
        schedule.took(2)
        #expect(schedule.next(upTo: 10)! == (5, 1))
        schedule.took(1)
        #expect(schedule.next(upTo: 10)! == (7, 1))
        let clock = EngineClock(source: .fixed(Date(timeIntervalSince1970: 1)), recorded: RecordedClock(started: 0), schedule: schedule)
        #expect(clock.next(upTo: 4) == (7, 1, true))
        clock.took(1, scheduled: false)
        #expect(schedule.next(upTo: 10)! == (7, 1), "a run the schedule did not time takes nothing from it")
        clock.took(1, scheduled: true)
        schedule.took(2)
        #expect(schedule.next(upTo: 10) == nil)
        #expect(clock.next(upTo: 4) == (1000, 4, false), "then the host's clock")
        schedule.add((1...10_000).map { Int64($0) })
        var outOfOrder = 0
        for time in Int64(1)...10_000 {
            if let next = schedule.next(upTo: 8), next == (time, 1) {} else { outOfOrder += 1 }
            schedule.took(1)
        }
        #expect(outOfOrder == 0)
        #expect(schedule.next(upTo: 8) == nil)
    }
}

/// Subscription ids are text to the host: two keys Lua tells apart that would be one id there — an integer and its
/// digits, "é" as one character and as "e" and an accent — are refused as the subscriptions' failure, naming the
/// key, not one of them dropped in silence; the subscriptions before stay.
@Suite struct SubscriptionIdTests {
    @Test(arguments: [#"["caf\u{E9}"] = tick, ["cafe\u{301}"] = tick"#, #"tick, ["1"] = tick"#])
    func keysThatWouldBeOneIdAreRefused(keys: String) async throws {
        let folder = try AppFolder(["app.lua": """
            local luastore = require("luastore")
            local app = {}
            function app.init() return { twice = false } end
            function app.reduce(state, action) if action.type == "twice" then state.twice = true end end
            function app.subscriptions(state)
              local tick = luastore.timer(3600, { type = "tick" })
              if state.twice then return { \(keys) } end
              return { one = tick }
            end
            function app.props(state) return { twice = state.twice } end
            return app
            """])
        defer { folder.remove() }
        let recorder = Recorder()
        let store = try await ScriptedStore(app: folder.url, options: recorder.options)
        defer { store.shutdown() }
        _ = await store.send(["type": "twice"])
        await store.barrier()
        let failure = try #require(recorder.failures.withLock { $0 }.first { $0.stage == .subscriptions })
        #expect(failure.error.message.contains("has the id of another key of the table"), "\(failure.error)")
        #expect(failure.error.location == "app.lua:5", "the subscriptions function: \(failure.error)")
    }
}
