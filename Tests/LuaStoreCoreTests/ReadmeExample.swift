import Foundation
import LuaStoreCore
import LuaStoreTestSupport
import Testing

/// The store example from README.md, compiled and run so the README stays true.
enum ReadmeExample {

    enum Action: Sendable { case queryChanged(String), loaded(String), failed(URLFailure.Reason), tick }

    struct AppState: Sendable, Equatable { var query = ""; var results = ""; var clock = 0 }

    enum AppEffect: StoreEffect {
        case fetch(URLRequestEffect)
        case timer(Duration)
        var kind: EffectKind { switch self { case .fetch: "url"; case .timer: "timer" } }
    }

    struct App: Reducer {
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
                wanted["search"] = .fetch(URLRequestEffect(url: "http://127.0.0.1:8080/search?q=\(state.query)"))
            }
            return wanted
        }
    }


    static func run() async {
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

        let root = RootStore(initialState: AppState(), reducer: App(), effects: effects)
        root.store.scope(\.results).subscribe(Observer(removeDuplicates: .asEquatable) { results in
            print(results)
            return .active
        })
        root.dispatch(.queryChanged("lua"))

        _ = await root.state()
    }
}

@Test func readmeStoreExampleRuns() async {
    await ReadmeExample.run()
}
