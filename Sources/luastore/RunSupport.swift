import ArgumentParser
import Foundation
import LuaStoreCommandLine
import LuaStoreCore
import LuaStorePersistence
import LuaStoreScripting

/// The input line of each action dispatched from the command line, by dispatch index (what a reducer failure
/// names, `ScriptFailure.dispatchIndex`), kept until the store has reduced it.
final class DispatchedLines: Sendable {
    /// Actions dispatched between the run's barriers, at most (what this keeps, and what waits in the store).
    static let window = 16_384

    private let state = Protected<(first: UInt64, numbers: [Int])>((1, []))

    /// The lines of the actions about to be dispatched, in order.
    func dispatching(_ numbers: [Int]) {
        guard !numbers.isEmpty else { return }
        state.withLock { $0.numbers.append(contentsOf: numbers) }
    }

    /// Drops what every dispatched action has been reduced past (after a barrier).
    func forgetReduced() {
        state.withLock { state in
            state.first += UInt64(state.numbers.count)
            state.numbers.removeAll(keepingCapacity: true)
        }
    }

    /// The line of the `index`th action dispatched, if it is kept.
    func line(of index: UInt64) -> Int? {
        state.withLock { state in
            guard index >= state.first, index - state.first < UInt64(state.numbers.count) else { return nil }
            return state.numbers[Int(index - state.first)]
        }
    }
}

/// SIGINT and SIGTERM while `luastore run` runs, handled rather than ending the process: the first ends the input —
/// the actions read are reduced, and everything the run writes is finished as when its input ends (the recording
/// put in place, the state file written, the database closed, a bundle's folder removed) — and says so; a second,
/// a second or more later, ends the process at once. Made once, before the run reads its input.
final class Interruption: @unchecked Sendable { // (`sources` is set in `init` only; the rest is under `state`)
    private struct State {
        var signal: Int32?
        var heardAt = ContinuousClock.now
        var handlers: [@Sendable () -> Void] = []
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Protected(State())
    private var sources: [any DispatchSourceSignal] = []

    init() {
        let queue = DispatchQueue(label: "luastore.signals")
        for number in [SIGINT, SIGTERM] {
            Glibc.signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler { [unowned self] in heard(number) }
            source.resume()
            sources.append(source)
        }
    }

    deinit {
        for source in sources { source.cancel() } // (its handlers hold it unowned)
    }

    /// The signal heard first, if one was.
    var signal: Int32? { state.withLock { $0.signal } }

    /// Calls `handler` when the first signal comes (at once if it came).
    func onSignal(_ handler: @escaping @Sendable () -> Void) {
        let now = state.withLock { state -> Bool in
            if state.signal == nil { state.handlers.append(handler) }
            return state.signal != nil
        }
        if now { handler() }
    }

    /// Waits for the first signal.
    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                if state.signal == nil { state.waiters.append(continuation) }
                return state.signal != nil
            }
            if now { continuation.resume() }
        }
    }

    private func heard(_ number: Int32) {
        // (A signal that comes again within a second is the same request — a tool that signals the process group and
        // the process both — not a person insisting.)
        var repeated = false
        let first = state.withLock { state -> (handlers: [@Sendable () -> Void], waiters: [CheckedContinuation<Void, Never>])? in
            guard state.signal == nil else {
                repeated = ContinuousClock.now - state.heardAt < .seconds(1)
                return nil
            }
            state.signal = number
            state.heardAt = .now
            defer { state.handlers = []; state.waiters = [] }
            return (state.handlers, state.waiters)
        }
        guard let first else {
            if repeated { return }
            Console.error("interrupted again: stopped at once")
            Console.flush()
            _exit(128 + number)
        }
        for handler in first.handlers { handler() }
        for waiter in first.waiters { waiter.resume() }
    }

    /// The signal's name (`SIGINT`, `SIGTERM`).
    static func name(_ number: Int32) -> String { number == SIGINT ? "SIGINT" : "SIGTERM" }
}

/// Lines typed at a terminal, read off the cooperative pool.
enum TerminalLines {
    private static let reader = DispatchQueue(label: "luastore.terminal")

    /// The line waited for, answered once: by the terminal, or as nil by `interrupt()`.
    private static let waiting = Protected<CheckedContinuation<String?, Never>?>(nil)

    static func next(prompt: String) async -> String? {
        await withCheckedContinuation { continuation in
            waiting.withLock { $0 = continuation }
            reader.async {
                Console.error(prompt, prefixed: false)
                let line = Swift.readLine(strippingNewline: true)
                waiting.withLock { $0.take() }?.resume(returning: line)
            }
        }
    }

    /// Answers the line waited for, if one is, with nil (the terminal's reader is left to end with the process).
    static func interrupt() {
        waiting.withLock { $0.take() }?.resume(returning: nil)
    }
}

/// A size given on the command line: a number of bytes, or of KiB, MiB or GiB with `K`, `M` or `G` after it.
struct ByteSize: ExpressibleByArgument {
    let bytes: Int

    init(_ bytes: Int) { self.bytes = bytes }

    init?(argument: String) {
        let units: [Character: Int] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30]
        var digits = argument.uppercased()
        if digits.hasSuffix("IB") { digits.removeLast(2) } else if digits.hasSuffix("B"), digits.count > 1, units[digits.dropLast().last!] != nil { digits.removeLast() }
        var unit = 1
        if let last = digits.last, let scale = units[last] {
            unit = scale
            digits.removeLast()
        }
        guard let count = Int(digits), count > 0, count <= Int.max / unit else { return nil }
        bytes = count * unit
    }

    var defaultValueDescription: String { bytes % (1 << 20) == 0 ? "\(bytes >> 20)M" : "\(bytes)" }
}
