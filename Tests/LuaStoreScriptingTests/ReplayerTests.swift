import Foundation
import LuaKit
import LuaStoreScripting
import LuaStoreTestSupport
import Testing

/// The one replayer (`luastore replay`, the devtools' import and replay use it): a store of its own replays
/// actions from a state, and each action's entry is compared with what was recorded — outcome, failure, changes,
/// commands, props, in that order.
@Suite struct ReplayerTests {
    static let app = """
        local luastore = require("luastore")
        local app = {}
        function app.init() return { count = 0 } end
        function app.reduce(state, action)
          if action.type == "add" then state.count = state.count + (action.by or 1)
          elseif action.type == "ask" then return nil, { luastore.log("asked " .. state.count) }
          elseif action.type == "boom" then error("boom " .. state.count) end
        end
        function app.props(state) return { count = state.count } end
        return app
        """

    @Test func eachActionIsComparedWithWhatWasRecorded() async throws {
        let folder = try AppFolder(["app.lua": Self.app])
        defer { folder.remove() }
        let replayer = try await Replayer(app: folder.url, from: ["count": 10], options: Recorder().options)
        defer { replayer.store.shutdown() }
        let now = await replayer.reduce([["type": "add"], ["type": "ask"], ["type": "boom"], ["type": "add", "by": 5]])
        #expect(now.count == 4)
        #expect(now.allSatisfy { $0 != nil })
        #expect(try await replayer.store.state() == ["count": 16], "it started from the given state, not init's")

        let count = StateChange(path: ["count"], value: 11)
        #expect(try Replayer.divergence(Replayer.Recorded(failure: nil, changes: [count]), now: now[0]) == nil)
        let changes = try #require(try Replayer.divergence(Replayer.Recorded(failure: nil, changes: [StateChange(path: ["count"], value: 12)]), now: now[0]))
        #expect(changes.aspect == .changes)
        #expect(changes.differences == [JournalComparison.Difference(path: "state.count", then: 12, now: 11)])

        let asked: LuaValue = ["kind": "log", "message": "asked 11"]
        #expect(try Replayer.divergence(Replayer.Recorded(failure: nil, changes: [], commands: [asked]), now: now[1]) == nil)
        let commands = try #require(try Replayer.divergence(Replayer.Recorded(failure: nil, changes: [], commands: []), now: now[1]))
        #expect(commands.aspect == .commands)

        let message = try #require(now[2]?.failure?.error.message)
        #expect(message.contains("boom 11"), "\(message)")
        #expect(try Replayer.divergence(Replayer.Recorded(failure: message), now: now[2]) == nil)
        #expect(try Replayer.divergence(Replayer.Recorded(failure: "app.lua:7: boom 99"), now: now[2])?.aspect == .failure)
        #expect(try Replayer.divergence(Replayer.Recorded(failure: nil, changes: []), now: now[2])?.aspect == .outcome)
        #expect(try Replayer.divergence(Replayer.Recorded(failure: "no"), now: now[3])?.aspect == .outcome)
        #expect(try Replayer.divergence(Replayer.Recorded(failure: nil), now: nil)?.aspect == .outcome, "nothing heard")

        let props = try #require(try Replayer.divergence(Replayer.Recorded(failure: nil, changes: [StateChange(path: ["count"], value: 16)]),
                                                         now: now[3], props: (then: ["count": 15], now: ["count": 16])))
        #expect(props.aspect == .props)
        #expect(props.differences.first?.path == "props.count")
        // A recorded entry's own record of itself agrees.
        #expect(try Replayer.divergence(Replayer.Recorded(try #require(now[3])), now: now[3]) == nil)
    }
}

/// An action a limit stopped — its time budget or the memory cap — matches a recorded failure by either limit, at
/// whatever budget: which a runaway action reaches first is the machine's. Any other failure is compared word for word.
@Suite struct ReplayedLimitsTests {
    @Test func aLimitMatchesEitherLimitAndNothingElse() async throws {
        let folder = try AppFolder(["app.lua": """
            local app = {}
            function app.init() return { count = 0 } end
            function app.reduce(state, action)
              state.count = state.count + 1
              if action.type == "spin" then while true do end
              elseif action.type == "hog" then local t = {} for i = 1, 1e9 do t[i] = ("x"):rep(64) .. i end
              elseif action.type == "boom" then error("boom") end
            end
            function app.props(state) return { count = state.count } end
            return app
            """])
        defer { folder.remove() }
        let replayer = try await Replayer(app: folder.url, from: ["count": 0], options: Recorder().options)
        defer { replayer.store.shutdown() }
        let now = await replayer.reduce([["type": "spin"], ["type": "hog"], ["type": "boom"]])
        #expect(try await replayer.store.state() == ["count": 0], "every one failed, and changed nothing")
        for entry in now.prefix(2) {
            #expect(entry?.failure?.error.stoppedByALimit == true, "\(String(describing: entry?.failure))")
            for recorded in ["time budget of 200 ms exceeded", "time budget of 5000 ms exceeded", "not enough memory"] {
                #expect(try Replayer.divergence(Replayer.Recorded(failure: recorded), now: entry) == nil, "\(recorded)")
            }
            for recorded in ["boom", "time budget exceeded", "not enough memory!", "time budget of x ms exceeded"] {
                #expect(try Replayer.divergence(Replayer.Recorded(failure: recorded), now: entry)?.aspect == .failure, "\(recorded)")
            }
        }
        #expect(try Replayer.divergence(Replayer.Recorded(failure: "not enough memory"), now: now[2])?.aspect == .failure)
        #expect(try Replayer.divergence(Replayer.Recorded(failure: "time budget of 200 ms exceeded"), now: now[2])?.aspect == .failure)
    }
}

/// The one reader of recordings: lines from any source (a file, bytes, blocks that cut lines anywhere), the header,
/// then the actions in batches — reloads passed over, a last line cut short named and left out, a damaged line
/// refused naming it, a failure to read said after the lines before it.
@Suite struct RecordingLinesTests {
    static let digest = RecordingReaderTests.digest

    /// A recording of `count` actions `add` from `{count = 0}`, a reload after the second.
    static func recording(_ count: Int) -> [UInt8] {
        var lines = [RecordingReaderTests.header]
        var seq = 0
        for index in 1...count {
            seq += 1
            lines.append(RecordingLine.withSum(#"{"seq":\#(seq),"origin":"outside","action":{"type":"add"},"changes":[[["count"],\#(index)]],"scripts":"\#(digest)"}"#))
            if index == 2 {
                seq += 1
                lines.append(RecordingLine.withSum(#"{"seq":\#(seq),"origin":"reload","reload":{"from":0,"to":0},"scripts":"\#(digest)"}"#))
            }
        }
        return Array((lines.joined(separator: "\n") + "\n").utf8)
    }

    @Test(arguments: [1, 7, 64, 1 << 20]) func linesCutAcrossBlocksReadAsWhole(blockSize: Int) throws {
        let bytes = Self.recording(50)
        var offset = 0
        let lines = LineReader(blocks: { () throws(LineReader.Unreadable) -> [UInt8]? in
            guard offset < bytes.count else { return nil }
            defer { offset += blockSize }
            return Array(bytes[offset..<min(bytes.count, offset + blockSize)])
        })
        var recording = try RecordingLines(lines)
        var sequences: [UInt64] = []
        while case let batch = try recording.next(upTo: 7), !batch.isEmpty {
            #expect(batch.count <= 7)
            sequences += batch.map(\.sequence)
        }
        #expect(sequences == [1, 2] + Array(4...51), "the reload (3) passed over")
        #expect(recording.reloads == 1)
        #expect(recording.last == 51)
        #expect(recording.cutShort == nil)
    }

    @Test func aLastLineCutShortIsLeftOutAndNamed() throws {
        var recording = try RecordingLines(LineReader(bytes: Self.recording(3) + Array(#"{"seq":5,"orig"#.utf8)))
        #expect(try recording.rest().map(\.sequence) == [1, 2, 4])
        #expect(recording.cutShort == 6)
    }

    @Test func aDamagedLineIsRefusedNamingIt() throws {
        var bytes = Self.recording(4)
        let third = bytes.indices.filter { bytes[$0] == 10 }[3] + 20 // (inside line 5)
        bytes[third] ^= 1
        var recording = try RecordingLines(LineReader(bytes: bytes))
        let problem = #expect(throws: RecordingLines.Problem.self) { try recording.rest() }
        #expect(problem?.kind == .entry)
        #expect(problem?.line == 5)
        #expect(problem?.message(name: "s.jsonl").hasPrefix("s.jsonl:5: not a recorded entry: ") == true, "\(String(describing: problem))")
        #expect(throws: RecordingLines.Problem.self) { try RecordingLines(LineReader(bytes: [])) }
        let notOne = #expect(throws: RecordingLines.Problem.self) { try RecordingLines(LineReader(bytes: Array("hello\n".utf8))) }
        #expect(notOne?.message(name: "n.txt").hasPrefix("n.txt:1: not a recording") == true)
    }

    @Test func aFailureToReadIsSaidAfterTheLinesBeforeIt() throws {
        let bytes = Self.recording(3)
        var given = false
        let lines = LineReader(blocks: { () throws(LineReader.Unreadable) -> [UInt8]? in
            guard !given else { throw LineReader.Unreadable(reason: "the disk went away") }
            given = true
            return bytes
        })
        var recording = try RecordingLines(lines)
        #expect(try recording.next().map(\.sequence) == [1, 2, 4])
        let problem = #expect(throws: RecordingLines.Problem.self) { try recording.next() }
        #expect(problem?.message(name: "r") == "cannot read r: the disk went away")
    }

    /// The replay-and-compare loop: windowed and one by one find the same first divergence; continuing replays
    /// every action after it; an entry whose changes cannot be read is named.
    @Test func theLoopFindsTheFirstDivergenceAtEitherPace() async throws {
        let folder = try AppFolder(["app.lua": ReplayerTests.app])
        defer { folder.remove() }
        var reading = try RecordingLines(LineReader(bytes: Self.recording(6)))
        var recorded = try reading.rest().map(Replayer.Step.init)
        recorded[3].recorded.changesJSON = ArraySlice(#"[[["count"],99]]"#.utf8) // (action 5 recorded otherwise)
        for pace in [Replayer.Pace.windowed, .oneByOne] {
            for continuing in [false, true] {
                let replayer = try await Replayer(app: folder.url, from: ["count": 0], options: Recorder().options)
                defer { replayer.store.shutdown() }
                var windows = [Array(recorded[..<2]), Array(recorded[2...])]
                var heard: [UInt64] = []
                let report = try await replayer.replay(pace, continuing: continuing, next: {
                    windows.isEmpty ? [] : windows.removeFirst()
                }, each: { step, now, props in
                    heard.append(step.sequence)
                    #expect(now?.action == step.action)
                    #expect((props != nil) == (pace == .oneByOne))
                })
                let found = try #require(report.divergence, "\(pace)")
                #expect(found.step.sequence == 5)
                #expect(found.position == 4)
                #expect(found.divergence.differences == [JournalComparison.Difference(path: "state.count", then: 99, now: 4)])
                #expect(heard == (continuing ? [1, 2, 4, 5, 6, 7] : [1, 2, 4, 5]))
                #expect(report.replayed == heard.count)
                // (A window is dispatched whole before it is compared: one by one stops at the divergence itself.)
                #expect(try await replayer.store.state() == ["count": continuing || pace == .windowed ? 6 : 4])
            }
        }
        let replayer = try await Replayer(app: folder.url, from: ["count": 0], options: Recorder().options)
        defer { replayer.store.shutdown() }
        var unreadable = recorded
        unreadable[0].recorded.changesJSON = ArraySlice(#"{"no":1}"#.utf8)
        var given = false
        let error = await #expect(throws: Replayer.UnreadableEntry.self) {
            try await replayer.replay(.windowed, next: {
                defer { given = true }
                return given ? [] : unreadable
            })
        }
        #expect(error?.description == #"the entry of action 1 is not a recorded entry ("changes" must be a list)"#)
    }
}
