import Dispatch
import Foundation
import LuaStoreCore
import LuaStoreTestSupport
import Testing

/// Reducing, ordering, observers, scoped and child stores, interceptor and error reporter.
@Suite(.tags(.concurrency)) struct StoreTests {
    func makeRoot(
        notification: NotificationPolicy = .everyAction,
        log: FailureLog<CounterState, CounterAction> = FailureLog(),
        interceptor: (@Sendable (CounterAction, Dispatcher<CounterAction>) -> Void)? = nil,
        effects: EffectInterpreter<CounterEffect, CounterState, CounterAction> = EffectInterpreter()
    ) -> RootStore<CounterReducer> {
        RootStore(
            initialState: CounterState(), reducer: CounterReducer(), effects: effects,
            configuration: StoreConfiguration(notification: notification, interceptor: interceptor, errorReporter: log.reporter))
    }

    /// First in, first out, across the batches the drain takes from the inbox, under both
    /// notification policies.
    @Test(arguments: [NotificationPolicy.everyAction, .batched(maximumActions: 64)])
    func reducesActionsInOrder(notification: NotificationPolicy) async throws {
        let seen = Protected<[Int]>([])
        let root = makeRoot(notification: notification, interceptor: { action, _ in
            if case .add(let amount) = action { seen.withLock { $0.append(amount) } }
        })
        for amount in 1...1000 { root.dispatch(.add(amount)) }
        #expect(await root.state().count == 500_500)
        #expect(seen.value == Array(1...1000))
    }

    /// Batches of one action or fewer are every action: the policy says so, and a burst dispatched at once is seen
    /// by an observer state by state.
    @Test func batchesOfOneActionAreEveryAction() async throws {
        #expect(NotificationPolicy.everyAction.maximumActions == 1)
        #expect(NotificationPolicy.batched.maximumActions == 64)
        #expect(NotificationPolicy.batched(maximumActions: 0).maximumActions == 1)
        #expect(NotificationPolicy.batched(maximumActions: 1).isEveryAction)
        #expect(NotificationPolicy.batched(maximumActions: -3).isEveryAction)
        #expect(!NotificationPolicy.batched(maximumActions: 2).isEveryAction)
        let root = makeRoot(notification: .batched(maximumActions: 1))
        let seen = Protected<[Int]>([])
        root.subscribe(Observer { state in seen.withLock { $0.append(state.count) }; return .active })
        for _ in 0..<200 { root.dispatch(.increment) }
        #expect(await root.state().count == 200)
        #expect(seen.value == Array(0...200))
    }

    /// `send` returns its own action's outcome — its commands, or the error with its dispatch number — after the
    /// observers saw the state after it, in order with plain dispatches; after shutdown it is dropped.
    @Test(arguments: [NotificationPolicy.everyAction, .batched(maximumActions: 64)])
    func sendWaitsForItsOwnActionsOutcome(notification: NotificationPolicy) async throws {
        let root = makeRoot(notification: notification)
        let seen = Protected<[Int]>([])
        root.subscribe(Observer { state in seen.withLock { $0.append(state.count) }; return .active })
        for _ in 0..<8 { root.dispatch(.increment) }
        let outcome = await root.send(.add(2))
        #expect(outcome.commands == [])
        #expect(seen.value.last == 10, "observers saw the state after it: \(seen.value)")
        for _ in 0..<9 { root.dispatch(.increment) }
        #expect(await root.send(.increment).commands == [.log("reached 20")])
        guard case .failed(let error, let index) = await root.send(.fail) else { Issue.record("not failed"); return }
        #expect(error is Boom)
        #expect(index == 20)
        let concurrent = await withTaskGroup(of: SendOutcome<CounterEffect>.self) { group in
            for _ in 0..<50 { group.addTask { await root.send(.add(1)) } }
            var count = 0
            for await outcome in group where outcome.commands != nil { count += 1 }
            return count
        }
        #expect(concurrent == 50)
        #expect(await root.state().count == 70)
        root.shutdown()
        guard case .dropped = await root.send(.increment) else { Issue.record("not dropped"); return }
    }

    @Test func reducerReturnsExactCommandsWithoutRunningThem() throws {
        var state = CounterState(count: 9)
        let commands = try CounterReducer().reduce(into: &state, action: .increment)
        #expect(commands == [.log("reached 10")])
        #expect(state.count == 10)
    }

    @Test func commandsRunAndReportBackWithActions() async throws {
        let logged = Protected<[String]>([])
        let effects = EffectInterpreter<CounterEffect, CounterState, CounterAction>()
            .handling("log") { effect, context in
                guard case .log(let line) = effect else { return }
                logged.withLock { $0.append(line) }
                let state = await context.state()
                if state.count == 10 { context.dispatch(.add(100)) }
            }
        let root = makeRoot(effects: effects)
        for _ in 0..<10 { root.dispatch(.increment) }
        #expect(await eventually { await root.state().count == 110 })
        #expect(logged.value == ["reached 10"])
        #expect(await root.waitUntilIdle(timeout: .seconds(30)))
    }

    /// `waitUntilIdle` returns once every action is reduced, those effects dispatched included: an effect that
    /// dispatches its result and finishes while the store is being looked at cannot leave that result unreduced.
    @Test func idleMeansEveryResultOfAnEffectIsReduced() async throws {
        let reducer = Reduce<CounterState, CounterAction, CounterEffect> { state, action in
            switch action {
            case .increment:
                state.count += 1
                return [.log("answer")]
            case .add(let amount):
                state.count += amount
                return []
            default:
                return []
            }
        }
        let effects = EffectInterpreter<CounterEffect, CounterState, CounterAction>()
            .handling("log") { _, context in
                // (At varying moments: some fall between waitUntilIdle's looks at the inbox and at the effects.)
                try? await Task.sleep(for: .microseconds(Int.random(in: 0...300)))
                context.dispatch(.add(1))
            }
        let root = RootStore(initialState: CounterState(), reducer: reducer, effects: effects)
        for round in 1...300 {
            root.dispatch(.increment)
            // (Its bound counted in polls: beside busy loops the cooperative pool, which runs the effect, can be held
            // by other tests for longer than any wall-clock bound a wait would give it.)
            #expect(await eventually(timeout: .seconds(60)) { await root.waitUntilIdle(timeout: .milliseconds(50)) })
            let count = await root.state().count
            #expect(count == 2 * round, "round \(round)")
            if count != 2 * round { break }
        }
        root.shutdown()
    }

    @Test func failingReducerLeavesStateAndObserversUntouched() async throws {
        let log = FailureLog<CounterState, CounterAction>()
        let root = makeRoot(log: log)
        let seen = Protected<[Int]>([])
        root.subscribe(Observer { state in seen.withLock { $0.append(state.count) }; return .active })
        root.dispatch(.add(5))
        root.dispatch(.fail)
        root.dispatch(.add(1))
        #expect(await root.state().count == 6)
        #expect(await eventually { seen.value == [0, 5, 6] })
        #expect(log.stages == [.reducer])
        #expect(log.failures.value.first?.action == .fail)
        #expect(log.failures.value.first?.state?.count == 5)
    }

    @Test func actionsDispatchedDuringNotificationAreQueuedNotRecursed() async throws {
        let root = makeRoot()
        let depth = Protected(0)
        let maximumDepth = Protected(0)
        let store = root.store
        root.subscribe(Observer { state in
            let current = depth.withLock { $0 += 1; return $0 }
            maximumDepth.withLock { $0 = max($0, current) }
            if state.count < 50 { store.dispatch(.increment) }
            depth.withLock { $0 -= 1 }
            return .active
        })
        #expect(await eventually { await root.state().count == 50 })
        #expect(maximumDepth.value == 1)
    }

    @Test func interceptorSeesActionsAndDispatchesToTheSameStore() async throws {
        let seen = Protected<[CounterAction]>([])
        let root = makeRoot(interceptor: { action, dispatch in
            seen.withLock { $0.append(action) }
            if action == .add(1) { dispatch(.add(10)) }
        })
        root.dispatch(.add(1))
        #expect(await eventually { await root.state().count == 11 })
        #expect(seen.value == [.add(1), .add(10)])
    }

    @Test func deadObserversAreUnsubscribed() async throws {
        let root = makeRoot()
        let calls = Protected(0)
        root.subscribe(Observer { _ in calls.withLock { $0 += 1 }; return calls.value >= 2 ? .dead : .active })
        for _ in 0..<5 { root.dispatch(.increment) }
        _ = await root.state()
        #expect(calls.value == 2)
    }

    @Test func deduplicatedObserverOfAnUnchangedSliceIsNotCalled() async throws {
        let root = makeRoot()
        let titles = Protected<[String]>([])
        let counts = Protected<[Int]>([])
        root.subscribe(Observer(removeDuplicates: .equal { $0.title }) { state in titles.withLock { $0.append(state.title) }; return .active })
        root.subscribe(Observer(removeDuplicates: .keyPath(\.count)) { state in counts.withLock { $0.append(state.count) }; return .active })
        for _ in 0..<3 { root.dispatch(.increment) }
        root.dispatch(.setTicking(false))
        _ = await root.state()
        #expect(titles.value == ["counter"])
        #expect(counts.value == [0, 1, 2, 3])
    }

    @Test func equatingCombinators() {
        let title = Equating<CounterState>.equal { $0.title }
        let count = Equating<CounterState>.keyPath(\.count)
        let a = CounterState(count: 1, title: "a")
        let b = CounterState(count: 1, title: "b")
        #expect(!(title && count).isEqual(a, b))
        #expect((title || count).isEqual(a, b))
        #expect(Equating<CounterState>.alwaysEqual.isEqual(a, b))
        #expect(!Equating<CounterState>.neverEqual.isEqual(a, a))
        #expect(Equating<CounterState>.asEquatable.isEqual(a, a))
    }

    @Test func observersSubscribingAndUnsubscribingOthersDuringNotification() async throws {
        let root = makeRoot()
        let store = root.store
        let late = Protected<[Int]>([])
        let first = Protected<[Int]>([])
        let addedOnce = Protected(false)
        root.subscribe(Observer { state in
            first.withLock { $0.append(state.count) }
            if !addedOnce.withLock({ let was = $0; $0 = true; return was }) {
                store.subscribe(Observer { state in late.withLock { $0.append(state.count) }; return .active })
            }
            return state.count >= 3 ? .dead : .active
        })
        for _ in 0..<5 { root.dispatch(.increment) }
        #expect(await eventually { late.value.last == 5 })
        #expect(first.value == [0, 1, 2, 3])
        #expect(late.value == late.value.sorted() && Set(late.value).count == late.value.count,
                "a late subscriber starts from the state current when it joins, then sees each change once")
    }

    @Test func observersCanBeDeliveredOnAQueueOfTheirChoice() async throws {
        let root = makeRoot()
        let queue = DispatchQueue(label: "delivery")
        let onQueue = Protected<[Bool]>([])
        let key = DispatchSpecificKey<Int>()
        queue.setSpecific(key: key, value: 7)
        root.subscribe(Observer(on: queue) { _ in onQueue.withLock { $0.append(DispatchQueue.getSpecific(key: key) == 7) }; return .active })
        root.dispatch(.increment)
        #expect(await eventually { onQueue.value.count == 2 })
        #expect(onQueue.value.allSatisfy { $0 })
    }

    @Test func observerFailuresAreReportedAndTheObserverStays() async throws {
        let log = FailureLog<CounterState, CounterAction>()
        let root = makeRoot(log: log)
        let calls = Protected(0)
        root.subscribe(Observer { _ in calls.withLock { $0 += 1 }; throw Boom() })
        root.dispatch(.increment)
        root.dispatch(.increment)
        _ = await root.state()
        #expect(calls.value == 3)
        #expect(log.stages == [.observer, .observer, .observer])
    }

    @Test func scopedStoreMapsStateAndForwardsActions() async throws {
        let root = makeRoot()
        let scoped = root.store.scope { $0.count * 2 }
        let seen = Protected<[Int]>([])
        scoped.subscribe(Observer(removeDuplicates: .asEquatable) { doubled in seen.withLock { $0.append(doubled) }; return .active })
        scoped.dispatch(.add(3))
        root.dispatch(.setTicking(false))
        root.dispatch(.add(1))
        _ = await root.state()
        #expect(await eventually { seen.value == [0, 6, 8] })
    }

    struct Draft: Reducer {
        func reduce(into state: inout [CounterAction], action: CounterAction) -> [CounterEffect] {
            state.append(action)
            return []
        }
    }

    @Test func childStoresFollowTheFlowRules() async throws {
        let root = makeRoot()
        let childA = root.child(initialState: [CounterAction](), reducer: Draft())
        let childB = root.child(initialState: [CounterAction](), reducer: Draft())
        let seenA = Protected<[ChildState<CounterState, [CounterAction]>]>([])
        childA.subscribe(Observer { state in seenA.withLock { $0.append(state) }; return .active })
        childA.dispatch(.add(1))
        root.dispatch(.add(10))
        childB.dispatch(.add(100))
        #expect(await eventually { await root.state().count == 111 })
        #expect(await eventually { seenA.value.last?.root.count == 111 })
        let last = try #require(seenA.value.last)
        #expect(last.local == [.add(1)], "A's reducer saw only A's action: not the root's, not B's")
        #expect(seenA.value.map(\.root.count) == [0, 1, 11, 111], "A's observers see every root change")
    }

    @Test func droppedChildStoresDetach() async throws {
        let root = makeRoot()
        let calls = Protected(0)
        do {
            let child = root.child(initialState: [CounterAction](), reducer: Draft())
            child.subscribe(Observer { _ in calls.withLock { $0 += 1 }; return .active })
            child.dispatch(.increment)
            _ = await root.state()
        }
        let before = calls.value
        #expect(before > 0, "the child's observer was called while the child lived")
        root.dispatch(.increment)
        root.dispatch(.increment)
        _ = await root.state()
        #expect(calls.value == before)
    }

    @Test func handlesDoNotKeepTheRootAlive() async throws {
        var root: RootStore<CounterReducer>? = makeRoot()
        let store = root!.store
        weak let weakRoot = root
        root = nil
        #expect(weakRoot == nil)
        store.dispatch(.increment)
    }

    @Test func burstsAreBatchedForObserversButNotForReducers() async throws {
        let gate = DispatchSemaphore(value: 0)
        let queue = DispatchQueue(label: "store")
        let root = RootStore(
            initialState: CounterState(), reducer: CounterReducer(),
            configuration: StoreConfiguration(executor: queue, notification: .batched(maximumActions: 1000)))
        let seen = Protected<[Int]>([])
        root.subscribe(Observer { state in seen.withLock { $0.append(state.count) }; return .active })
        queue.async { gate.wait() }
        for _ in 0..<500 { root.dispatch(.increment) }
        gate.signal()
        #expect(await root.state().count == 500)
        #expect(await eventually { seen.value.last == 500 })
        #expect(seen.value == [0, 500], "one notification for the whole burst")
    }

    @Test func presentersMakePropsOffTheStoreQueueAndDeduplicate() async throws {
        let root = makeRoot()
        let delivered = Protected<[String]>([])
        let queue = DispatchQueue(label: "ui")
        let presentation = DispatchQueue(label: "presentation")
        let key = DispatchSpecificKey<String>()
        presentation.setSpecific(key: key, value: "presentation")
        queue.setSpecific(key: key, value: "ui")
        let placesOfProps = Protected<Set<String>>([])
        let placesOfDelivery = Protected<Set<String>>([])
        let presenter = Presenter<CounterState, String>(
            presentation: .serial(presentation),
            removeStateDuplicates: .keyPath(\.count),
            removePropsDuplicates: .asEquatable,
            props: { state in
                _ = placesOfProps.withLock { $0.insert(DispatchQueue.getSpecific(key: key) ?? "elsewhere") }
                return "count is \(state.count / 2)"
            },
            deliverOn: queue
        ) { props in
            _ = placesOfDelivery.withLock { $0.insert(DispatchQueue.getSpecific(key: key) ?? "elsewhere") }
            delivered.withLock { $0.append(props) }
            return .active
        }
        root.store.subscribe(presenter)
        for _ in 0..<4 { root.dispatch(.increment) }
        _ = await root.state()
        #expect(await eventually { delivered.value.last == "count is 2" })
        #expect(delivered.value.count == Set(delivered.value).count, "equal props are not delivered twice")
        #expect(placesOfProps.value == ["presentation"])
        #expect(placesOfDelivery.value == ["ui"])
    }

    /// The one way observers are told (a store's, a presenter's, a scripted store's): skip what equals the last
    /// value offered, deliver on the observer's queue, end once at `.dead`, report what a body throws.
    @Test func anObserverDeliveryDeduplicatesDeliversWhereAskedAndEndsOnce() async throws {
        let queue = DispatchQueue(label: "delivery")
        let key = DispatchSpecificKey<String>()
        queue.setSpecific(key: key, value: "delivery")
        let seen = Protected<[Int]>([])
        let places = Protected<Set<String>>([])
        let ended = Protected(0)
        let errors = Protected(0)
        struct Odd: Error {}
        let delivery = ObserverDelivery(Observer<Int>(on: queue, removeDuplicates: .asEquatable) { value in
            _ = places.withLock { $0.insert(DispatchQueue.getSpecific(key: key) ?? "elsewhere") }
            seen.withLock { $0.append(value) }
            if value == 3 { throw Odd() }
            return value >= 4 ? .dead : .active
        }, report: { _ in errors.withLock { $0 += 1 } }, ended: { ended.withLock { $0 += 1 } })
        for value in [1, 1, 2, 2, 2, 3, 3, 4, 5, 4, 6] { delivery.offer(value) }
        queue.sync {}
        #expect(seen.value == [1, 2, 3, 4])
        #expect(places.value == ["delivery"])
        #expect(errors.value == 1, "a throwing body is reported and stays")
        #expect(ended.value == 1 && delivery.isDead)
    }

    @Test func aPresenterThatAnswersDeadIsUnsubscribed() async throws {
        let root = RootStore(initialState: CounterState(), reducer: CounterReducer())
        let made = Protected(0)
        root.store.subscribe(Presenter<CounterState, Int>(presentation: .storeContext, props: { state in
            made.withLock { $0 += 1 }
            return state.count
        }) { count in count >= 1 ? .dead : .active })
        for _ in 0..<5 {
            root.dispatch(.increment)
            _ = await root.state()
        }
        #expect(made.value == 2, "props for the first state and the one that ended it, none after")
    }

    @Test func manyThreadsDispatchingLoseNothing() async throws {
        let root = RootStore(initialState: CounterState(), reducer: CounterReducer(),
                             configuration: StoreConfiguration(errorReporter: .ignore))
        let store = root.store
        DispatchQueue.concurrentPerform(iterations: 16) { _ in
            for _ in 0..<10_000 { store.dispatch(.increment) }
        }
        #expect(await root.state().count == 160_000)
    }
}

/// `Transactional`: a reducer that throws after changing the state leaves it as it was; one that returns keeps
/// what it changed, and its commands and subscriptions pass through.
@Suite struct TransactionalTests {
    struct Partial: Reducer {
        func reduce(into state: inout CounterState, action: CounterAction) throws -> [CounterEffect] {
            state.count += 100 // (changes the state, then throws for .fail)
            if action == .fail { throw Boom() }
            return [.log("kept")]
        }
        func subscriptions(for state: CounterState) throws -> [String: CounterEffect] { ["log": .log("\(state.count)")] }
        var declaresSubscriptions: Bool { true }
    }

    @Test func aThrowingReducerLeavesTheStateAsItWas() throws {
        let reducer = Transactional(Partial())
        var state = CounterState(count: 1)
        #expect(throws: Boom.self) { try reducer.reduce(into: &state, action: .fail) }
        #expect(state.count == 1)
        #expect(try reducer.reduce(into: &state, action: .increment) == [.log("kept")])
        #expect(state.count == 101)
        #expect(try reducer.subscriptions(for: state) == ["log": .log("101")])
        #expect(reducer.declaresSubscriptions)
    }

    @Test func inAStoreAFailedActionChangesNothing() async throws {
        let root = RootStore(initialState: CounterState(), reducer: Transactional(Partial()))
        root.dispatch(.fail)
        root.dispatch(.increment)
        #expect(await root.state().count == 100)
    }
}
