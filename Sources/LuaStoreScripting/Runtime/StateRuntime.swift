import CLuaState
import LuaKit

/// The trusted Lua chunks that keep a scripted app's state in the VM: `state_runtime.lua` and its parts beside
/// this file, embedded at build time, loaded into one VM. The write barrier they build on is explained once, in
/// docs/design.md ("The write barrier"); `state_runtime.lua`'s header says what the Lua half adds, part by part.
/// The engine calls the runtime only through its typed face (`StateRuntime+Calls.swift`), the one place in Swift
/// that knows where a result lies.
struct StateRuntime {
    /// The chunks, in the order they load: the first makes the table they share, each other adds its part.
    static let parts = [EmbeddedLua.stateRuntime, EmbeddedLua.stateData, EmbeddedLua.stateRuns, EmbeddedLua.stateJournal,
                        EmbeddedLua.stateInspection, EmbeddedLua.stateReaders]
    /// A host chunk (`host:`): the message handler skips its frames when it looks for the script's line.
    static let chunkName = "host:" + EmbeddedLua.stateRuntime.path
    /// The `__metatable` of state proxies (what `getmetatable` returns for one), passed to the chunk; the
    /// sandbox's `rawset` refuses tables with it, so no write can bypass the journal.
    static let metatableMarker = "luastore state"

    /// The functions of the runtime's module that the engine calls, named as in `state_runtime.lua`.
    enum Function: Int, CaseIterable {
        case reduce, reduceRun, runPosition, rollback, transform, setState, state, register, unregister, path, evaluate,
            subscriptions, flush, reset, markAllDirty, setChild, removeChild, childState, reduceChild, changes, collected, encoded,
            setJournaling, setHistory, dropNewestHistory, dropOldestHistory, travel, truncateHistory, valueAt, peek, search,
            /// One step of a path, as messages name it (`.title`, `[3]`, `["first name"]`): what other trusted chunks
            /// (`mounts.lua`) render paths with.
            renderKey
    }

    /// The VM the runtime is loaded into.
    let vm: LuaVM
    private let references: [LuaReference]

    subscript(function: Function) -> LuaReference {
        references[function.rawValue]
    }

    /// What other trusted chunks (`mounts.lua`) render a path's steps with.
    var renderKey: LuaReference { self[.renderKey] }

    /// [-0, +0] Runs the chunks in `vm` (trusted) and returns the module table.
    static func loadModule(into vm: LuaVM) throws(LuaError) -> LuaReference {
        try vm.defineTrusted(library: clua_state_library()) // (`makebarrier`, the engine's C)
        let first = try vm.loadTrusted(EmbeddedLua.stateRuntime.source, chunkName: chunkName, keepingNames: false, keepingLines: false)
        guard let shared = try vm.callForReferences(first, arguments: [
            .value(.string(metatableMarker)), .value(.integer(Int64(vm.limits.conversionDepth))),
        ]).first ?? nil else {
            throw LuaError(.runtime, "the state runtime did not load")
        }
        for part in parts.dropFirst() {
            try vm.call(try vm.loadTrusted(part.source, chunkName: "host:" + part.path, keepingNames: false, keepingLines: false), arguments: [.reference(shared)])
        }
        guard let start = try vm.field("start", of: shared), let module = try vm.callForReferences(start, arguments: []).first ?? nil else {
            throw LuaError(.runtime, "the state runtime did not start")
        }
        return module
    }

    /// [-0, +0] Runs the chunk in `vm` (trusted) and looks up every function the engine calls.
    init(loadingInto vm: LuaVM) throws(LuaError) {
        let module = try Self.loadModule(into: vm)
        var references: [LuaReference] = []
        for function in Function.allCases {
            let name = String(describing: function)
            guard let reference = try vm.field(.string(name), of: module) else {
                throw LuaError(.runtime, "the state runtime has no '\(name)'")
            }
            references.append(reference)
        }
        self.vm = vm
        self.references = references
    }

    /// What each action changed, by position, from the runtime's `collected` list — laid out as
    /// `CLUA_COLLECTED_ENTRY` says (clua_state_layouts.h): an entry (the action's position and its number of
    /// changes), then each change's depth (negative: removed), the keys of its path, and its new value.
    static func changes(fromCollected value: LuaValue) -> [Int64: [StateChange]] {
        guard let items = value.table?.array else { return [:] }
        var result: [Int64: [StateChange]] = [:]
        var index = 0
        let positionOffset = Int(CLUA_COLLECTED_POSITION) - 1, countOffset = Int(CLUA_COLLECTED_COUNT) - 1
        let entryLength = Int(CLUA_COLLECTED_ENTRY_LENGTH)
        while index + entryLength - 1 < items.count, let position = items[index + positionOffset].integer,
              let count = items[index + countOffset].integer {
            index += entryLength
            var changes: [StateChange] = []
            changes.reserveCapacity(Int(count))
            for _ in 0..<count {
                guard index < items.count, let signed = items[index].integer else { return result }
                let depth = Int(signed.magnitude)
                guard index + depth + (signed >= 0 ? 1 : 0) < items.count else { return result }
                let path = items[(index + 1)..<(index + 1 + depth)].compactMap(LuaKey.init(exactly:))
                index += depth + 1
                if signed >= 0 {
                    changes.append(StateChange(path: path, value: items[index]))
                    index += 1
                } else {
                    changes.append(StateChange(path: path, value: nil))
                }
            }
            result[position] = changes
        }
        return result
    }
}
