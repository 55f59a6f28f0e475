import LuaKit
import LuaStoreContract

/// The actions a store takes, as the app and each plugin it mounts declare them (docs/contracts.md, "Mounted
/// plugins"). Every action reaches every reducer, and a contract says what its own reducer takes, so:
/// - an action whose `type` a party declares must be what that party declares (each party that declares it);
/// - an action whose `type` no party declares is refused only when every party with a reducer declares its actions
///   (a reducer that declares nothing may take anything).
/// An app without mounts is the one party: its checker decides alone, on the dispatch's fast path.
final class ActionContract: Sendable {
    /// The one party, when there is one that declares and no other.
    private let single: ContractChecker?
    /// The parties that declare their actions: who (for messages) and their checker.
    private let parties: [(who: String, checker: ContractChecker)]
    /// Whether every party with a reducer declares its actions.
    private let complete: Bool

    /// The app alone (no mounts): its contract declares its actions.
    init(app: ContractChecker) {
        single = app
        parties = [("the app", app)]
        complete = true
    }

    /// The app (when it has a reducer of its own) and its mounted plugins, each with its checker if it declares
    /// anything; nil when none declares its actions.
    init?(parties all: [(who: String, checker: ContractChecker?)]) {
        let declaring = all.compactMap { party in party.checker.flatMap { $0.contract.action == nil ? nil : (party.who, $0) } }
        guard !declaring.isEmpty else { return nil }
        parties = declaring
        complete = declaring.count == all.count
        single = complete && declaring.count == 1 ? declaring[0].1 : nil
    }

    /// Why `action` is not one the store takes (nil: it is), naming what is wrong and, with several parties, whose
    /// declaration it breaks.
    func mismatch(ofAction value: LuaValue) -> String? {
        if let single { return single.mismatch(ofAction: value) }
        guard case .table(let table) = value, case .string(let name) = table["type"] else {
            // (Not an action of any declared case: a complete contract refuses it as the first party would say.)
            return complete ? parties[0].checker.mismatch(ofAction: value) : nil
        }
        if name.utf8.starts(with: "luastore/".utf8) { return nil } // (the store's own actions)
        var declared = false
        for (who, checker) in parties where checker.declares(type: name) {
            declared = true
            if let problem = checker.mismatch(ofAction: value) { return "\(problem) (as \(who) declares it)" }
        }
        guard !declared, complete else { return nil }
        let names = Set(parties.flatMap { $0.checker.contract.actionCases.keys }).sorted().map { "\"\($0)\"" }
        return "action type \"\(name)\" is not declared (the app and its plugins declare \(names.joined(separator: ", ")))"
    }
}

extension ContractChecker {
    /// Whether an action of type `name` is one this contract speaks of: a case of it, or any, when its action type
    /// is not a union of cases.
    func declares(type name: String) -> Bool {
        contract.actionCases.isEmpty || contract.actionCases[name] != nil
    }
}
