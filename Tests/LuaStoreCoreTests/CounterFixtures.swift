import Dispatch
import Foundation
import LuaStoreCore
import Synchronization
import LuaStoreTestSupport
import Testing

/// Failures a store reported.
final class FailureLog<State: Sendable, Action: Sendable>: Sendable {
    let failures = Protected<[StoreFailure<State, Action>]>([])
    var reporter: ErrorReporter<State, Action> { ErrorReporter { failure in self.failures.withLock { $0.append(failure) } } }
    var stages: [StoreFailure<State, Action>.Stage] { failures.value.map(\.stage) }
}

/// A counter app used across the store tests.
enum CounterAction: Sendable, Equatable, CustomStringConvertible {
    case increment
    case add(Int)
    case fail
    case setTicking(Bool)
    case ticked
    case fetch(String)
    case fetched(Int, String)
    case fetchFailed(String, URLFailure.Reason)
    case cancelFetch(String)

    var description: String {
        switch self {
        case .increment: "increment"
        case .add(let n): "add(\(n))"
        case .fail: "fail"
        case .setTicking(let on): "setTicking(\(on))"
        case .ticked: "ticked"
        case .fetch(let path): "fetch(\(path))"
        case .fetched(let status, let body): "fetched(\(status), \(body))"
        case .fetchFailed(let path, let reason): "fetchFailed(\(path), \(reason))"
        case .cancelFetch(let path): "cancelFetch(\(path))"
        }
    }
}

struct CounterState: Sendable, Equatable {
    var count = 0
    var ticking = false
    var ticks = 0
    var requests: Set<String> = []
    var results: [String] = []
    var title = "counter"
}

enum CounterEffect: StoreEffect {
    case log(String)
    case timer(Duration)
    case request(URLRequestEffect)

    var kind: EffectKind {
        switch self {
        case .log: "log"
        case .timer: "timer"
        case .request: "url"
        }
    }
}

struct Boom: Error, Equatable {}

/// Increments and adds; logs every tenth; ticks while `ticking`; keeps requests in state (Apex request set).
struct CounterReducer: Reducer {
    let baseURL: String

    init(baseURL: String = "http://127.0.0.1:1") { self.baseURL = baseURL }

    func reduce(into state: inout CounterState, action: CounterAction) throws -> [CounterEffect] {
        switch action {
        case .increment:
            state.count += 1
            return state.count % 10 == 0 ? [.log("reached \(state.count)")] : []
        case .add(let amount):
            state.count += amount
            return []
        case .fail:
            throw Boom()
        case .setTicking(let on):
            state.ticking = on
        case .ticked:
            state.ticks += 1
        case .fetch(let path):
            state.requests.insert(path)
        case .fetched(let status, let body):
            state.results.append("\(status) \(body)")
        case .fetchFailed(let path, let reason):
            state.requests.remove(path)
            state.results.append("\(path): \(reason)")
        case .cancelFetch(let path):
            state.requests.remove(path)
        }
        return []
    }

    func subscriptions(for state: CounterState) throws -> [String: CounterEffect] {
        var wanted: [String: CounterEffect] = [:]
        if state.ticking { wanted["ticker"] = .timer(.milliseconds(10)) }
        for path in state.requests {
            // (A timeout no loaded machine reaches: tests see a cancellation by the answer it kept from the state.)
            wanted["request " + path] = .request(URLRequestEffect(url: baseURL + path, timeout: .seconds(30)))
        }
        return wanted
    }
}
