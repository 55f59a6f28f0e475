import Dispatch
import Foundation
import LuaStoreCore
import LuaStoreTestSupport
import Testing

/// A reducer that takes runs of actions: it records each run it is handed and applies at most `stopAfter`
/// actions of one (the store must hand the rest over again). `.fail` fails alone; the others still apply.
struct RunRecordingReducer: RunReducer {
    let runs = Protected<[[CounterAction]]>([])
    let singles = Protected<[CounterAction]>([])
    let diffs = Protected<[Int]>([])
    let stopAfter: Int

    func reduce(into state: inout CounterState, action: CounterAction) throws -> [CounterEffect] {
        singles.withLock { $0.append(action) }
        return try apply(action, to: &state)
    }

    func reduce(into state: inout CounterState, actions: ArraySlice<CounterAction>, sinceNotification: Int) -> RunOutcome<CounterEffect> {
        runs.withLock { $0.append(Array(actions)) }
        var outcome = RunOutcome<CounterEffect>()
        for (offset, action) in actions.prefix(stopAfter).enumerated() {
            outcome.applied += 1
            do {
                let commands = try apply(action, to: &state)
                if !commands.isEmpty { outcome.commands.append((offset, commands)) }
            } catch {
                outcome.failures.append((offset, error))
            }
        }
        return outcome
    }

    private func apply(_ action: CounterAction, to state: inout CounterState) throws -> [CounterEffect] {
        switch action {
        case .add(let amount):
            state.count = state.count * 10 + amount // order matters
            return amount == 7 ? [.log("seven")] : []
        case .fail: throw Boom()
        default: return []
        }
    }

    func subscriptions(for state: CounterState) throws -> [String: CounterEffect] {
        diffs.withLock { $0.append(state.count) }
        return [:]
    }
}

/// How the store hands queued actions to a reducer that takes runs (`RunReducer`).
@Suite struct RunTests {
    /// Queues `actions` while the store's executor is busy, so the drain finds them all at once.
    func queued(_ actions: [CounterAction], reducer: RunRecordingReducer, notification: NotificationPolicy = .batched,
                interceptor: (@Sendable (CounterAction, Dispatcher<CounterAction>) -> Void)? = nil,
                log: FailureLog<CounterState, CounterAction> = FailureLog(),
                effects: EffectInterpreter<CounterEffect, CounterState, CounterAction> = EffectInterpreter())
        async -> (RootStore<RunRecordingReducer>, CounterState) {
        let queue = DispatchQueue(label: "run-tests")
        let root = RootStore(
            initialState: CounterState(), runReducer: reducer, effects: effects,
            configuration: StoreConfiguration(executor: queue, notification: notification, interceptor: interceptor,
                                              errorReporter: log.reporter))
        queue.sync { for action in actions { root.dispatch(action) } }
        return (root, await root.state())
    }

    @Test func queuedActionsArriveAsOneRunInOrder() async {
        let reducer = RunRecordingReducer(stopAfter: .max)
        let actions: [CounterAction] = [.add(1), .add(2), .add(3), .add(4)]
        let (_, state) = await queued(actions, reducer: reducer)
        #expect(state.count == 1234)
        #expect(reducer.runs.value == [actions])
        #expect(reducer.singles.value.isEmpty)
        #expect(reducer.diffs.value.last == 1234, "subscriptions are diffed after the run")
    }

    /// An action dispatched through a child store (the child reduces it after the root) ends a run and is
    /// reduced on its own; the runs around it keep their order.
    @Test func actionsFromAChildStoreSplitRuns() async throws {
        let reducer = RunRecordingReducer(stopAfter: .max)
        let queue = DispatchQueue(label: "run-tests")
        let root = RootStore(initialState: CounterState(), runReducer: reducer,
                             configuration: StoreConfiguration(executor: queue))
        let child = root.child(initialState: [CounterAction](), reducer: StoreTests.Draft())
        let seen = Protected<[ChildState<CounterState, [CounterAction]>]>([])
        child.subscribe(Observer { state in seen.withLock { $0.append(state) }; return .active })
        queue.sync {
            root.dispatch(.add(1))
            root.dispatch(.add(2))
            child.dispatch(.add(3))
            root.dispatch(.add(4))
            root.dispatch(.add(5))
        }
        #expect(await root.state().count == 12345)
        #expect(reducer.runs.value == [[.add(1), .add(2)], [.add(4), .add(5)]])
        #expect(reducer.singles.value == [.add(3)])
        #expect(await eventually { seen.value.last?.local == [.add(3)] && seen.value.last?.root.count == 12345 })
    }

    @Test func aReducerThatStopsEarlyIsHandedTheRestAgain() async {
        let reducer = RunRecordingReducer(stopAfter: 2)
        let (_, state) = await queued([.add(1), .add(2), .add(3), .add(4), .add(5)], reducer: reducer)
        #expect(state.count == 12345)
        #expect(reducer.runs.value == [[.add(1), .add(2), .add(3), .add(4), .add(5)], [.add(3), .add(4), .add(5)]])
        #expect(reducer.singles.value == [.add(5)], "a run of one is an ordinary reduction")
        #expect(reducer.diffs.value.suffix(3) == [12, 1234, 12345], "subscriptions are diffed after every run")
    }

    @Test func failuresAndCommandsInARunAreHandledPerAction() async {
        let logged = Protected<[String]>([])
        let effects = EffectInterpreter<CounterEffect, CounterState, CounterAction>()
            .handling("log") { effect, _ in
                if case .log(let line) = effect { logged.withLock { $0.append(line) } }
            }
        let log = FailureLog<CounterState, CounterAction>()
        let reducer = RunRecordingReducer(stopAfter: .max)
        let (root, state) = await queued([.add(1), .fail, .add(7), .fail, .add(2)], reducer: reducer, log: log, effects: effects)
        #expect(state.count == 172)
        #expect(log.failures.value.map(\.action) == [.fail, .fail])
        #expect(log.stages == [.reducer, .reducer])
        #expect(await eventually { logged.value == ["seven"] })
        #expect(await root.waitUntilIdle(timeout: .seconds(30)))
    }

    @Test func runsRespectTheNotificationPolicy() async {
        let reducer = RunRecordingReducer(stopAfter: .max)
        let (_, state) = await queued((1...9).map(CounterAction.add), reducer: reducer, notification: .batched(maximumActions: 4))
        #expect(state.count == 123_456_789)
        #expect(reducer.runs.value.map(\.count) == [4, 4])
        #expect(reducer.singles.value == [.add(9)])

        let everyAction = RunRecordingReducer(stopAfter: .max)
        _ = await queued([.add(1), .add(2), .add(3)], reducer: everyAction, notification: .everyAction)
        #expect(everyAction.runs.value.isEmpty, "observers see every action: one at a time")
        #expect(everyAction.singles.value == [.add(1), .add(2), .add(3)])
    }

    @Test func anInterceptorSeesEveryActionBeforeItIsReduced() async {
        let reducer = RunRecordingReducer(stopAfter: .max)
        let seen = Protected<[CounterAction]>([])
        let (_, state) = await queued([.add(1), .add(2), .add(3)], reducer: reducer, interceptor: { action, _ in
            seen.withLock { $0.append(action) }
        })
        #expect(state.count == 123)
        #expect(reducer.runs.value.isEmpty)
        #expect(seen.value == [.add(1), .add(2), .add(3)])
    }
}
