import Foundation
import LuaKit

/// What an app declares of its actions, props and state, in LuaLS annotations (the notation Lua editors read):
/// `---@class`, `---@field`, `---@alias` anywhere in its files, and on its entry points `---@param action T` of
/// `reduce`, `---@return T` of `props` and of `init` (docs/contracts.md). Undeclared apps have none.
public struct AppContract: Sendable {
    /// A declared class: its fields, in the order written.
    public struct Class: Sendable {
        public struct Field: Sendable {
            public let name: String
            public let type: ContractType
            public let optional: Bool
        }

        public let name: String
        public let fields: [Field]
        public let file: String
        public let line: Int
        /// The fields laid out for checking a value at each dispatch without copying types around.
        let shape: ClassShape

        init(name: String, fields: [Field], file: String, line: Int) {
            self.name = name
            self.fields = fields
            self.file = file
            self.line = line
            shape = ClassShape(fields)
        }

        /// The literal of its `type` field, when it has one: the action case it is.
        public var caseName: String? {
            guard let field = fields.first(where: { $0.name == "type" }), case .literal(let name) = field.type else { return nil }
            return name
        }
    }

    /// Something in the annotations that is not a contract LuaStore checks: where, and why.
    public struct Problem: Error, Sendable, Equatable, CustomStringConvertible {
        public let file: String
        public let line: Int
        public let message: String
        public var description: String { "\(file):\(line): \(message)" }
    }

    public private(set) var classes: [String: Class] = [:]
    public private(set) var aliases: [String: ContractType] = [:]
    /// Where each alias, and the action, props and state types, are declared (for messages).
    private var places: [String: (file: String, line: Int)] = [:]
    /// The type of an action (`---@param action T` of `reduce`), of the props (`---@return T` of `props`), of the
    /// state (`---@return T` of `init`, or the first `---@param` of `reduce` or `props`).
    public private(set) var action: ContractType?
    public private(set) var props: ContractType?
    public private(set) var state: ContractType?
    /// The name the reducer gives its action (its second parameter), and where `reduce` is.
    public private(set) var actionParameter: String?

    /// Where the props' type is declared (`---@return T` of `props`): the place a props failure names.
    public var propsDeclaration: (file: String, line: Int)? { places["props"] }

    /// Whether the app declares anything of its actions, props or state.
    public var declares: Bool { action != nil || props != nil || state != nil }

    /// The action cases: each declared class an action may be, by the literal of its `type` field.
    public private(set) var actionCases: [String: Class] = [:]
    /// The same, as a list: a dispatch finds its case among a few names faster than by hashing its `type`.
    private var actionCaseList: [(name: String, ascii: Bool, shape: ClassShape)] = []

    private mutating func findActionCases() {
        guard let action else { return }
        for name in resolvedMembers(action) {
            if let found = classes[name], let caseName = found.caseName { actionCases[caseName] = found }
        }
        actionCaseList = actionCases.sorted { $0.key < $1.key }.map { ($0.key, $0.key.utf8.allSatisfy { $0 < 0x80 }, $0.value.shape) }
    }

    // MARK: Reading

    /// The contract of the app in `folder` (its own files: specs and the folders of plugins with a manifest of
    /// their own left out), and what in it is not a contract LuaStore checks. `main`: the file `reduce`, `props`
    /// and `init` are in.
    public static func read(app folder: URL, main: String = "app.lua") -> (contract: AppContract, problems: [Problem]) {
        var contract = AppContract()
        var problems: [Problem] = []
        let files = AppFiles.namespaces(in: folder).first ?? []
        for file in files {
            guard let data = FileManager.default.contents(atPath: folder.appendingPathComponent(file).path) else { continue }
            contract.read(String(decoding: data, as: UTF8.self), file: file, entryPoints: file == main, problems: &problems)
        }
        problems += contract.unresolvedNames()
        contract.findActionCases()
        return (contract, problems)
    }

    private mutating func read(_ text: String, file: String, entryPoints: Bool, problems: inout [Problem]) {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        var openClass: (name: String, fields: [Class.Field], line: Int)?
        var block: [(line: Int, text: Substring)] = []
        func closeClass() {
            if let open = openClass { classes[open.name] = Class(name: open.name, fields: open.fields, file: file, line: open.line) }
            openClass = nil
        }
        func problem(_ line: Int, _ message: String) {
            problems.append(Problem(file: file, line: line, message: message))
        }
        for (offset, raw) in lines.enumerated() {
            let number = offset + 1
            let trimmed = raw.drop { $0 == " " || $0 == "\t" }
            guard trimmed.hasPrefix("---") else {
                closeClass()
                if entryPoints, let entry = Self.entryPoint(trimmed) { declare(entry, block: block, file: file, problems: &problems) }
                block = []
                continue
            }
            block.append((number, trimmed))
            let annotation = trimmed.dropFirst(3).drop { $0 == " " }
            guard annotation.hasPrefix("@") else {
                if annotation.hasPrefix("|"), openClass == nil {
                    problem(number, "an alias written over several lines (---|) is outside the contract's notation: write it on one line, ---@alias Name A|B|C")
                }
                continue
            }
            let tag = annotation.dropFirst().prefix { $0 != " " && $0 != "\t" }
            let body = annotation.dropFirst(tag.count + 1).drop { $0 == " " || $0 == "\t" }
            switch tag {
            case "class":
                closeClass()
                let name = body.prefix { !$0.isWhitespace && $0 != ":" }
                let after = body.dropFirst(name.count).drop { $0 == " " }
                if name.isEmpty {
                    problem(number, "---@class needs a name")
                } else if after.hasPrefix(":") {
                    problem(number, "class \(name) inherits (---@class \(name): …), which is outside the contract's notation: write its fields")
                } else if classes[String(name)] != nil || aliases[String(name)] != nil {
                    problem(number, "\(name) is declared twice")
                } else {
                    openClass = (String(name), [], number)
                }
            case "field":
                guard openClass != nil else {
                    problem(number, "---@field outside a ---@class")
                    continue
                }
                var fieldText = body
                for scope in ["public ", "private ", "protected ", "package "] where fieldText.hasPrefix(scope) {
                    fieldText = fieldText.dropFirst(scope.count).drop { $0 == " " }
                }
                let rawName = fieldText.prefix { !$0.isWhitespace }
                guard !rawName.isEmpty, !rawName.hasPrefix("[") else {
                    problem(number, "a field named by a type (---@field [K] V) is outside the contract's notation: write table<string, V> for the whole table")
                    continue
                }
                let optional = rawName.hasSuffix("?")
                let name = String(optional ? rawName.dropLast() : rawName)
                var parser = ContractTypeParser(fieldText.dropFirst(rawName.count))
                do throws(ContractTypeParser.Unsupported) {
                    guard let type = try parser.parse() else {
                        problem(number, "field \(name) has no type")
                        continue
                    }
                    if openClass?.fields.contains(where: { $0.name == name }) == true {
                        problem(number, "field \(name) of \(openClass?.name ?? "") is declared twice")
                    }
                    openClass?.fields.append(Class.Field(name: name, type: type, optional: optional))
                } catch {
                    problem(number, "field \(name): \(error.reason)")
                }
            case "alias":
                closeClass()
                let name = String(body.prefix { !$0.isWhitespace })
                var parser = ContractTypeParser(body.dropFirst(name.count))
                do throws(ContractTypeParser.Unsupported) {
                    guard !name.isEmpty, let type = try parser.parse() else {
                        problem(number, "---@alias needs a name and a type on its line: ---@alias Name A|B|C")
                        continue
                    }
                    if classes[name] != nil || aliases[name] != nil { problem(number, "\(name) is declared twice") }
                    aliases[name] = type
                    places["alias " + name] = (file, number)
                } catch {
                    problem(number, "alias \(name): \(error.reason)")
                }
            case "enum":
                closeClass()
                problem(number, "---@enum is outside the contract's notation: declare an alias of literals, ---@alias Name \"a\"|\"b\"")
            default:
                continue // (the editor's: @type, @param and @return of other functions, @meta, @diagnostic…)
            }
        }
        closeClass()
    }

    /// An entry point a line defines: `function app.reduce(state, action)`, `app.props = function(state)`,
    /// `local function init()`; its name and its parameters.
    static func entryPoint(_ line: Substring) -> (name: String, parameters: [String])? {
        let patterns = [
            #/^function\s+[A-Za-z_][A-Za-z0-9_]*[.:](init|reduce|props)\s*\(([^)]*)\)/#,
            #/^[A-Za-z_][A-Za-z0-9_]*\.(init|reduce|props)\s*=\s*function\s*\(([^)]*)\)/#,
            #/^local\s+function\s+(init|reduce|props)\s*\(([^)]*)\)/#,
        ]
        for pattern in patterns {
            if let match = line.prefixMatch(of: pattern) {
                let parameters = match.output.2.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
                return (String(match.output.1), parameters)
            }
        }
        return nil
    }

    /// What the doc block above an entry point declares.
    private mutating func declare(_ entry: (name: String, parameters: [String]), block: [(line: Int, text: Substring)],
                                  file: String, problems: inout [Problem]) {
        for (number, text) in block {
            let annotation = text.dropFirst(3).drop { $0 == " " }
            let isParam = annotation.hasPrefix("@param "), isReturn = annotation.hasPrefix("@return ")
            guard isParam || isReturn else { continue }
            var body = annotation.drop { $0 != " " }.drop { $0 == " " }
            var parameter: String?
            if isParam {
                let name = body.prefix { !$0.isWhitespace }
                parameter = String(name.hasSuffix("?") ? name.dropLast() : name)
                body = body.dropFirst(name.count)
            }
            var parser = ContractTypeParser(body)
            let type: ContractType
            do throws(ContractTypeParser.Unsupported) {
                guard let parsed = try parser.parse() else { continue }
                type = parsed
            } catch {
                problems.append(Problem(file: file, line: number, message: "\(entry.name): \(error.reason)"))
                continue
            }
            func set(_ slot: inout ContractType?, _ what: String) {
                if let held = slot, held != type {
                    problems.append(Problem(file: file, line: number, message: "the \(what) is declared as \(held) and as \(type)"))
                }
                slot = type
                places[what] = (file, number)
            }
            switch (entry.name, parameter) {
            case ("reduce", let name?) where entry.parameters.count > 1 && name == entry.parameters[1]:
                set(&action, "action")
                actionParameter = name
            case ("reduce", let name?) where name == entry.parameters.first, ("props", let name?) where name == entry.parameters.first:
                set(&state, "state")
            case ("props", nil): set(&props, "props")
            case ("init", nil): set(&state, "state")
            default: continue
            }
        }
    }

    /// Names used that nothing declares.
    private func unresolvedNames() -> [Problem] {
        var problems: [Problem] = []
        for found in classes.values.sorted(by: { ($0.file, $0.line) < ($1.file, $1.line) }) {
            for field in found.fields {
                for name in field.type.names where classes[name] == nil && aliases[name] == nil {
                    problems.append(Problem(file: found.file, line: found.line,
                                            message: "field \(field.name) of \(found.name) is a \(name), which no ---@class or ---@alias declares"))
                }
            }
        }
        for (name, type) in aliases.sorted(by: { $0.key < $1.key }) {
            let place = places["alias " + name] ?? ("?", 0)
            for missing in type.names where classes[missing] == nil && aliases[missing] == nil {
                problems.append(Problem(file: place.file, line: place.line, message: "alias \(name) names \(missing), which no ---@class or ---@alias declares"))
            }
        }
        for (what, type) in [("action", action), ("props", props), ("state", state)] {
            let place = places[what] ?? ("?", 0)
            for name in type?.names ?? [] where classes[name] == nil && aliases[name] == nil {
                problems.append(Problem(file: place.file, line: place.line, message: "the \(what) is a \(name), which no ---@class or ---@alias declares"))
            }
        }
        return problems
    }

    /// The classes a type stands for, through aliases and unions.
    func resolvedMembers(_ type: ContractType, seen: Set<String> = []) -> [String] {
        switch type {
        case .named(let name):
            if classes[name] != nil { return [name] }
            guard let alias = aliases[name], !seen.contains(name) else { return [] }
            return resolvedMembers(alias, seen: seen.union([name]))
        case .union(let members): return members.flatMap { resolvedMembers($0, seen: seen) }
        default: return []
        }
    }

    // MARK: Checking values

    /// Why `action` is not one the contract declares (nil: it is, or no action is declared): an undeclared `type`
    /// names the declared ones; a declared one, the field that does not match.
    public func mismatch(ofAction value: LuaValue) -> String? {
        guard let action else { return nil }
        guard case .table(let table) = value, case .string(let name) = table["type"] else { return check(value, action) { "action" } }
        // (The usual action, declared and whole, is told so without a word made: only a refusal is said.)
        if let shape = actionCaseList.first(where: { ClassShape.same(name, $0.name, ascii: $0.ascii) })?.shape, shape.conforms(table, in: self) {
            return nil
        }
        // (The store's own actions, `luastore/reloaded`, are not the app's to declare.)
        if name.utf8.starts(with: "luastore/".utf8) { return nil }
        if !actionCaseList.isEmpty {
            guard let found = actionCases[name] else {
                return "action type \"\(name)\" is not declared (the contract declares \(actionCases.keys.sorted().map { "\"\($0)\"" }.joined(separator: ", ")))"
            }
            return check(value, found) { "action" }
        }
        return check(value, action) { "action" }
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
    private func check(_ value: LuaValue, _ declared: Class, quiet: Bool = false, _ path: () -> String) -> String? {
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
                if declaredField.optional || Self.admitsNil(declaredField.type) { continue }
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

    static func admitsNil(_ type: ContractType) -> Bool {
        switch type {
        case .optional: true
        case .union(let members): members.contains(where: admitsNil)
        default: false
        }
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
