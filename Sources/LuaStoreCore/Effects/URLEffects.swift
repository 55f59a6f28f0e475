import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An HTTP request as data: what a reducer returns (as a command) or keeps in its state (as a subscription,
/// cancelled when removed — Apex's request set).
public struct URLRequestEffect: Hashable, Sendable {
    /// `GET`, `POST`, …
    public var method: String
    /// The absolute URL.
    public var url: String
    /// Request headers; values may not contain CR, LF or NUL.
    public var headers: [String: String]
    /// The request body.
    public var body: Data?
    /// Total time allowed, from start to the last byte; `nil` uses the policy's default.
    public var timeout: Duration?

    /// A request.
    public init(method: String = "GET", url: String, headers: [String: String] = [:], body: Data? = nil, timeout: Duration? = nil) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
    }
}

/// A completed HTTP exchange with a 1xx–3xx status.
public struct URLResponseValue: Hashable, Sendable {
    /// The HTTP status code.
    public var status: Int
    /// Response headers, names in lower case.
    public var headers: [String: String]
    /// The body.
    public var body: Data
    /// The body decoded, when the response's content type is JSON and the body parses.
    public var json: JSONValue?

    /// The body as UTF-8 text, when it is.
    public var text: String? { String(data: body, encoding: .utf8) }

    /// A response (for effect stand-ins in tests; the runner makes the real ones).
    public init(status: Int, headers: [String: String] = [:], body: Data = Data(), json: JSONValue? = nil) {
        self.status = status
        self.headers = headers
        self.body = body
        self.json = json
    }
}

/// Why a URL effect failed. Every failure is one of these — never a crash or a silent drop.
public struct URLFailure: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kinds of failure.
    public enum Reason: String, Sendable, Hashable {
        /// The URL does not parse or has no host.
        case invalidURL
        /// The scheme is not allowed (`file:` and `data:` never are).
        case refusedScheme
        /// The host is not on the allow-list.
        case refusedHost
        /// A header name or value is malformed (values with CR/LF are refused).
        case invalidHeader
        /// The request body is larger than the policy allows.
        case requestTooLarge
        /// The connection could not be made or was lost.
        case connectionFailed
        /// The request took longer than its timeout.
        case timedOut
        /// The server answered with status 400 or more (`response` holds what it said).
        case httpStatus
        /// The response body is larger than the policy allows.
        case responseTooLarge
        /// The request was cancelled.
        case cancelled
        /// Anything else the network layer reported.
        case failed
    }

    /// The kind of failure.
    public var reason: Reason
    /// A sentence saying what happened.
    public var message: String
    /// For `.httpStatus`: the response.
    public var response: URLResponseValue?

    public var description: String { "\(reason.rawValue): \(message)" }

    /// A failure of kind `reason`, with the response for `.httpStatus`.
    public init(reason: Reason, message: String, response: URLResponseValue? = nil) {
        self.reason = reason
        self.message = message
        self.response = response
    }
}

/// What URL effects may do, checked before any I/O.
public struct URLPolicy: Sendable, Hashable {
    /// Allowed schemes (lower case). `file` and `data` are refused even if listed.
    public var allowedSchemes: Set<String>
    /// Allowed hosts: exact names, `*.example.com` for subdomains, or `*` for any host.
    public var allowedHosts: Set<String>
    /// Largest request body.
    public var maximumRequestBytes: Int
    /// Largest response body; a larger one is cut off and reported as `.responseTooLarge`.
    public var maximumResponseBytes: Int
    /// Timeout for requests that do not set one.
    public var defaultTimeout: Duration

    /// A policy. By default only loopback hosts are allowed.
    public init(
        allowedSchemes: Set<String> = ["http", "https"],
        allowedHosts: Set<String> = ["localhost", "127.0.0.1", "::1"],
        maximumRequestBytes: Int = 1 << 20,
        maximumResponseBytes: Int = 8 << 20,
        defaultTimeout: Duration = .seconds(30)
    ) {
        self.allowedSchemes = allowedSchemes
        self.allowedHosts = allowedHosts
        self.maximumRequestBytes = maximumRequestBytes
        self.maximumResponseBytes = maximumResponseBytes
        self.defaultTimeout = defaultTimeout
    }

    /// The request `effect` describes, or why it is refused.
    func validate(_ effect: URLRequestEffect) -> Result<URLRequest, URLFailure> {
        guard let url = URL(string: effect.url), let scheme = url.scheme?.lowercased() else {
            return .failure(URLFailure(reason: .invalidURL, message: "'\(effect.url)' is not an absolute URL"))
        }
        guard scheme != "file", scheme != "data", allowedSchemes.contains(scheme) else {
            return .failure(URLFailure(reason: .refusedScheme, message: "the scheme '\(scheme)' is not allowed"))
        }
        guard let host = url.host?.lowercased(), !host.isEmpty else {
            return .failure(URLFailure(reason: .invalidURL, message: "'\(effect.url)' has no host"))
        }
        guard allows(host: host) else {
            return .failure(URLFailure(reason: .refusedHost, message: "the host '\(host)' is not on the allow-list"))
        }
        let method = effect.method.uppercased()
        guard !method.isEmpty, method.utf8.allSatisfy({ (65...90).contains($0) || $0 == 45 }) else {
            return .failure(URLFailure(reason: .invalidHeader, message: "'\(effect.method)' is not an HTTP method"))
        }
        for (name, value) in effect.headers {
            guard !name.isEmpty, name.utf8.allSatisfy(Self.isTokenByte) else {
                return .failure(URLFailure(reason: .invalidHeader, message: "'\(name)' is not a valid header name"))
            }
            guard !value.utf8.contains(where: { $0 == 10 || $0 == 13 || $0 == 0 }) else {
                return .failure(URLFailure(reason: .invalidHeader, message: "the value of header '\(name)' contains CR, LF or NUL"))
            }
        }
        if let body = effect.body, body.count > maximumRequestBytes {
            return .failure(URLFailure(reason: .requestTooLarge, message: "the request body is \(body.count) bytes; the limit is \(maximumRequestBytes)"))
        }
        var request = URLRequest(url: url)
        request.httpMethod = method
        for (name, value) in effect.headers { request.setValue(value, forHTTPHeaderField: name) }
        request.httpBody = effect.body
        // The runner enforces the total timeout itself. FoundationNetworking on Linux fails the first request
        // of a session at once when its idle timeout is under a second, so this one is whole seconds and longer.
        request.timeoutInterval = (Self.seconds(effect.timeout ?? defaultTimeout)).rounded(.up) + 1
        return .success(request)
    }

    func allows(host: String) -> Bool {
        let host = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
        return allowedHosts.contains { rule in
            rule == "*" || rule.lowercased() == host || (rule.hasPrefix("*.") && host.hasSuffix(rule.dropFirst().lowercased()))
        }
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    private static func isTokenByte(_ byte: UInt8) -> Bool {
        (48...57).contains(byte) || (65...90).contains(byte) || (97...122).contains(byte) || "!#$%&'*+-.^_`|~".utf8.contains(byte)
    }
}

/// Performs `URLRequestEffect`s with `URLSession` (FoundationNetworking on Linux), within a `URLPolicy`:
/// the allow-list is checked before any I/O (redirects included), bodies are capped while they stream,
/// timeouts cover the whole exchange, and cancelling the calling task cancels the request.
///
/// ```swift
/// let runner = URLEffectRunner(policy: URLPolicy(allowedHosts: ["api.example.com"]))
/// switch await runner.perform(URLRequestEffect(url: "https://api.example.com/items")) {
/// case .success(let response): print(response.status, response.json ?? .null)
/// case .failure(let failure): print(failure.reason, failure.message)
/// }
/// ```
public final class URLEffectRunner: Sendable {
    /// The policy every request is checked against.
    public let policy: URLPolicy
    /// Made at the first request: a session holds descriptors and memory of its own (two sockets on Linux), and a
    /// host with thousands of stores that never ask for the network should not pay for thousands of them.
    private let session = Protected<URLSession?>(nil)
    private let delegate: SessionDelegate

    /// A runner with its own ephemeral session (made when the first request is performed).
    public init(policy: URLPolicy = URLPolicy()) {
        self.policy = policy
        delegate = SessionDelegate(policy: policy)
    }

    deinit {
        session.withLock { $0?.invalidateAndCancel() }
    }

    private var openSession: URLSession {
        session.withLock { session in
            if let session { return session }
            let configuration = URLSessionConfiguration.ephemeral
            configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
            configuration.urlCache = nil
            let made = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
            session = made
            return made
        }
    }

    /// Performs `effect`; the result is a response (status below 400) or a failure saying why. A redirect is
    /// followed only where the policy allows its host and `redirect` (the host's own rule, as an app's declared
    /// capabilities: nil allows it) gives no reason to refuse it; a refused one fails the request (`.refusedHost`).
    public func perform(_ effect: URLRequestEffect, redirect: (@Sendable (URL) -> String?)? = nil) async -> Result<URLResponseValue, URLFailure> {
        let request: URLRequest
        switch policy.validate(effect) {
        case .success(let valid): request = valid
        case .failure(let failure): return .failure(failure)
        }
        if Task.isCancelled { return .failure(URLFailure(reason: .cancelled, message: "the request was cancelled")) }
        let task = openSession.dataTask(with: request)
        let timeout = effect.timeout ?? policy.defaultTimeout
        let timer = Task { [delegate] in
            try await Task.sleep(for: timeout)
            delegate.markTimedOut(task, after: timeout)
        }
        defer { timer.cancel() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                delegate.register(task, continuation: continuation, redirect: redirect)
                task.resume()
            }
        } onCancel: {
            task.cancel()
        }
    }
}

/// Collects each task's response and body, enforcing the size cap and the allow-list on redirects.
private final class SessionDelegate: NSObject, URLSessionDataDelegate, Sendable {
    private struct Exchange {
        var continuation: CheckedContinuation<Result<URLResponseValue, URLFailure>, Never>
        var response: HTTPURLResponse?
        var body = Data()
        var failure: URLFailure?
        var redirect: (@Sendable (URL) -> String?)?
    }

    private let policy: URLPolicy
    private let exchanges = Protected<[Int: Exchange]>([:])

    init(policy: URLPolicy) { self.policy = policy }

    func register(_ task: URLSessionTask, continuation: CheckedContinuation<Result<URLResponseValue, URLFailure>, Never>,
                  redirect: (@Sendable (URL) -> String?)?) {
        exchanges.withLock { $0[task.taskIdentifier] = Exchange(continuation: continuation, redirect: redirect) }
    }

    func markTimedOut(_ task: URLSessionTask, after timeout: Duration) {
        let marked = exchanges.withLock { exchanges -> Bool in
            guard exchanges[task.taskIdentifier] != nil, exchanges[task.taskIdentifier]?.failure == nil else { return false }
            exchanges[task.taskIdentifier]?.failure = URLFailure(reason: .timedOut, message: "no complete response within \(timeout)")
            return true
        }
        if marked { task.cancel() }
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping (URLSession.ResponseDisposition) -> Void) {
        let limit = policy.maximumResponseBytes
        let allowed = exchanges.withLock { exchanges -> Bool in
            exchanges[dataTask.taskIdentifier]?.response = response as? HTTPURLResponse
            if response.expectedContentLength > Int64(limit) {
                exchanges[dataTask.taskIdentifier]?.failure = URLFailure(
                    reason: .responseTooLarge,
                    message: "the response body is \(response.expectedContentLength) bytes; the limit is \(limit)")
                return false
            }
            return true
        }
        completionHandler(allowed ? .allow : .cancel)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let limit = policy.maximumResponseBytes
        let tooLarge = exchanges.withLock { exchanges -> Bool in
            guard var exchange = exchanges[dataTask.taskIdentifier], exchange.failure == nil else { return false }
            exchange.body.append(data)
            if exchange.body.count > limit {
                exchange.failure = URLFailure(reason: .responseTooLarge, message: "the response body exceeds the limit of \(limit) bytes")
                exchange.body = Data()
            }
            exchanges[dataTask.taskIdentifier] = exchange
            return exchange.failure != nil
        }
        if tooLarge { dataTask.cancel() }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void) {
        // (Checked as the first request is: the policy, then the host's own rule for the exchange.)
        let refusal: String?
        if let url = request.url, let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased(),
           scheme != "file", scheme != "data", policy.allowedSchemes.contains(scheme), policy.allows(host: host) {
            refusal = exchanges.withLock { $0[task.taskIdentifier]?.redirect }?(url)
        } else {
            refusal = "it is not on the allow-list"
        }
        guard let refusal else {
            completionHandler(request)
            return
        }
        exchanges.withLock { exchanges in
            exchanges[task.taskIdentifier]?.failure = URLFailure(
                reason: .refusedHost, message: "the server redirected to \(request.url?.absoluteString ?? "a URL it did not name"), and \(refusal)")
        }
        completionHandler(nil)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        guard let exchange = exchanges.withLock({ $0.removeValue(forKey: task.taskIdentifier) }) else { return }
        exchange.continuation.resume(returning: Self.result(of: exchange, error: error))
    }

    private static func result(of exchange: Exchange, error: (any Error)?) -> Result<URLResponseValue, URLFailure> {
        if let failure = exchange.failure { return .failure(failure) }
        if let error {
            let code = (error as NSError).code
            switch code {
            case NSURLErrorCancelled:
                return .failure(URLFailure(reason: .cancelled, message: "the request was cancelled"))
            case NSURLErrorTimedOut:
                return .failure(URLFailure(reason: .timedOut, message: error.localizedDescription))
            case NSURLErrorCannotConnectToHost, NSURLErrorCannotFindHost, NSURLErrorNetworkConnectionLost,
                 NSURLErrorNotConnectedToInternet, NSURLErrorDNSLookupFailed:
                return .failure(URLFailure(reason: .connectionFailed, message: error.localizedDescription))
            case NSURLErrorBadURL, NSURLErrorUnsupportedURL:
                return .failure(URLFailure(reason: .invalidURL, message: "the URL cannot be requested (the network layer refused it)"))
            default:
                return .failure(URLFailure(reason: .failed, message: "the network layer failed the request (URL error \(code))"))
            }
        }
        guard let http = exchange.response else {
            return .failure(URLFailure(reason: .failed, message: "the server sent no HTTP response"))
        }
        var headers: [String: String] = [:]
        for (name, value) in http.allHeaderFields {
            headers[String(describing: name).lowercased()] = String(describing: value)
        }
        let isJSON = headers["content-type"]?.lowercased().contains("json") == true
        let response = URLResponseValue(
            status: http.statusCode, headers: headers, body: exchange.body,
            json: isJSON ? try? JSONValue(parsing: exchange.body) : nil)
        if http.statusCode >= 400 {
            return .failure(URLFailure(reason: .httpStatus, message: "the server answered \(http.statusCode)", response: response))
        }
        return .success(response)
    }
}
