import Foundation
import LuaKit
import LuaStoreCommandLine
import LuaStoreConcurrency
import LuaStoreScripting

/// What `require("luastore.session")` reduces recorded actions with in `luastore test`: a store of the app's own
/// (a `Replayer`, effects off), so that a spec `luastore replay --write-spec` wrote passes exactly where the replay
/// does — the state's rules, refused commands, errors that are not strings and the time budget of an action are
/// the store's, which a call of `app.reduce` inside the spec would not see.
///
/// A spec session opens a store from the recorded state (`open`), and sends it each recorded action in turn
/// (`step`), which answers where the action now does something else than the recording says. After a
/// divergence the session opens a new store from the recorded state: the next step checks its own action only.
/// Used on the spec's thread only; the stores run on their own threads, and the spec's thread waits for them (the
/// wait is not the test's: `LuaVM.excludingFromBudget`).
final class SessionReplays {
    private let folder: URL
    private let options: ScriptedStoreOptions
    private var replayers: [Int64: Replayer] = [:]
    /// The clock of each store `luastore.store` opened (milliseconds since 1970), which the spec sets.
    private var clocks: [Int64: Protected<Int64>] = [:]
    private var opened: Int64 = 0

    /// Where a spec store's clock stands until the spec sets it: 2000-01-01 00:00:00 UTC, as `ScriptedTestStore`'s.
    static let defaultMillis: Int64 = 946_684_800_000

    /// For the app in `folder`, its modules found along `modulePath`; what the app prints goes to `print`.
    init(folder: URL, modulePath: [String], print: @escaping @Sendable (String) -> Void) {
        self.folder = folder
        var options = ScriptedStoreOptions(log: print, failures: { _ in })
        options.modulePath = modulePath
        options.notification = .everyAction // (the props after each action are compared)
        options.limits.timeBudget = .microseconds(Int64(TimeBudgetDefault.milliseconds * 1000))
        self.options = options
    }

    deinit {
        for replayer in replayers.values { replayer.store.shutdown() }
    }

    /// `open(state [, budget [, clock]])`: a new store from `state`, each action within `budget` milliseconds (the one
    /// the session was replayed with when its spec was written; else the action budget `run` has), going on with the
    /// recorded `clock` (`{started =, utc_offset =, env =}`, the recording's); answers its handle.
    func open(in vm: LuaVM) -> LuaReference {
        vm.function(named: "open") { [unowned self] arguments throws(LuaError) in
            guard let state = arguments.first, case .table = state else {
                throw LuaError(.runtime, "bad argument #1 to 'open' (a state table expected)")
            }
            var options = try self.options(budget: arguments.count > 1 ? arguments[1] : .nil, function: "open")
            let clock = arguments.count > 2 ? arguments[2] : .nil
            if clock != .nil {
                guard case .integer(let started) = clock["started"] else {
                    throw LuaError(.runtime, "bad argument #3 to 'open' (a recorded clock {started = milliseconds, …} expected)")
                }
                let (offset, environment) = try Self.zone(clock, function: "open")
                options.recordedClock = RecordedClock(started: started, utcOffsetSeconds: offset, environment: environment)
            }
            return [.integer(try self.openStore(from: state, options: options, in: vm, failing: "cannot load the app to replay the session"))]
        }
    }

    /// Seconds since 1970, as `os.time` counts them (a float for milliseconds), in milliseconds; nil for anything else.
    private static func millis(seconds: LuaValue) -> Int64? {
        switch seconds {
        case .integer(let whole): return whole.multipliedReportingOverflow(by: 1000).partialValue
        case .number(let value) where value.isFinite && abs(value) < 9e15: return Int64((value * 1000).rounded(.down))
        default: return nil
        }
    }

    /// A clock table's `utc_offset` (seconds east of UTC, within ±18 hours) and `env` (names to strings).
    private static func zone(_ clock: LuaValue, function: String) throws(LuaError) -> (Int, [String: String]) {
        var offset = 0
        switch clock["utc_offset"] {
        case .nil: break
        case .integer(let seconds) where abs(seconds) <= Int64(StoreClock.utcOffsetLimit): offset = Int(seconds)
        default: throw LuaError(.runtime, "bad option 'utc_offset' to '\(function)' (seconds east of UTC, within 18 hours, expected)")
        }
        var environment: [String: String] = [:]
        switch clock["env"] {
        case .nil: break
        case .table(let table) where table.array.isEmpty:
            for (name, value) in table.fields {
                guard case .string(let key) = name, case .string(let text) = value else {
                    throw LuaError(.runtime, "bad option 'env' to '\(function)' (a table of strings by name expected)")
                }
                environment[key] = text
            }
        default: throw LuaError(.runtime, "bad option 'env' to '\(function)' (a table of strings by name expected)")
        }
        return (offset, environment)
    }

    /// Opens a store of the app from `state` (nil: its `init`), waiting for it; answers its handle, or throws
    /// `failing` and why.
    private func openStore(from state: LuaValue?, options: ScriptedStoreOptions, in vm: LuaVM, failing: String) throws(LuaError) -> Int64 {
        let folder = self.folder
        let made = vm.excludingFromBudget { Self.waiting { () async -> Result<Replayer, ScriptFailure> in
            do throws(ScriptFailure) {
                return .success(try await Replayer(app: folder, from: state, options: options))
            } catch {
                return .failure(error)
            }
        } }
        switch made {
        case .success(let replayer):
            opened += 1
            replayers[opened] = replayer
            return opened
        case .failure(let failure):
            throw LuaError(.runtime, "\(failing): \(failure.error.message) (\(failure.stage.rawValue))")
        }
    }

    /// The functions `require("luastore.store")` calls (`open`, `dispatch`, `state`, `props`, `close`): a store of
    /// the app from its `init` (or a given state) that a spec drives as the app's users do.
    func storeFunctions(in vm: LuaVM) -> [LuaReference] {
        let open = vm.function(named: "open") { [unowned self] arguments throws(LuaError) in
            let start: LuaValue? // (`.none`: from the app's `init`)
            switch arguments.first ?? .nil {
            case .nil: start = .none
            case .table(let table): start = .table(table)
            case let other: throw LuaError(.runtime, "bad argument 'state' to 'open' (a state table expected, got \(other.typeName))")
            }
            var options = try self.options(budget: arguments.count > 1 ? arguments[1] : .nil, function: "open")
            // (The clock stands where the spec says — `time`, in seconds as `os.time` counts — until it sets it.)
            let clock = arguments.count > 2 ? arguments[2] : .nil
            let millis = Protected(Self.defaultMillis)
            if clock["time"] != .nil {
                guard let given = Self.millis(seconds: clock["time"]) else {
                    throw LuaError(.runtime, "bad option 'time' to 'open' (seconds since 1970 expected, as os.time gives them)")
                }
                millis.withLock { $0 = given }
            }
            let (offset, environment) = try Self.zone(clock, function: "open")
            options.clock = StoreClock(now: { StoreClock.date(millis: millis.value) }, utcOffsetSeconds: offset, environment: environment)
            let handle = try self.openStore(from: start, options: options, in: vm, failing: "cannot open a store of the app")
            self.clocks[handle] = millis
            return [.integer(handle)]
        }
        let setTime = vm.function(named: "settime") { [unowned self] arguments throws(LuaError) in
            guard let handle = arguments.first?.integer, let millis = self.clocks[handle], self.replayers[handle] != nil else {
                throw LuaError(.runtime, "bad argument #1 to 'set_time' (a store that open made and close did not end expected)")
            }
            let seconds = arguments.count > 1 ? arguments[1] : .nil
            guard let given = Self.millis(seconds: seconds) else {
                throw LuaError(.runtime, "bad argument #2 to 'set_time' (seconds since 1970 expected, got \(seconds.typeName))")
            }
            millis.withLock { $0 = given }
            return []
        }
        let dispatch = vm.function(named: "dispatch") { [unowned self] arguments throws(LuaError) in
            let replayer = try self.replayer(arguments, "dispatch")
            let action = arguments.count > 1 ? arguments[1] : .nil
            let entry = vm.excludingFromBudget { Self.waiting { await replayer.send(action) } }
            guard let entry else { throw LuaError(.runtime, "dispatch: the store stopped") }
            guard let failure = entry.failure else { return [true] }
            var fields: [LuaKey: LuaValue] = ["stage": .string(failure.stage.rawValue), "message": .string(failure.error.message)]
            if let location = failure.error.location { fields["location"] = .string(location) }
            return [false, .table(LuaTable(fields: fields))]
        }
        /// A function answering what `read` gives of the store its first argument names.
        func reading(_ name: String, _ read: @escaping @Sendable (ScriptedStore) async throws(LuaError) -> LuaValue) -> LuaReference {
            vm.function(named: name) { [unowned self] arguments throws(LuaError) in
                let replayer = try self.replayer(arguments, name)
                return [try vm.excludingFromBudget { Self.waiting { () async -> Result<LuaValue, LuaError> in
                    do throws(LuaError) { return .success(try await read(replayer.store)) } catch { return .failure(error) }
                } }.get()]
            }
        }
        let state = reading("state") { store throws(LuaError) in try await store.state() }
        let props = reading("props") { store throws(LuaError) in try await store.props() }
        let close = vm.function(named: "close") { [unowned self] arguments throws(LuaError) in
            guard let handle = arguments.first?.integer, let replayer = self.replayers.removeValue(forKey: handle) else { return [] }
            self.clocks[handle] = nil
            replayer.store.shutdown()
            return []
        }
        return [open, dispatch, state, props, close, setTime]
    }

    /// The store `arguments[0]` names (a handle `open` gave and `close` did not end), for `function`.
    private func replayer(_ arguments: [LuaValue], _ function: String) throws(LuaError) -> Replayer {
        guard let handle = arguments.first?.integer, let replayer = replayers[handle] else {
            throw LuaError(.runtime, "bad argument #1 to '\(function)' (a store that open made and close did not end expected)")
        }
        return replayer
    }

    /// The stores' options, each action within `budget` milliseconds (nil: the default).
    private func options(budget: LuaValue, function: String) throws(LuaError) -> ScriptedStoreOptions {
        var options = self.options
        switch budget {
        case .nil: break
        case .integer(let milliseconds) where LuaLimits.isTimeBudget(milliseconds: Double(milliseconds)):
            options.limits.timeBudget = .milliseconds(milliseconds)
        case .number(let milliseconds) where LuaLimits.isTimeBudget(milliseconds: milliseconds):
            options.limits.timeBudget = .microseconds(Int64(milliseconds * 1000))
        default:
            throw LuaError(.runtime, "bad argument #2 to '\(function)' (a number of milliseconds above 0 and at most "
                + "\(Int64(LuaLimits.longestTimeBudgetMilliseconds)) expected)")
        }
        return options
    }

    /// `step(handle, action, expected)`: reduces `action` in the store and compares it with `expected` (`failure`,
    /// or `changes` as `{path, value}` pairs; `props` where they were kept). Answers nothing when they agree, else
    /// where they differ: `{aspect = "outcome" | "failure" | "changes" | "props", path =, recorded =, now =}`.
    /// The store is closed after a divergence (its state is no longer the recording's).
    func step(in vm: LuaVM) -> LuaReference {
        vm.function(named: "step") { [unowned self] arguments throws(LuaError) in
            guard arguments.count >= 3, let handle = arguments[0].integer, let replayer = self.replayers[handle] else {
                throw LuaError(.runtime, "bad argument #1 to 'step' (a store that open made and no divergence closed expected)")
            }
            let action = arguments[1], expected = arguments[2]
            let recorded = Replayer.Recorded(failure: expected["failure"].string,
                                             changes: expected["failure"] == .nil ? try Self.changes(expected["changes"]) : nil)
            let step = Replayer.Step(sequence: 0, action: action, recorded: recorded, props: expected["props"] == .nil ? LuaValue?.none : expected["props"],
                                     time: expected["time"].integer)
            let (entry, props) = vm.excludingFromBudget { Self.waiting { () async -> (JournalEntry?, LuaValue?) in
                await replayer.send(step, props: false)
            } }
            let divergence: Replayer.Divergence?
            do throws(Replayer.UnreadableEntry) {
                divergence = try Replayer.divergence(of: step, now: entry, props: props)
            } catch {
                throw LuaError(.runtime, "the recorded changes of this step cannot be read: \(error.malformed)")
            }
            guard let divergence, let first = divergence.differences.first else { return [] }
            replayer.store.shutdown()
            self.replayers[handle] = nil
            return [.table(LuaTable(fields: [
                "aspect": .string(divergence.aspect.rawValue), "path": .string(first.path),
                "recorded": first.then, "now": first.now,
            ]))]
        }
    }

    /// The recorded `changes` of a spec's step: a list of `{path, value}` (a removal has no value).
    static func changes(_ list: LuaValue) throws(LuaError) -> [StateChange] {
        if list == .nil { return [] }
        guard case .table = list else {
            throw LuaError(.runtime, "a step's changes must be a list of {path, value}, not a \(list.typeName)")
        }
        var changes: [StateChange] = []
        for (index, change) in items(of: list).enumerated() {
            guard case .table = change[1] else {
                throw LuaError(.runtime, "change \(index + 1) of a step must be {path, value} with a list of keys as its path")
            }
            var path: [LuaKey] = []
            for key in items(of: change[1]) {
                switch key {
                case .integer(let integer): path.append(.integer(integer))
                case .number(let number): path.append(.number(number))
                case .string(let text): path.append(.string(text))
                case .boolean(let flag): path.append(.boolean(flag))
                default: throw LuaError(.runtime, "change \(index + 1) of a step has a path key that is a \(key.typeName)")
                }
            }
            let value = change[2]
            changes.append(StateChange(path: path, value: value == .nil ? nil : value))
        }
        return changes
    }

    /// `list[1]`, `list[2]`, … up to the first nil.
    static func items(of list: LuaValue) -> [LuaValue] {
        var items: [LuaValue] = []
        while case let item = list[.integer(Int64(items.count + 1))], item != .nil { items.append(item) }
        return items
    }

    /// Runs `work` and waits for it on this thread (a `LuaThread`, never one of the threads tasks share: `luastore
    /// test` runs specs through `LuaThread.perform`).
    static func waiting<T: Sendable>(_ work: @escaping @Sendable () async -> T) -> T {
        let result = Protected<T?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task.detached {
            let value = await work()
            result.withLock { $0 = value }
            done.signal()
        }
        done.wait()
        return result.withLock { $0! }
    }
}
