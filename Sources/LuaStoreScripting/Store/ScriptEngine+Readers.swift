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
            var child: Int64?
            if case .childProps(let id) = kind { child = id }
            try runtime.register(reader: id, try readerFunction(kind), child: child)
            offer(try runtime.evaluate(reader: id, root: kind.rootName), to: id)
        } catch {
            runtime.reset()
            report(ScriptFailure(stage: kind.stage, error: placed(error, of: kind), action: nil))
        }
    }

    /// A reader's failure that has no place of its own — a value it returned that does not convert (a function,
    /// bytes that are not UTF-8, a cycle) — placed at its function (`app.lua:7`, where `props` is defined); a
    /// selector's, which the host made, stays as it is.
    func placed(_ error: LuaError, of kind: ReaderKind) -> LuaError {
        if case .path = kind { return error }
        guard error.chunkName == nil, let function = try? readerFunction(kind) else { return error }
        return located(error, returnedBy: function)
    }

    /// Runs `props` on the state once, as a reader would, keeping nothing (a reload's or a migration's check before
    /// it is kept); a failure leaves the runtime at rest.
    func checkProps(_ props: LuaReference) throws(LuaError) {
        let check: Int64 = -2
        do {
            try runtime.register(reader: check, props)
            defer { runtime.unregister(reader: check) }
            _ = try runtime.evaluate(reader: check, root: "props")
        } catch {
            runtime.reset()
            throw error
        }
    }

    func readerFunction(_ kind: ReaderKind) throws(LuaError) -> LuaReference {
        switch kind {
        case .props:
            return app.props
        case .path(let keys):
            return try runtime.selector(at: keys)
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
        let flushed: StateRuntime.Flushed
        do {
            flushed = try runtime.flush(everything: everything, readers: { self.readers.kind(of: $0) })
        } catch {
            runtime.reset()
            report(ScriptFailure(stage: .props, error: error, action: nil))
            return
        }
        deliver(flushed)
    }

    /// Delivers what readers gave, in order: new values (to observers whose value changed), and failures.
    func deliver(_ flushed: StateRuntime.Flushed) {
        for outcome in flushed.outcomes {
            switch outcome {
            case .value(let id, let value):
                offer(value, to: id)
            case .failure(let id, let error):
                guard let reader = readers[id] else { continue }
                report(ScriptFailure(stage: reader.kind.stage, error: placed(error, of: reader.kind), action: nil))
            }
        }
    }

    /// Delivers what the readers gave within a run; notes whether the run left nothing for the store's flush.
    func deliverRunFlush(_ run: StateRuntime.RunFlush) {
        deliver(run.flushed)
        if let failure = run.failure {
            runtime.reset()
            report(ScriptFailure(stage: .props, error: failure, action: nil))
        }
        readers.settled(atCalls: run.settled ? vm.calls : nil)
    }

    /// Hands `value` to the reader's delivery (which skips it when it equals the last one, by the observer's
    /// equating).
    func offer(_ value: LuaValue, to id: Int64) {
        guard let reader = readers[id] else { return }
        // Props that do not match their declaration are the props' failure: reported, not delivered (the action
        // that made them stays applied, as with any props failure).
        if app.checksProps, case .props = reader.kind, let failure = propsMismatch(value) {
            report(ScriptFailure(stage: .props, error: failure, action: nil))
            return
        }
        reader.delivery.offer(value)
        if reader.delivery.isDead { removeReader(id) }
    }

    func removeReader(_ id: Int64) {
        guard readers.remove(id) else { return }
        runtime.unregister(reader: id)
    }
}
