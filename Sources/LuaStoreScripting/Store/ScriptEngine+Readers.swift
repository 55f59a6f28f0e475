import Dispatch
import Foundation
import LuaKit
import LuaStoreCore

/// Readers: props, selectors and child props, run again only when what they read changed, and their values
/// delivered deduplicated.
extension ScriptEngine {
    // MARK: Readers

    /// Attaches `observer` to a new reader of `kind` and delivers its current value.
    func addReader(_ kind: ReaderKind, _ observer: Observer<LuaValue>) {
        let id = readers.makeID()
        let report = self.report
        let delivery = ObserverDelivery(observer, report: { report(ScriptFailure(stage: .observer, error: LuaError(.runtime, "\($0)"))) },
                                        ended: { [weak self] in
            // (A body on the engine's thread has its reader removed by `offer` at once.)
            self?.thread.async { [weak self] in self?.removeReader(id) }
        })
        readers[id] = Readers.Reader(kind: kind, delivery: delivery)
        do {
            var arguments: [LuaArgument] = [.value(.integer(id)), .reference(try readerFunction(kind))]
            if case .childProps(let child) = kind { arguments.append(.value(.integer(child))) }
            try vm.call(runtime[.register], arguments: arguments)
            let value = try vm.call(runtime[.evaluate], arguments: [.value(.integer(id))]) { results throws(LuaError) in
                try results.value(1, root: kind.rootName)
            }
            offer(value, to: id)
        } catch {
            _ = try? vm.call(runtime[.reset], arguments: [])
            report(ScriptFailure(stage: kind.stage, error: error, action: nil))
        }
    }

    func readerFunction(_ kind: ReaderKind) throws(LuaError) -> LuaReference {
        switch kind {
        case .props:
            return app.props
        case .path(let keys):
            guard let selector = try vm.callForReferences(runtime[.path], arguments: keys.map { .value($0.value) }).first ?? nil else {
                throw LuaError(.runtime, "the state runtime made no selector")
            }
            return selector
        case .childProps(let child):
            guard let module = children[child] else { throw LuaError(.runtime, "the child store is gone") }
            return module.props
        }
    }

    /// Re-evaluates the readers whose inputs changed (all of them when `everything`) and delivers new values.
    /// Values are converted straight off the Lua stack; one reader's bad value is reported for that reader alone.
    /// Nothing to do, and no call into the VM, when the last run left nothing for a flush (`Readers.areSettled`).
    func flush(everything: Bool = false) {
        if !everything, readers.areSettled(atCalls: vm.calls) { return }
        let flushed: Flushed
        do {
            flushed = try vm.call(runtime[.flush], arguments: [.value(.boolean(everything))]) { results throws(LuaError) in
                try readFlushed(results, at: 1)
            }
        } catch {
            _ = try? vm.call(runtime[.reset], arguments: [])
            report(ScriptFailure(stage: .props, error: error, action: nil))
            return
        }
        deliver(flushed)
    }

    /// What readers gave, in the order they ran: each one's value, or its failure. (An enum of this module's own,
    /// not a tuple holding a `Result`: copying and destroying those went through the generic types' witnesses,
    /// per value delivered.)
    struct Flushed {
        enum Outcome {
            case value(id: Int64, LuaValue)
            case failure(id: Int64, LuaError)
        }

        var outcomes: [Outcome] = []
    }

    /// Reads what readers gave from `results`, in the `StateRuntime.FlushResult` layout starting at `first`.
    func readFlushed(_ results: LuaResults, at first: Int32) throws(LuaError) -> Flushed {
        typealias Result = StateRuntime.FlushResult
        var flushed = Flushed()
        let count = results.integer(first + Result.count) ?? 0
        guard count > 0 else { return flushed }
        flushed.outcomes.reserveCapacity(Int(count))
        for position in stride(from: Int64(1), through: count, by: 1) {
            guard let readerID = results.integer(first + Result.readers, at: position), let reader = readers[readerID] else {
                continue
            }
            if results.boolean(first + Result.failed, at: position) == true {
                let message = try results.value(first + Result.values, at: position, root: "message")
                flushed.outcomes.append(.failure(id: readerID, LuaError(.runtime, parsing: message.string ?? "\(message)")))
                continue
            }
            do throws(LuaError) {
                flushed.outcomes.append(.value(id: readerID, try results.value(first + Result.values, at: position, root: reader.kind.rootName)))
            } catch {
                flushed.outcomes.append(.failure(id: readerID, error))
            }
        }
        return flushed
    }

    /// Delivers what readers gave, in order: new values (to observers whose value changed), and failures.
    func deliver(_ flushed: Flushed) {
        for outcome in flushed.outcomes {
            switch outcome {
            case .value(let id, let value):
                offer(value, to: id)
            case .failure(let id, let error):
                guard let reader = readers[id] else { continue }
                report(ScriptFailure(stage: reader.kind.stage, error: error, action: nil))
            }
        }
    }

    /// What the readers gave within a run, whether the run left nothing for a flush, and the flush's failure.
    struct RunFlush {
        let flushed: Flushed
        let settled: Bool
        let failure: LuaError?
    }

    /// What the readers gave within a run (`StateRuntime.RunResult`).
    func readRunFlush(_ results: LuaResults) throws(LuaError) -> RunFlush {
        typealias Result = StateRuntime.RunResult
        let kind: LuaError.Kind = results.boolean(Result.flushTimedOut) == true ? .timeout : .runtime
        let failure = results.isNil(Result.flushFailure) ? nil
            : LuaError(kind, parsing: (try? results.value(Result.flushFailure, root: "error"))?.string ?? "the readers failed")
        return RunFlush(flushed: try readFlushed(results, at: Result.flushed), settled: results.boolean(Result.settled) == true,
                        failure: failure)
    }

    /// Delivers what the readers gave within a run; notes whether the run left nothing for the store's flush.
    func deliverRunFlush(_ run: RunFlush) {
        deliver(run.flushed)
        if let failure = run.failure {
            _ = try? vm.call(runtime[.reset], arguments: [])
            report(ScriptFailure(stage: .props, error: failure, action: nil))
        }
        readers.settled(atCalls: run.settled ? vm.calls : nil)
    }

    /// Hands `value` to the reader's delivery (which skips it when it equals the last one, by the observer's
    /// equating).
    func offer(_ value: LuaValue, to id: Int64) {
        guard let reader = readers[id] else { return }
        reader.delivery.offer(value)
        if reader.delivery.isDead { removeReader(id) }
    }

    func removeReader(_ id: Int64) {
        guard readers.remove(id) else { return }
        _ = try? vm.call(runtime[.unregister], arguments: [.value(.integer(id))])
    }
}
