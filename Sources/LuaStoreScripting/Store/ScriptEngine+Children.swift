import LuaKit

// Child stores: a module of the app with its own local state, reduced after the root's reducer.
extension ScriptEngine {
    /// Requires a child store's module in `namespace` and checks its exports.
    func loadChild(_ name: String, in namespace: LuaNamespace) throws(LuaError) -> (ChildModule, LuaReference) {
        let module = try vm.require(name, in: namespace)
        guard vm.typeName(of: module) == "table" else {
            throw LuaError(.runtime, "the child module '\(name)' must return a table of functions (init, reduce, props)")
        }
        func export(_ function: String) throws(LuaError) -> LuaReference {
            guard let value = try vm.field(.string(function), of: module), vm.typeName(of: value) == "function" else {
                throw LuaError(.runtime, "the child module '\(name)' must export a function '\(function)'")
            }
            return value
        }
        return (ChildModule(name: name, reduce: try export("reduce"), props: try export("props")), try export("init"))
    }

    /// Loads the child module `name`, runs its `init`, and returns the child's id.
    func addChild(module name: String) throws(ScriptFailure) -> Int64 {
        do throws(LuaError) {
            let (child, initialize) = try loadChild(name, in: app.namespace)
            let initial = try vm.callForReferences(initialize, arguments: [])
            let id = children.add(child)
            do throws(LuaError) {
                try runtime.setChild(id, state: initial.first ?? nil)
            } catch {
                children.remove(id)
                throw error
            }
            return id
        } catch {
            throw ScriptFailure(stage: .initialize, error: error)
        }
    }

    /// Forgets a child store: its state and readers.
    func removeChild(_ id: Int64) {
        children.remove(id)
        for (readerID, kind) in readers.all {
            if case .childProps(id) = kind { removeReader(readerID) }
        }
        runtime.removeChild(id)
    }

    /// Applies an action dispatched to the child to its local state, as one transaction.
    func reduceChild(_ id: Int64, _ action: LuaValue) throws(LuaError) -> [ScriptEffect] {
        guard let child = children[id] else { return [] }
        let commands: LuaValue, unconverted: LuaError?
        do {
            (commands, unconverted) = try runtime.reduceChild(id, with: child.reduce, action: action)
        } catch {
            undoLastTransaction()
            throw error
        }
        do throws(LuaError) {
            if let unconverted { throw unconverted }
            return try Self.commands(from: commands)
        } catch {
            rollBack(committed: true)
            throw located(error, returnedBy: child.reduce)
        }
    }

    /// The child's local state, converted.
    func childState(_ id: Int64) throws(LuaError) -> LuaValue {
        try runtime.childState(id)
    }
}
