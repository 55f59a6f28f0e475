import Foundation

/// What an app declares of its actions, props and state, in LuaLS annotations (the notation Lua editors read):
/// `---@class`, `---@field`, `---@alias` anywhere in its files, and on its entry points `---@param action T` of
/// `reduce`, `---@return T` of `props` and of `init` (docs/contracts.md). Undeclared apps have none.
public struct AppContract: Sendable {
    /// A declared class: its fields, in the order written.
    public struct Class: Sendable {
        /// A field of a class, from its `---@field name T` line.
        public struct Field: Sendable {
            /// The field's name, without the `?` of an optional field.
            public let name: String
            /// The type its value must have.
            public let type: ContractType
            /// Written `name?`: the field may be absent.
            public let optional: Bool
            /// The line of its `---@field` (in the class's file).
            public let line: Int
        }

        /// The class's name.
        public let name: String
        /// Its fields, in the order written.
        public let fields: [Field]
        /// The file it is declared in, relative to the app's folder.
        public let file: String
        /// The line of its `---@class`.
        public let line: Int

        init(name: String, fields: [Field], file: String, line: Int) {
            self.name = name
            self.fields = fields
            self.file = file
            self.line = line
        }

        /// The literal of its `type` field, when it has one: the action case it is.
        public var caseName: String? {
            guard let field = fields.first(where: { $0.name == "type" }), case .literal(let name) = field.type else { return nil }
            return name
        }
    }

    /// Something in the annotations that is not a contract LuaStore checks: where, and why.
    public struct Problem: Error, Sendable, Equatable, CustomStringConvertible {
        /// The file, relative to the app's folder.
        public let file: String
        /// The line in that file.
        public let line: Int
        /// What is wrong, in words.
        public let message: String
        public var description: String { "\(file):\(line): \(message)" }
    }

    /// The declared classes, by name.
    public private(set) var classes: [String: Class] = [:]
    /// The declared aliases, by name: the type each stands for.
    public private(set) var aliases: [String: ContractType] = [:]
    /// Where each alias, and the action, props and state types, are declared (for messages).
    package private(set) var places: [String: (file: String, line: Int)] = [:]
    /// The type of an action (`---@param action T` of `reduce`), of the props (`---@return T` of `props`), of the
    /// state (`---@return T` of `init`, or the first `---@param` of `reduce` or `props`).
    public private(set) var action: ContractType?
    /// The props' type; nil when the app does not declare it.
    public private(set) var props: ContractType?
    /// The state's type; nil when the app does not declare it.
    public private(set) var state: ContractType?
    /// The name the reducer gives its action (its second parameter), and where `reduce` is.
    public private(set) var actionParameter: String?

    /// Where the props' type is declared (`---@return T` of `props`): the place a props failure names.
    public var propsDeclaration: (file: String, line: Int)? { places["props"] }

    /// Whether the app declares anything of its actions, props or state.
    public var declares: Bool { action != nil || props != nil || state != nil }

    /// The action cases: each declared class an action may be, by the literal of its `type` field.
    public private(set) var actionCases: [String: Class] = [:]

    private mutating func findActionCases() {
        guard let action else { return }
        for name in resolvedMembers(action) {
            if let found = classes[name], let caseName = found.caseName { actionCases[caseName] = found }
        }
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
            guard let url = AppFiles.inside(file, of: folder), let data = FileManager.default.contents(atPath: url.path) else { continue }
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
                    openClass?.fields.append(Class.Field(name: name, type: type, optional: optional, line: number))
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
    /// `local function init()`; its name and its parameters. (Read byte by byte, once per line of the main file: each
    /// store reads its app's contract as it loads, and three `Regex`es made per line — parsed and compiled anew each
    /// time — were a third of a server's CPU while it made new keys.)
    static func entryPoint(_ line: Substring) -> (name: String, parameters: [String])? {
        // `function NAME[.:]ENTRY(…)`, `NAME.ENTRY = function(…)`, `local function ENTRY(…)`
        var cursor = LineCursor(line)
        if cursor.take("function"), cursor.spaces() > 0, cursor.identifier(), cursor.take(".") || cursor.take(":"),
           let found = cursor.entry() {
            return found
        }
        cursor = LineCursor(line)
        if cursor.identifier(), cursor.take("."), let name = cursor.entryName(), cursor.spaces() >= 0, cursor.take("="),
           cursor.spaces() >= 0, cursor.take("function"), cursor.spaces() >= 0, let parameters = cursor.parameters() {
            return (name, parameters)
        }
        cursor = LineCursor(line)
        if cursor.take("local"), cursor.spaces() > 0, cursor.take("function"), cursor.spaces() > 0, let found = cursor.entry() {
            return found
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
                    problems.append(Problem(file: found.file, line: field.line,
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
    package func resolvedMembers(_ type: ContractType, seen: Set<String> = []) -> [String] {
        switch type {
        case .named(let name):
            if classes[name] != nil { return [name] }
            guard let alias = aliases[name], !seen.contains(name) else { return [] }
            return resolvedMembers(alias, seen: seen.union([name]))
        case .union(let members): return members.flatMap { resolvedMembers($0, seen: seen) }
        default: return []
        }
    }

    /// Whether `type` takes `nil` (optional, or a union with an optional member).
    package static func admitsNil(_ type: ContractType) -> Bool {
        switch type {
        case .optional: true
        case .union(let members): members.contains(where: admitsNil)
        default: false
        }
    }
}

/// A cursor over the bytes of a line of Lua, for `AppContract.entryPoint`: each step either reads what it names and
/// moves past it, or leaves the cursor where it was.
struct LineCursor {
    private let line: Substring
    private let bytes: Substring.UTF8View
    private var position: Substring.UTF8View.Index

    init(_ line: Substring) {
        self.line = line
        bytes = line.utf8
        position = bytes.startIndex
    }

    private var next: UInt8? { position < bytes.endIndex ? bytes[position] : nil }

    /// Reads `text`, exactly.
    mutating func take(_ text: StaticString) -> Bool {
        var at = position
        for index in 0..<text.utf8CodeUnitCount {
            guard at < bytes.endIndex, bytes[at] == text.utf8Start[index] else { return false }
            bytes.formIndex(after: &at)
        }
        position = at
        return true
    }

    /// Reads white space (`\s`: a space, a tab, a line or page break); how many bytes.
    mutating func spaces() -> Int {
        var count = 0
        while let byte = next, byte == 0x20 || (0x09...0x0D).contains(byte) {
            bytes.formIndex(after: &position)
            count += 1
        }
        return count
    }

    /// Reads a Lua name (`[A-Za-z_][A-Za-z0-9_]*`).
    mutating func identifier() -> Bool {
        func isLetter(_ byte: UInt8) -> Bool { (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || byte == 0x5F }
        guard let first = next, isLetter(first) else { return false }
        repeat { bytes.formIndex(after: &position) } while next.map({ isLetter($0) || (0x30...0x39).contains($0) }) == true
        return true
    }

    /// Reads the name of an entry point (`init`, `reduce` or `props`) that white space and `(` or `=` follow.
    mutating func entryName() -> String? {
        for name: StaticString in ["init", "reduce", "props"] {
            let start = position
            if take(name) {
                var ahead = self
                _ = ahead.spaces()
                if ahead.next == UInt8(ascii: "(") || ahead.next == UInt8(ascii: "=") { return name.description }
            }
            position = start
        }
        return nil
    }

    /// Reads an entry point's name and its parameters (`reduce(state, action)`).
    mutating func entry() -> (name: String, parameters: [String])? {
        let start = position
        guard let name = entryName(), spaces() >= 0, let parameters = parameters() else {
            position = start
            return nil
        }
        return (name, parameters)
    }

    /// Reads a parenthesised list of parameters (everything up to the first `)`), each trimmed of white space.
    mutating func parameters() -> [String]? {
        guard take("(") else { return nil }
        let start = position
        while let byte = next, byte != UInt8(ascii: ")") { bytes.formIndex(after: &position) }
        guard next == UInt8(ascii: ")") else { position = start; return nil }
        let inside = line[start..<position] // (both ends next to an ASCII byte: on a boundary of characters)
        bytes.formIndex(after: &position)
        return inside.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
    }
}
