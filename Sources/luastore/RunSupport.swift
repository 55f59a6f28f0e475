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

/// Waits for SIGINT or SIGTERM (then handled here rather than ending the process).
enum Interrupt {
    static func wait() async {
        signal(SIGINT, SIG_IGN)
        signal(SIGTERM, SIG_IGN)
        let queue = DispatchQueue(label: "luastore.signals")
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let once = Protected(false)
            let sources = [SIGINT, SIGTERM].map { DispatchSource.makeSignalSource(signal: $0, queue: queue) }
            for source in sources {
                source.setEventHandler {
                    guard once.withLock({ done in defer { done = true }; return !done }) else { return }
                    for source in sources { source.cancel() }
                    continuation.resume()
                }
                source.resume()
            }
        }
    }
}

/// Lines typed at a terminal, read off the cooperative pool.
enum TerminalLines {
    private static let reader = DispatchQueue(label: "luastore.terminal")

    static func next(prompt: String) async -> String? {
        await withCheckedContinuation { continuation in
            reader.async {
                Console.error(prompt, prefixed: false)
                continuation.resume(returning: Swift.readLine(strippingNewline: true))
            }
        }
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
