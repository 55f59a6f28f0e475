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
        /// What differs: "outcome", "failure", "changes", "commands" or "props" (`Replayer.Divergence.Aspect`).
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

        let replayer: Replayer
        do {
            replayer = try await Replayer(app: store.folder, from: initial, clock: store.recordedClock, time: recorded.first?.time,
                                          random: await store.randomState(after: bounds.first - 1),
                                          options: ScriptedStoreOptions(log: { _ in }, failures: { _ in }))
        } catch {
            throw DevtoolsAPI.Refusal(409, "the current scripts do not load: \(error.error) (\(error.stage.rawValue))")
        }
        defer { replayer.store.shutdown() }
        var steps = recorded.compactMap { entry in
            entry.action.map { action in
                Replayer.Step(sequence: entry.sequence, action: action, recorded: Replayer.Recorded(entry),
                              props: propsThen[entry.sequence].flatMap { try? $0.get() }, time: entry.time)
            }
        }
        let report = try await replayer.replay(.oneByOne, next: {
            defer { steps = [] }
            return steps
        })
        guard let found = report.divergence else { return Report(replayed: report.replayed, divergence: nil, propsCompared: !propsThen.isEmpty) }
        let entry = recorded.first { $0.sequence == found.step.sequence }
        return Report(replayed: report.replayed,
                      divergence: Divergence(sequence: found.step.sequence, action: found.step.action, what: found.divergence.aspect.rawValue,
                                             differences: found.divergence.differences,
                                             scripts: (entry?.scripts ?? "?", found.now?.scripts ?? "?")),
                      propsCompared: !propsThen.isEmpty)
    }
}
