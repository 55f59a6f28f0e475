import ArgumentParser
import Foundation
import LuaKit
import LuaStoreCore
import LuaStoreScripting

/// `luastore replay APP_DIR FILE`: replays a recorded session without performing effects.
struct Replay: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Replay a session recorded with `run --record`, without the network, and compare every state.",
        discussion: """
            Every recorded action (those produced by effects included) is applied in order with effects switched off; \
            the state after each must match the recording. Reports the first action where the app's scripts now \
            diverge. Exit status: 0 when everything matches, 1 at the first divergence, 2 for unusable input.
            """)

    @Argument(help: "The app folder (with app.lua).", completion: .directory)
    var appDirectory: String

    @Argument(help: "The recording.", completion: .file())
    var recording: String

    func run() async throws {
        guard let text = try? String(contentsOfFile: recording, encoding: .utf8) else {
            Console.error("cannot read \(recording)")
            throw ExitCode.unusable
        }
        var entries: [LuaValue] = []
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() where !line.isEmpty {
            guard let entry = try? JSONText.decode(String(line)), entry["action"].table != nil else {
                Console.error("\(recording):\(index + 1): not a recorded entry")
                throw ExitCode.unusable
            }
            entries.append(entry)
        }
        let outcomes = Protected<[LuaValue]>([])
        var options = ScriptedStoreOptions(log: { _ in }, failures: { _ in })
        options.performsEffects = false
        options.notification = .everyAction
        options.transitions = { _, state in outcomes.withLock { $0.append(["state": state]) } }
        options.rejections = { _, failure in outcomes.withLock { $0.append(["error": .string(failure.error.description)]) } }
        let store: ScriptedStore
        do {
            store = try await ScriptedStore(app: URL(fileURLWithPath: appDirectory), options: options)
        } catch {
            Console.error("cannot load \(appDirectory): \(error.error) (\(error.stage.rawValue))")
            throw ExitCode.unusable
        }
        defer { store.shutdown() }
        for (index, entry) in entries.enumerated() {
            store.dispatch(entry["action"])
            await store.barrier()
            let outcome = outcomes.withLock { $0.isEmpty ? LuaValue.nil : $0.removeFirst() }
            let expected: LuaValue = entry["error"] != .nil ? ["error": entry["error"]] : ["state": entry["state"]]
            guard outcome != expected else { continue }
            let action = (try? JSONText.encode(entry["action"], root: "action")) ?? "\(entry["action"])"
            Console.error("diverges at action \(index + 1) of \(entries.count): \(action)")
            Console.error("  " + Self.describe(difference: Differences.first(expected, outcome, path: "")))
            throw ExitCode.appFailure
        }
        Console.out("replayed \(entries.count) actions: every state matches the recording")
    }

    static func describe(difference: (path: String, recorded: LuaValue, now: LuaValue)?) -> String {
        guard let difference else { return "the outcome differs" }
        let path = difference.path.isEmpty ? "the outcome" : difference.path
        return "\(path): recorded \(difference.recorded), now \(difference.now)"
    }
}

/// Finds where two values first differ.
enum Differences {
    static func first(_ a: LuaValue, _ b: LuaValue, path: String) -> (path: String, recorded: LuaValue, now: LuaValue)? {
        if a == b { return nil }
        guard let left = a.table, let right = b.table else { return (path, a, b) }
        var keys = Set(left.fields.keys).union(right.fields.keys)
        for index in 0..<max(left.array.count, right.array.count) { keys.insert(.integer(Int64(index + 1))) }
        for key in keys.sorted() {
            let name: String = switch key {
            case .string(let text) where path.isEmpty: text // the outcome's own fields: `state`, `props`
            default: path + LuaPath.render(key)
            }
            if let found = first(left[key], right[key], path: name) { return found }
        }
        return (path, a, b)
    }
}
