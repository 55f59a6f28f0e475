import Foundation
import LuaKit
import LuaStoreConcurrency
import LuaStoreScripting

/// "Replay the session with the current scripts": the kept actions are applied again, in order, by a second
/// store loaded from the app's folder now (effects are data: none is performed), starting from the state the
/// session had before the oldest kept entry; after each, what it changed, its failure, the commands it returned
/// and the props are compared with what the session recorded. The first difference is the answer — with its
/// diff, old against new. Redux DevTools, NgRx and Elm re-run and overwrite; this compares.
enum DevtoolsReplay {
    typealias Difference = JournalComparison.Difference

    struct Divergence {
        var sequence: UInt64
        var action: LuaValue
        /// What differs: "changes", "failure", "commands" or "props".
        var what: String
        var differences: [Difference]
        var scripts: (then: String, now: String)
    }

    struct Report {
        var replayed: Int
        var divergence: Divergence?
        var propsCompared: Bool
    }

    /// The state just before entry `sequence`, from the history.
    static func stateBefore(_ sequence: UInt64, of store: ScriptedStore) async throws -> LuaValue {
        do {
            return try await store.values(at: [[]], at: sequence, before: true)[0]
        } catch {
            throw DevtoolsAPI.Refusal(409, "the state before entry \(sequence), the oldest kept, is no longer kept: \(error.error.message)")
        }
    }

    static func run(store: ScriptedStore, journal: DevtoolsJournal) async throws -> Report {
        let bounds = journal.bounds
        guard bounds.count > 0 else { return Report(replayed: 0, divergence: nil, propsCompared: true) }
        let initial = try await stateBefore(bounds.first, of: store)
        var recorded: [JournalEntry] = []
        journal.forEachKept { item in if item.entry.action != nil { recorded.append(item.entry) } }

        // The props the session showed after each action (from its history, where kept).
        let history = await store.history()
        let kept = Set(history.kept)
        let propsSequences = recorded.map(\.sequence).filter { kept.contains($0) }
        var propsThen: [UInt64: Result<LuaValue, LuaError>] = [:]
        do {
            for (sequence, props) in zip(propsSequences, try await store.props(along: propsSequences)) { propsThen[sequence] = props }
        } catch {
            propsThen = [:]
        }

        let heard = Protected<[JournalEntry]>([])
        var options = ScriptedStoreOptions(log: { _ in }, failures: { _ in })
        options.performsEffects = false
        options.initialState = initial
        options.journal = { entry in heard.withLock { $0.append(entry) } }
        let replay: ScriptedStore
        do {
            replay = try await ScriptedStore(app: store.folder, options: options)
        } catch {
            throw DevtoolsAPI.Refusal(409, "the current scripts do not load: \(error.error) (\(error.stage.rawValue))")
        }
        defer { replay.shutdown() }
        var replayed = 0
        for entry in recorded {
            guard let action = entry.action else { continue }
            replay.dispatch(action)
            await replay.barrier()
            replayed += 1
            let now = heard.withLock { heard in
                defer { heard.removeAll() }
                return heard.last
            }
            let digest = now?.scripts ?? "?"
            func diverged(_ what: String, _ differences: [Difference]) -> Report {
                Report(replayed: replayed, divergence: Divergence(sequence: entry.sequence, action: action, what: what,
                                                                  differences: differences, scripts: (entry.scripts, digest)),
                       propsCompared: !propsThen.isEmpty)
            }
            guard let now else { return diverged("changes", [Difference(path: "the outcome", then: "applied", now: "nothing heard")]) }
            switch (entry.failure, now.failure) {
            case (let then?, let failure?):
                if then.error.message != failure.error.message {
                    return diverged("failure", [Difference(path: "the failure", then: .string(then.error.message), now: .string(failure.error.message))])
                }
                continue
            case (let then?, nil):
                return diverged("failure", [Difference(path: "the outcome", then: .string("failed: " + then.error.message), now: "applied")])
            case (nil, let failure?):
                return diverged("failure", [Difference(path: "the outcome", then: "applied", now: .string("failed: " + failure.error.message))])
            case (nil, nil):
                break
            }
            let changes = JournalComparison.differences(entry.changes, now.changes)
            if !changes.isEmpty { return diverged("changes", changes) }
            if entry.commands != now.commands {
                return diverged("commands", [Difference(path: "commands",
                                                        then: .table(LuaTable(array: entry.commands.map(\.payload))),
                                                        now: .table(LuaTable(array: now.commands.map(\.payload))))])
            }
            if case .success(let then)? = propsThen[entry.sequence] {
                let props = try? await replay.props()
                if let props, props != then {
                    return diverged("props", JournalComparison.differences(then, props, path: "props"))
                }
            }
        }
        return Report(replayed: replayed, divergence: nil, propsCompared: !propsThen.isEmpty)
    }
}
