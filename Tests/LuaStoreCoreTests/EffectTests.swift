import Foundation
import LuaStoreCore
import LuaStoreTestSupport
import Testing

/// Subscriptions launched and cancelled by state, and URL effects against a real server on 127.0.0.1.
@Suite(.serialized, .tags(.concurrency)) struct EffectTests {
    static func effects(runner: URLEffectRunner) -> EffectInterpreter<CounterEffect, CounterState, CounterAction> {
        EffectInterpreter<CounterEffect, CounterState, CounterAction>()
            .handlingTimer("timer", interval: { effect in
                if case .timer(let every) = effect { return every }
                return nil
            }, action: { _ in .ticked })
            .handling("url") { effect, context in
                guard case .request(let request) = effect, let key = context.subscriptionKey else { return }
                let path = String(key.dropFirst("request ".count))
                switch await runner.perform(request) {
                case .success(let response): context.dispatch(.fetched(response.status, response.text ?? ""))
                case .failure(let failure): context.dispatch(.fetchFailed(path, failure.reason))
                }
            }
    }

    /// A timer ticks while the state asks for it. After it is cancelled, a witness timer of the same period,
    /// still running, ticks five times — time in which the cancelled one would have ticked too — and the
    /// cancelled one's count has not moved.
    @Test func timerSubscriptionIsLaunchedAndCancelledByState() async throws {
        let reducer = Reduce<CounterState, CounterAction, CounterEffect>({ state, action in
            switch action {
            case .setTicking(let on): state.ticking = on
            case .ticked: state.ticks += 1
            case .increment: state.count += 1 // the witness
            default: break
            }
            return []
        }, subscriptions: { state in
            var wanted: [String: CounterEffect] = ["witness": .timer(.milliseconds(11))]
            if state.ticking { wanted["ticker"] = .timer(.milliseconds(10)) }
            return wanted
        })
        let effects = EffectInterpreter<CounterEffect, CounterState, CounterAction>()
            .handlingTimer("timer", interval: { effect in
                if case .timer(let every) = effect { return every }
                return nil
            }, action: { effect in effect == .timer(.milliseconds(11)) ? .increment : .ticked })
        let root = RootStore(initialState: CounterState(), reducer: reducer, effects: effects)
        root.dispatch(.setTicking(true))
        #expect(await eventually(timeout: .seconds(30)) { await root.state().ticks >= 3 })
        #expect(await root.runningSubscriptions().keys.sorted() == ["ticker", "witness"])
        root.dispatch(.setTicking(false))
        let stopped = await root.state()
        #expect(await root.runningSubscriptions().keys.sorted() == ["witness"])
        #expect(await eventually(timeout: .seconds(30)) { await root.state().count >= stopped.count + 5 }, "the witness kept ticking")
        #expect(await root.state().ticks == stopped.ticks, "no tick reaches the reducer after the timer is cancelled")
        root.shutdown()
    }

    @Test func unchangedSubscriptionsAreLeftAlone() async throws {
        let launches = Protected(0)
        let firstContext = Protected<EffectContext<CounterState, CounterAction>?>(nil)
        let effects = EffectInterpreter<CounterEffect, CounterState, CounterAction>()
            .handling("timer") { _, context in
                launches.withLock { $0 += 1 }
                firstContext.withLock { if $0 == nil { $0 = context } }
                while !context.isCancelled { try await Task.sleep(for: .milliseconds(5)) }
            }
        let root = RootStore(initialState: CounterState(ticking: true), reducer: CounterReducer(), effects: effects)
        #expect(await eventually { launches.value == 1 })
        for _ in 0..<20 { root.dispatch(.increment) }
        // Every one of those transitions was diffed before this state was read (the store diffs subscriptions
        // after each action, on its context), and a relaunch cancels the running effect's lease right there.
        #expect(await root.state().count == 20)
        #expect(await root.runningSubscriptions().keys.sorted() == ["ticker"])
        #expect(firstContext.value?.isCancelled == false, "the first launch is still the running one")
        root.dispatch(.setTicking(false))
        _ = await root.state()
        #expect(firstContext.value?.isCancelled == true, "…and the check can see a cancellation")
        #expect(launches.value == 1)
    }

    @Test func lateResultsOfCancelledSubscriptionsNeverReachTheReducer() async throws {
        let release = Protected(false)
        let dispatched = Protected(false)
        let effects = EffectInterpreter<CounterEffect, CounterState, CounterAction>()
            .handling("timer") { _, context in
                // Ignores cancellation on purpose, then reports. (It waits in a detached task, which the
                // cancellation does not reach: a cancelled `Task.sleep` returns at once, and looping on it
                // would spin and starve the cooperative pool.)
                while !release.value { await Task.detached { try? await Task.sleep(for: .milliseconds(2)) }.value }
                context.dispatch(.ticked)
                dispatched.withLock { $0 = true }
            }
        let root = RootStore(initialState: CounterState(ticking: true), reducer: CounterReducer(), effects: effects)
        _ = await root.state()
        root.dispatch(.setTicking(false))
        _ = await root.state()
        release.withLock { $0 = true }
        #expect(await eventually { dispatched.value }, "the cancelled handler did report")
        // Had the store accepted it, it would be queued before this read, which runs after what is queued.
        #expect(await root.state().ticks == 0)
    }

    /// Commands of the kinds an interpreter runs in turn start one at a time, in the order the reducer returned
    /// them, though the earlier ones take longer; commands of other kinds are not held back by them.
    @Test func commandsInTurnTakeEffectInTheOrderTheyWereAskedFor() async throws {
        let finished = Protected<[String]>([])
        let reducer = Reduce<CounterState, CounterAction, CounterEffect> { state, action in
            guard case .increment = action else { return [] }
            state.count += 1
            return state.count == 1 ? [.log("1"), .timer(.zero)] : [.log("\(state.count)")]
        }
        let effects = EffectInterpreter<CounterEffect, CounterState, CounterAction>()
            .handling("log") { effect, _ in
                guard case .log(let text) = effect, let number = Int(text) else { return }
                try? await Task.sleep(for: .milliseconds(number == 1 ? 300 : max(0, 20 - number))) // the first the slowest
                finished.withLock { $0.append(text) }
            }
            .handling("timer") { _, _ in finished.withLock { $0.append("other") } }
            .inTurn(["log"])
        let root = RootStore(initialState: CounterState(), reducer: reducer, effects: effects)
        for _ in 0..<20 { root.dispatch(.increment) }
        #expect(await eventually(timeout: .seconds(30)) { finished.value.count == 21 })
        #expect(finished.value == ["other"] + (1...20).map(String.init), "\(finished.value)")
        root.shutdown()
    }

    @Test func unknownEffectKindsAreReported() async throws {
        let log = FailureLog<CounterState, CounterAction>()
        let root = RootStore(initialState: CounterState(), reducer: CounterReducer(),
                             configuration: StoreConfiguration(errorReporter: log.reporter))
        for _ in 0..<10 { root.dispatch(.increment) }
        #expect(await eventually { log.stages == [.effect("log")] })
        #expect(log.failures.value.first?.action == .increment)
    }

    @Test func failingEffectsAreReportedWithTheState() async throws {
        let log = FailureLog<CounterState, CounterAction>()
        let effects = EffectInterpreter<CounterEffect, CounterState, CounterAction>()
            .handling("log") { _, _ in throw Boom() }
        let root = RootStore(initialState: CounterState(), reducer: CounterReducer(), effects: effects,
                             configuration: StoreConfiguration(errorReporter: log.reporter))
        for _ in 0..<10 { root.dispatch(.increment) }
        for _ in 0..<5 { root.dispatch(.add(1)) }
        #expect(await eventually { log.stages == [.effect("log")] })
        let failure = try #require(log.failures.value.first)
        #expect(failure.error is Boom)
        #expect(failure.action == .increment)
        #expect((failure.state?.count ?? 0) >= 10, "the state when the failure was reported")
    }

    @Test func requestSetInStateLaunchesAndCancelsRequests() async throws {
        let server = try await TestServer.start()
        let root = RootStore(initialState: CounterState(), reducer: CounterReducer(baseURL: server.base),
                             effects: Self.effects(runner: URLEffectRunner()))
        root.dispatch(.fetch("/hello"))
        #expect(await eventually { await root.state().results == ["200 hello"] })
        root.dispatch(.fetch("/slow"))
        #expect(await eventually { server.slowStarted.value == 1 })
        root.dispatch(.cancelFetch("/slow"))
        #expect(await eventually { await root.runningSubscriptions().keys.sorted() == ["request /hello"] })
        // The server answers the slow request after 2 s (its timeout is 30 s): uncancelled, that answer would be
        // reported before the answer to a request made after the server sent it.
        #expect(await eventually(timeout: .seconds(10)) { server.slowFinished.value == 1 })
        root.dispatch(.fetch("/json"))
        #expect(await eventually { await root.state().results.count >= 2 })
        let results = await root.state().results
        #expect(results.first == "200 hello")
        #expect(results.count == 2 && results.last?.hasPrefix("200 {") == true, "the cancelled request reported nothing: \(results)")
        await server.stop()
    }

    /// A runner opens its session (two sockets on Linux) at its first request: thousands of stores that never ask
    /// for the network hold no descriptors for it.
    @Test func aRunnerOpensNoSessionUntilItsFirstRequest() async throws {
        func descriptors() throws -> Int { try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count }
        let before = try descriptors()
        let runners = (0..<500).map { _ in URLEffectRunner() }
        let after = try descriptors()
        #expect(after < before + 100, "500 idle runners opened \(after - before) descriptors")
        let refused = await runners[0].perform(URLRequestEffect(url: "http://example.invalid/"))
        if case .failure(let failure) = refused { #expect(failure.reason == .refusedHost) } else { Issue.record("an invalid host was not refused") }
        _ = runners
    }

    @Test func urlSuccessDecodesJSON() async throws {
        let server = try await TestServer.start()
        let runner = URLEffectRunner()
        let response = try await runner.perform(URLRequestEffect(url: server.base + "/json")).get()
        #expect(response.status == 200)
        #expect(response.headers["content-type"] == "application/json; charset=utf-8")
        #expect(response.json == .object(["name": .string("widget"), "items": .array([.integer(1), .number(2.5), .bool(true), .null]),
                                          "nested": .object(["ok": .bool(false)])]))
        let echo = try await runner.perform(URLRequestEffect(method: "POST", url: server.base + "/echo",
                                                             headers: ["X-Test": "yes"], body: Data("12345".utf8))).get()
        #expect(echo.json == .object(["method": .string("POST"), "header": .string("yes"), "length": .integer(5)]))
        await server.stop()
    }

    @Test func urlFailuresAreNamed() async throws {
        let server = try await TestServer.start()
        let runner = URLEffectRunner(policy: URLPolicy(maximumResponseBytes: 1 << 20))
        func reason(_ request: URLRequestEffect) async -> URLFailure.Reason? {
            if case .failure(let failure) = await runner.perform(request) { return failure.reason }
            return nil
        }
        let error = await runner.perform(URLRequestEffect(url: server.base + "/error"))
        guard case .failure(let failure) = error else { Issue.record("expected a failure"); return }
        #expect(failure.reason == .httpStatus)
        #expect(failure.response?.status == 500)
        #expect(failure.response?.text == "broken")
        #expect(await reason(URLRequestEffect(url: server.base + "/slow", timeout: .milliseconds(200))) == .timedOut)
        #expect(await reason(URLRequestEffect(url: "http://127.0.0.1:1/")) == .connectionFailed)
        #expect(await reason(URLRequestEffect(url: server.base + "/big")) == .responseTooLarge)
        #expect(await reason(URLRequestEffect(url: "not a url")) == .invalidURL)
        #expect(await reason(URLRequestEffect(url: "file:///etc/passwd")) == .refusedScheme)
        #expect(await reason(URLRequestEffect(url: "data:text/plain,hi")) == .refusedScheme)
        #expect(await reason(URLRequestEffect(url: "ftp://127.0.0.1/")) == .refusedScheme)
        #expect(await reason(URLRequestEffect(url: "http://example.com/")) == .refusedHost)
        #expect(await reason(URLRequestEffect(url: server.base + "/hello", headers: ["X-Evil": "a\r\nHost: evil"])) == .invalidHeader)
        #expect(await reason(URLRequestEffect(method: "POST", url: server.base + "/echo", body: Data(count: 2 << 20))) == .requestTooLarge)
        let redirect = await runner.perform(URLRequestEffect(url: server.base + "/redirect"))
        guard case .failure(let refused) = redirect else { Issue.record("a redirect off the allow-list was followed"); return }
        #expect(refused.reason == .refusedHost)
        #expect(refused.message == "the server redirected to http://example.com/, and it is not on the allow-list")
        await server.stop()
    }

    @Test func cancellingTheCallerCancelsTheRequest() async throws {
        let server = try await TestServer.start()
        let runner = URLEffectRunner()
        let clock = ContinuousClock()
        let started = clock.now
        let task = Task { await runner.perform(URLRequestEffect(url: server.base + "/hang", timeout: .seconds(60))) }
        #expect(await eventually { server.slowStarted.value == 1 }, "the request reached the server")
        task.cancel()
        let result = await task.value
        guard case .failure(let failure) = result else { Issue.record("expected a failure"); return }
        #expect(failure.reason == .cancelled)
        // The route answers after 30 s, the request's timeout is 60 s: only the cancellation ends it sooner.
        #expect(clock.now - started < .seconds(20), "the request stopped without waiting for the response")
        await server.stop()
    }
}
