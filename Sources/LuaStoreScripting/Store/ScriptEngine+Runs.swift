import LuaKit
import LuaStoreCore

/// Runs: the queued actions the store hands over at once cross into the VM in one call.
extension ScriptEngine {
    /// Applies `actions` in order, each as `reduce(_:)` would (its own transaction and time budget; a failing
    /// one is undone and the next runs), crossing into the VM once for the whole run rather than per action.
    /// Stops early, after an action whose subscriptions the store must diff before the next one. When
    /// journaling, the runtime collects each action's changes as the run goes, read once per crossing. With a
    /// store (`notificationInterval`), the readers run within the run at its notification points
    /// (`sinceNotification` actions were reduced since the last), when an action since the last point changed
    /// what they read, and what they gave is delivered, in order, as each crossing returns (`deliverRunFlush`);
    /// after an action with commands or a failure, the run stops when a point lies at or after it, for the
    /// store to launch or report them before observers hear of what came after. For a single action it is
    /// `reduce(_:)`.
    func reduce(run queued: ArraySlice<LuaValue>, sinceNotification: Int = 0) -> RunOutcome<ScriptEffect> {
        var outcome = RunOutcome<ScriptEffect>()
        guard let firstAction = queued.first else { return outcome }
        if journal.history.traveling { // held until the store resumes (`ScriptEngine+History.swift`)
            journal.history.hold(run: queued)
            outcome.applied = queued.count
            return outcome
        }
        // The run's time, read once (a replay's schedule may end the run where the recorded time changes).
        let (time, sharing, scheduled) = clock.next(upTo: queued.count)
        vm.clockMillis = time
        defer { clock.took(outcome.applied, scheduled: scheduled) }
        let actions = queued.prefix(sharing)
        func single() -> RunOutcome<ScriptEffect> {
            outcome.applied = 1
            do {
                let commands = try reduce(firstAction, timed: true)
                if !commands.isEmpty { outcome.commands.append((0, commands)) }
            } catch {
                outcome.failures.append((0, error))
            }
            return outcome
        }
        // The runtime's loop asks each action only for its `type`: an action that is not even a table is
        // refused by `reduce(_:)`, one at a time (the store hands the rest of the run again). (Looked at where
        // the actions lie: copying one out would retain its storage, which the dispatching thread is busy
        // retaining too when one action is dispatched again and again.)
        if journal.listeners.persistence?.waitsForEachAction == true || journal.persistenceFailure != nil { return single() }
        let interval = runs.notificationInterval
        let length = runs.span.length
        var span = actions.prefix(interval > 0 ? min(length, max(RunSpan.observedLength, interval)) : length)
        // (With a declared contract, the run ends before an action it does not declare: `reduce(_:)` refuses that one.
        // A run of one goes to `reduce(_:)`, which checks it: it is not checked twice.)
        // (Each checked where it lies, as the loop below looks: not copied out, which would retain its storage; an
        // action that is the very value before it — one dispatched again and again — is not checked again.)
        if span.count > 1, app.checksActions, let contract = app.actions,
           let undeclared = span.withUnsafeBufferPointer({ buffer in
               buffer.indices.first { index in
                   !(index > 0 && LuaVM.isSameValue(buffer, index, index - 1)) && contract.mismatch(ofAction: buffer[index]) != nil
               }
           }) {
            span = span[..<(span.startIndex + undeclared)]
        }
        let allTables = span.withUnsafeBufferPointer { buffer in
            for index in buffer.indices {
                guard case .table = buffer[index] else { return false }
            }
            return true
        }
        guard span.count > 1, allTables else {
            if span.count < actions.count { runs.tookOneOfMany() }
            return single()
        }
        let list: LuaReference
        do {
            list = try vm.reference(toList: span, sharingFlatRepeats: sharesRepeats)
            runs.converted(span.count)
        } catch {
            return single() // an action that cannot be converted fails on its own, one at a time
        }
        let last = Int64(span.count)
        defer { runs.ran(outcome.applied, of: span.count) }
        /// The actions from `position` (run positions) to the next notification point, that one included.
        func untilPoint(from position: Int64) -> Int64 {
            Int64(interval - (sinceNotification + Int(position) - 1) % interval)
        }
        /// Whether a notification point lies at `position` or after it in the run: ending there, the store
        /// launches, reports or notifies before observers hear of anything after it.
        func reachesPoint(from position: Int64) -> Bool {
            interval > 0 && position + untilPoint(from: position) - 1 <= last
        }
        var first: Int64 = 1 // list position p holds the action at offset p - 1
        while first <= last {
            let stop: StateRuntime.RunStop
            runs.crossed()
            let journaling = journal.collecting
            let started = journaling ? ContinuousClock.now : nil
            /// Each action's share of the crossing's time, through `position`.
            func share(through position: Int64) -> Duration {
                guard let started else { return .zero }
                return (ContinuousClock.now - started) / Int(max(1, position - first + 1))
            }
            do {
                stop = try runtime.reduceRun(with: app.reduce, list: list, first: first, last: last,
                                             subscribed: app.subscriptions != nil, every: Int64(interval),
                                             untilFlush: interval > 0 ? untilPoint(from: first) : 0, records: journaling,
                                             readers: { self.readers.kind(of: $0) })
            } catch let failure {
                let error = explained(failure)
                // (What the readers gave before the failing action is delivered before it is reported.)
                let found = try? runtime.runPosition(readers: { self.readers.kind(of: $0) })
                let failed = found?.position ?? first
                if let flushed = found?.flushed { deliver(flushed) }
                // (The actions before it are journaled while its writes are in the state still: a snapshot due
                // is taken once they are undone, of the committed state.)
                if journaling {
                    journalRun(actions, first: first, through: failed, failed: (failed, error), duration: share(through: failed),
                               snapshotting: false)
                }
                undoLastTransaction()
                if journaling { snapshotIfDue() }
                outcome.failures.append((Int(failed - 1), error))
                outcome.applied = Int(failed)
                if reachesPoint(from: failed) { break } // (reported before observers hear of what came after)
                first = failed + 1
                continue
            }
            if let flush = stop.flush { deliverRunFlush(flush) }
            let offset = Int(stop.position - 1)
            outcome.applied = offset + 1
            var failure: LuaError?
            var returned: [ScriptEffect] = []
            if stop.refused {
                failure = Self.refused(actions[actions.startIndex + offset])
            } else if stop.commands != nil || stop.commandsFailure != nil {
                do {
                    returned = try effects(of: stop)
                    if !returned.isEmpty { outcome.commands.append((offset, returned)) }
                } catch {
                    failure = error
                }
            }
            if let failure { outcome.failures.append((offset, failure)) }
            if journaling {
                journalRun(actions, first: first, through: stop.position, failed: failure.map { (stop.position, $0) },
                           records: stop.records, commands: (stop.position, returned), duration: share(through: stop.position))
            }
            if stop.dirty && app.subscriptions != nil {
                subscriptions.markDirty()
                break // the store diffs subscriptions before the next action
            }
            if stop.position < last && reachesPoint(from: stop.position) {
                // The store launches this action's commands, reports its failure, or notifies after the readers
                // failed, before observers hear of anything after it (the readers ran within the run at the
                // points before it).
                break
            }
            first = stop.position + 1
        }
        return outcome
    }

    /// Whether a run's action dispatched again and again may be the very same table each time, not a copy: the
    /// app's `reduce` provably only reads its action's fields (`LuaVM.readsOnly(argument:of:)`: it cannot change
    /// the table, keep it or hand it on). Asked once per reduce (a reload, an install or mounts make another).
    var sharesRepeats: Bool {
        if let known = runs.actionReading, known.reduce === app.reduce { return known.readsOnly }
        let readsOnly = vm.readsOnly(argument: 2, of: app.reduce)
        runs.actionReading = (app.reduce, readsOnly)
        return readsOnly
    }

    /// Journal entries for the actions at run positions `first...last` (position p is the action at offset p - 1);
    /// `failed` is the one that failed, if any (the last).
    private func journalRun(_ actions: ArraySlice<LuaValue>, first: Int64, through last: Int64, failed: (Int64, LuaError)?,
                            records: EncodedJournal? = nil, commands: (Int64, [ScriptEffect])? = nil, duration: Duration,
                            snapshotting: Bool = true) {
        guard first <= last, last <= Int64(actions.count) else { return }
        let start = actions.startIndex + Int(first - 1)
        let committedEnd = actions.startIndex + Int((failed?.0 ?? last + 1) - 1)
        do {
            try journalCommitted(actions[start..<max(start, min(committedEnd, actions.startIndex + Int(last)))], origin: .outside,
                                 from: first, records: records, commands: commands, duration: duration, snapshotting: snapshotting)
        } catch {
            // (Only the database can fail here — every record the barrier wrote is JSON, and what it cannot write
            // fails its action in the run — and then the store accepts no more actions.)
            report(ScriptFailure(stage: .reduce, error: journal.persistenceFailure != nil ? error
                                    : LuaError(.runtime, "the journal could not read a run's changes: \(error.message)"), action: nil))
        }
        if let (position, error) = failed, position <= last {
            let action = actions[actions.startIndex + Int(position - 1)]
            record(.action(action), origin: .outside, changes: [], failure: ScriptFailure(stage: .reduce, error: error, action: action),
                   duration: duration)
        }
    }
}
