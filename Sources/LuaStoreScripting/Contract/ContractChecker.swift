import LuaKit
import LuaStoreContract

/// An app's contract made ready to check values at each dispatch: each action case's fields laid out
/// (`ClassShape`), so that the usual action, declared and whole, is told so by comparing a few strings; the words
/// for a value that does not match name the path of the first difference (`action.title`, `props.items[3]`).
public final class ContractChecker: Sendable {
    /// The contract it checks against.
    public let contract: AppContract
    /// The action cases as a list: a dispatch finds its case among a few names faster than by hashing its `type`.
    private let caseNames: [String]
    /// Each case's fields laid out, in the order of `caseNames`.
    private let caseShapes: [ClassShape]
    /// The props' class laid out, when the props are declared as one (`mismatch(ofProps:)`).
    private let propsShape: ClassShape?

    /// A checker for `contract`, with its action cases laid out once.
    public init(_ contract: AppContract) {
        self.contract = contract
        let cases = contract.actionCases.sorted { $0.key < $1.key }
        caseNames = cases.map(\.key)
        caseShapes = cases.map { ClassShape($0.value.fields) }
        if case .named(let name) = contract.props, contract.aliases[name] == nil, let declared = contract.classes[name] {
            propsShape = ClassShape(declared.fields)
        } else {
            propsShape = nil
        }
    }

    private var action: ContractType? { contract.action }
    private var actionCases: [String: AppContract.Class] { contract.actionCases }
    private var classes: [String: AppContract.Class] { contract.classes }
    private var aliases: [String: ContractType] { contract.aliases }
    private func resolvedMembers(_ type: ContractType) -> [String] { contract.resolvedMembers(type) }

    /// Why `action` is not one the contract declares (nil: it is, or no action is declared): an undeclared `type`
    /// names the declared ones; a declared one, the field that does not match.
    public func mismatch(ofAction value: LuaValue) -> String? {
        // (The usual action, declared and whole, is told so without a word made, nothing copied: only a refusal is said.)
        if case .table(let table) = value, table.array.isEmpty, table.withStringPairs({ conformsToItsCase($0) }) == true { return nil }
        guard let action else { return nil }
        guard case .table(let table) = value, case .string(let name) = table["type"] else { return check(value, action) { "action" } }
        // (The store's own actions, `luastore/reloaded`, are not the app's to declare.)
        if name.utf8.starts(with: "luastore/".utf8) { return nil }
        if !caseNames.isEmpty {
            guard let found = actionCases[name] else {
                return "action type \"\(name)\" is not declared (the contract declares \(actionCases.keys.sorted().map { "\"\($0)\"" }.joined(separator: ", ")))"
            }
            return check(value, found) { "action" }
        }
        return check(value, action) { "action" }
    }

    /// Whether an action's fields, as they lie, are an instance of the case their `type` names (false also when
    /// the check cannot tell quickly: the slow path then decides, and says why).
    private func conformsToItsCase(_ pairs: UnsafeBufferPointer<(String, LuaValue)>) -> Bool {
        guard let base = pairs.baseAddress else { return false }
        for position in 0..<pairs.count where ClassShape.same(base[position].0, "type") {
            guard case .string(let name) = base[position].1 else { return false }
            let found = caseNames.withUnsafeBufferPointer { names in names.indices.first { ClassShape.same(name, names[$0]) } }
            guard let found else { return false }
            return caseShapes[found].conforms(pairs: pairs, in: self)
        }
        return false
    }

    /// Why `props` are not what the contract declares them (nil: they are, or the props are not declared), naming
    /// the path of what differs (`props.items[3]`). (Props of a declared class, as they usually are, are told so by
    /// its fields laid out, at every change of the props.)
    public func mismatch(ofProps value: LuaValue) -> String? {
        guard let type = contract.props else { return nil }
        if let propsShape, case .table(let table) = value, propsShape.conforms(table, in: self) { return nil }
        return check(value, type) { "props" }
    }

    /// Why `value` is not a `type` (nil: it is), naming the path of what differs (`action.title`, `props.items[3]`).
    public func mismatch(of value: LuaValue, as type: ContractType, at path: String) -> String? {
        check(value, type) { path }
    }

    /// `mismatch(of:as:at:)` with the path made only when a mismatch is said (an action checked costs no text).
    private func check(_ value: LuaValue, _ type: ContractType, quiet: Bool = false, _ path: () -> String) -> String? {
        func say(_ words: @autoclosure () -> String) -> String { quiet ? "" : words() }
        switch type {
        case .string:
            if case .string = value { return nil }
        case .number:
            switch value {
            case .integer, .number: return nil
            default: break
            }
        case .integer:
            if case .integer = value { return nil }
        case .boolean:
            if case .boolean = value { return nil }
        case .literal(let text):
            if case .string(let found) = value, String.sameBytes(found, text) { return nil }
        case .optional(let inner):
            return value == .nil ? nil : check(value, inner, quiet: quiet, path)
        case .array(let element):
            guard case .table(let table) = value else { break }
            if let key = table.fields.keys.sorted().first { return say("\(Self.child(path(), key)) is not an item of a list (\(type) is declared at \(path()))") }
            for (index, item) in table.array.enumerated() {
                if let problem = check(item, element, quiet: quiet, { "\(path())[\(index + 1)]" }) { return problem }
            }
            return nil
        case .map(let inner):
            guard case .table(let table) = value else { break }
            if !table.array.isEmpty { return say("\(path())[1] is a list item; \(type) is declared at \(path()) (string keys only)") }
            for (key, item) in table.fields.sorted(by: { $0.key < $1.key }) {
                guard case .string = key else { return say("\(Self.child(path(), key)) has a key that is not a string (\(type) is declared at \(path()))") }
                if let problem = check(item, inner, quiet: quiet, { Self.child(path(), key) }) { return problem }
            }
            return nil
        case .union(let members):
            // (Classes told apart by their `type` literal: the one the value names is the one it is checked as.)
            if case .table = value, case .string(let name) = value["type"] {
                let named = members.flatMap { resolvedMembers($0) }.compactMap { classes[$0] }
                if let chosen = named.first(where: { $0.caseName == name }) {
                    return check(value, .named(chosen.name), quiet: quiet, path)
                }
            }
            if members.contains(where: { check(value, $0, quiet: true, path) == nil }) { return nil }
        case .named(let name):
            if let alias = aliases[name] {
                // (A value that is none of the alias's members is said to be not the alias, by its name.)
                guard let problem = check(value, alias, quiet: quiet, path) else { return nil }
                return quiet || problem != Self.notA(value, alias, at: path()) ? problem : Self.notA(value, type, at: path())
            }
            guard let declared = classes[name] else { return say("\(path()): \(name) is not declared") }
            return check(value, declared, quiet: quiet, path)
        }
        return say(Self.notA(value, type, at: path()))
    }

    private static func notA(_ value: LuaValue, _ type: ContractType, at path: String) -> String {
        "\(path) is \(shown(value)), not \(type)"
    }

    /// Why `value` is not an instance of `declared` (nil: it is): every field it declares, of its type (present
    /// unless optional), and no other.
    private func check(_ value: LuaValue, _ declared: AppContract.Class, quiet: Bool = false, _ path: () -> String) -> String? {
        func say(_ words: @autoclosure () -> String) -> String { quiet ? "" : words() }
        guard case .table(let table) = value else { return say("\(path()) is \(Self.shown(value)), not \(declared.name)") }
        if !table.array.isEmpty { return say("\(path())[1] is a list item, which \(declared.name) does not declare") }
        // (An action's few fields are read where they lie, without making a dictionary of them.)
        let pairs = table.stringPairs
        let fields = pairs == nil ? table.fields : [:]
        func field(_ name: String) -> LuaValue {
            if let pairs { return pairs.first { String.sameBytes($0.0, name) }?.1 ?? .nil }
            return fields[.string(name)] ?? .nil
        }
        for declaredField in declared.fields {
            let found = field(declaredField.name)
            if found == .nil {
                if declaredField.optional || AppContract.admitsNil(declaredField.type) { continue }
                return say("\(path()).\(declaredField.name) is missing (\(declared.name) declares it \(declaredField.type))")
            }
            if let problem = check(found, declaredField.type, quiet: quiet, { "\(path()).\(declaredField.name)" }) { return problem }
        }
        let count = pairs?.count ?? fields.count
        guard count > declared.fields.count || declared.fields.contains(where: { field($0.name) == .nil }) else { return nil }
        let keys = pairs.map { $0.map { LuaKey.string($0.0) } } ?? Array(fields.keys)
        for key in keys.sorted() where !declared.fields.contains(where: { LuaKey.string($0.name) == key }) {
            return say("\(Self.child(path(), key)) is not a field of \(declared.name) (it declares \(declared.fields.map(\.name).joined(separator: ", ")))")
        }
        return nil
    }

    /// Whether `value` is a `type`, without a word made (`ClassShape` asks this of the fields it does not lay out).
    func conforms(_ value: LuaValue, _ type: ContractType) -> Bool {
        check(value, type, quiet: true) { "" } == nil
    }

    /// `path.name`, or `path[key]` for a key that is not a name.
    static func child(_ path: String, _ key: LuaKey) -> String {
        switch key {
        case .string(let name) where name.first.map({ $0.isLetter || $0 == "_" }) == true
            && name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" }) && name.allSatisfy(\.isASCII):
            return "\(path).\(name)"
        case .string(let name): return "\(path)[\(name.debugDescription)]"
        case .integer(let number): return "\(path)[\(number)]"
        case .number(let number): return "\(path)[\(number)]"
        case .boolean(let flag): return "\(path)[\(flag)]"
        }
    }

    /// A value in a message: short.
    static func shown(_ value: LuaValue) -> String {
        switch value {
        case .nil: "nil"
        case .boolean(let flag): "\(flag)"
        case .integer(let number): "\(number)"
        case .number(let number): "\(number)"
        case .string(let text): text.count > 40 ? "\(String(text.prefix(40)).debugDescription)…" : text.debugDescription
        case .table: "a table"
        }
    }
}

extension AppContract {
    /// Why `value` is not a `type` (nil: it is), naming the path of what differs (`state.items[1]`). For one value
    /// now and then; a store checks through a `ContractChecker` it keeps.
    public func mismatch(of value: LuaValue, as type: ContractType, at path: String) -> String? {
        ContractChecker(self).mismatch(of: value, as: type, at: path)
    }

    /// Why `action` is not one the contract declares (nil: it is, or no action is declared).
    public func mismatch(ofAction value: LuaValue) -> String? {
        ContractChecker(self).mismatch(ofAction: value)
    }
}
