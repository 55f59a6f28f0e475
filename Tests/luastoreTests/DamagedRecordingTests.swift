import Foundation
import LuaStoreScripting
import LuaStoreTestSupport
import Testing

/// Damaged recordings — cut short, bytes flipped, sequence numbers jumped, lines moved or repeated — are either
/// replayed with their recorded meaning or refused naming a line: never accepted meaning something else.
@Suite struct DamagedRecordingTests {
    /// An app whose reducer ignores a field of its actions (`note`): without a sum on each line, damage there
    /// would replay with no divergence to show for it.
    static let app = """
        local app = {}
        function app.init() return { count = 0, log = {} } end
        function app.reduce(state, action)
          if action.type == "add" then
            state.count = state.count + action.by
            state.log[#state.log + 1] = action.by
          elseif action.type == "fail" then error("refused " .. action.by)
          end
        end
        function app.props(state) return { count = state.count } end
        return app
        """

    /// The kinds of damage, each applied to the recording's lines by a seeded generator.
    enum Damage: CaseIterable {
        case truncated, flippedByte, jumpedSequence, reordered, duplicated
    }

    static func damaged(_ original: [UInt8], lines: [String], _ damage: Damage, _ random: inout SplitMix) -> [UInt8] {
        switch damage {
        case .truncated:
            return Array(original.prefix(Int.random(in: 1..<original.count, using: &random)))
        case .flippedByte:
            var bytes = original
            bytes[Int.random(in: 0..<bytes.count, using: &random)] ^= UInt8(1 << Int.random(in: 0..<8, using: &random))
            return bytes
        case .jumpedSequence:
            var edited = lines
            let index = Int.random(in: 1..<lines.count, using: &random)
            let jump = Int.random(in: 1...500, using: &random)
            edited[index] = RecordingLine.withSum(lines[index].replacing(#/^\{"seq":(\d+)/#) { match in
                #"{"seq":\#((Int(match.output.1) ?? 0) + jump)"#
            })
            return Array((edited.joined(separator: "\n") + "\n").utf8)
        case .reordered:
            var edited = lines
            let first = Int.random(in: 1..<lines.count - 1, using: &random)
            edited.swapAt(first, Int.random(in: (first + 1)..<lines.count, using: &random))
            return Array((edited.joined(separator: "\n") + "\n").utf8)
        case .duplicated:
            var edited = lines
            let index = Int.random(in: 1..<lines.count, using: &random)
            edited.insert(lines[index], at: Int.random(in: 1...lines.count, using: &random))
            return Array((edited.joined(separator: "\n") + "\n").utf8)
        }
    }

    @Test(arguments: Damage.allCases)
    func damagedRecordingsAreReplayedAsRecordedOrRefusedNamingALine(_ damage: Damage) async throws {
        let folder = try CLI.makeApp(Self.app)
        defer { try? FileManager.default.removeItem(at: folder) }
        let input = (1...20).map { index in
            index % 7 == 0 ? #"{"type":"fail","by":\#(index)}"# : #"{"type":"add","by":\#(index % 4),"note":"n\#(index)"}"#
        }.joined(separator: "\n") + "\n"
        let recordingURL = folder.appendingPathComponent("session.jsonl")
        let run = try await CLI.run(["run", folder.path, "--format", "json", "--record", recordingURL.path], input: input)
        #expect(run.status == 1) // (the "fail" actions)
        let original = Array(try Data(contentsOf: recordingURL))
        let lines = String(decoding: original, as: UTF8.self).split(separator: "\n").map(String.init)
        #expect(lines.count == 21)

        var random = SplitMix(state: UInt64(Damage.allCases.firstIndex(of: damage)!) &* 1_000_003)
        for round in 0..<12 {
            let bytes = Self.damaged(original, lines: lines, damage, &random)
            guard bytes != original else { continue }
            try Data(bytes).write(to: recordingURL)
            let replay = try await CLI.run(["replay", folder.path, recordingURL.path])
            let context = "\(damage) round \(round): \(replay.status) \(replay.output) \(replay.errors)"
            if replay.status == 0 {
                // Replayed: only a prefix of the recorded lines, each as recorded (a last line cut short is left out).
                let kept = String(decoding: bytes, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
                let replayed = Int(replay.output.firstMatch(of: /replayed (\d+) actions/)?.output.1 ?? "") ?? -1
                #expect(replayed >= 0 && replayed < lines.count, "\(context)")
                #expect(replayed >= 0 && Array(kept.prefix(replayed + 1)) == Array(lines.prefix(replayed + 1)), "\(context)")
            } else {
                #expect(replay.status == 2, "\(context)")
                #expect(replay.errors.contains(#/session\.jsonl:\d+: /#), "\(context)")
            }
        }
    }

    /// Lines are read a window at a time, but two problems are still said in the order of their lines: a malformed
    /// line before one longer than `--max-line-bytes` is named, not the long one; alone, the long one is.
    @Test func theFirstOfTwoProblemsIsNamed() async throws {
        let folder = try CLI.makeApp(Self.app)
        defer { try? FileManager.default.removeItem(at: folder) }
        let input = (1...10).map { index in
            #"{"type":"add","by":1,"note":"\#(String(repeating: "n", count: index == 7 ? 600 : 1))"}"#
        }.joined(separator: "\n") + "\n"
        let recordingURL = folder.appendingPathComponent("session.jsonl")
        let run = try await CLI.run(["run", folder.path, "--format", "json", "--record", recordingURL.path], input: input)
        #expect(run.status == 0, "\(run.errors)")
        let lines = try String(contentsOf: recordingURL, encoding: .utf8).split(separator: "\n").map(String.init)
        #expect(lines.count == 11 && lines[7].utf8.count > 600 && lines[4].utf8.count < 400)

        let replayed = try await CLI.run(["replay", folder.path, recordingURL.path, "--max-line-bytes", "500"])
        #expect(replayed.status == 2)
        #expect(replayed.errors == "luastore: cannot read \(recordingURL.path): line 8 is longer than 500 bytes (the limit of --max-line-bytes)\n")

        var damaged = lines
        damaged[4] = RecordingLine.withSum(lines[4].replacingOccurrences(of: #""origin":"outside""#, with: #""origin":"elsewhere""#))
        try Data((damaged.joined(separator: "\n") + "\n").utf8).write(to: recordingURL)
        let refused = try await CLI.run(["replay", folder.path, recordingURL.path, "--max-line-bytes", "500"])
        #expect(refused.status == 2)
        #expect(refused.errors.hasPrefix("luastore: \(recordingURL.path):5: not a recorded entry: "), "\(refused.errors)")
    }
}
