import Foundation
import LuaStoreCore
import LuaStoreTestSupport
import Testing

/// The store example from docs/swift-api.md, compiled and run so the page stays true. (Its server is the test
/// server, not the example's 127.0.0.1:8080, and what it prints is recorded.)
enum ReadmeExample {

    enum Action: Sendable { case queryChanged(String), loaded(String), failed(URLFailure.Reason), tick }

    struct AppState: Sendable, Equatable { var query = ""; var results = ""; var clock = 0 }

    enum AppEffect: StoreEffect {
        case fetch(URLRequestEffect)
        case timer(Duration)
        var kind: EffectKind { switch self { case .fetch: "url"; case .timer: "timer" } }
    }

    struct App: Reducer {
        let base: String

        func reduce(into state: inout AppState, action: Action) -> [AppEffect] {
            switch action {
            case .queryChanged(let query): state.query = query          // the subscription below follows it
            case .loaded(let text): state.results = text
            case .failed(let reason): state.results = "failed: \(reason)"
            case .tick: state.clock += 1
            }
            return []
        }

        // Long-running effects, by key: a new query replaces (cancels) the request in flight.
        func subscriptions(for state: AppState) -> [String: AppEffect] {
            var wanted: [String: AppEffect] = ["clock": .timer(.seconds(1))]
            if !state.query.isEmpty {
                wanted["search"] = .fetch(URLRequestEffect(url: "\(base)/search?q=\(state.query)"))
            }
            return wanted
        }
    }


    static func run(base: String, printed: Protected<[String]>) async -> RootStore<App> {
        let runner = URLEffectRunner(policy: URLPolicy(allowedHosts: ["127.0.0.1"]))
        let effects = EffectInterpreter<AppEffect, AppState, Action>()
            .handling("url") { effect, context in
                guard case .fetch(let request) = effect else { return }
                switch await runner.perform(request) {
                case .success(let response): context.dispatch(.loaded(response.text ?? ""))
                case .failure(let failure): context.dispatch(.failed(failure.reason))
                }
            }
            .handlingTimer("timer", interval: { if case .timer(let every) = $0 { every } else { nil } }, action: { _ in .tick })

        let root = RootStore(initialState: AppState(), reducer: App(base: base), effects: effects)
        root.store.scope(\.results).subscribe(Observer(removeDuplicates: .asEquatable) { results in
            printed.withLock { $0.append(results) } // the example: print(results)
            return .active
        })
        root.dispatch(.queryChanged("lua"))
        return root
    }
}

@Test func readmeStoreExampleRuns() async throws {
    let server = try await TestServer.start()
    let printed = Protected<[String]>([])
    let root = await ReadmeExample.run(base: server.base, printed: printed)
    // The observer got the empty results first, then the server's answer to the query; the clock subscription
    // runs beside the request.
    #expect(await eventually { printed.value == ["", "results for lua"] }, "\(printed.value)")
    #expect(await root.runningSubscriptions().keys.sorted() == ["clock", "search"], "both keys the state asks for")
    root.shutdown()
    await server.stop()
}
