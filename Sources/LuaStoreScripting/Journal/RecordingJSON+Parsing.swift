import Foundation
import LuaKit
import LuaStoreCore

extension RecordingJSON {
    /// JSON text parsed as the recording format needs it: numbers keep their form (`1` is an integer, `1.0` and
    /// `-0.0` are floats), objects keep their keys. (Foundation's decoder reads `1.0` as the integer 1.)
    public indirect enum Value: Sendable, Equatable {
        /// `null`.
        case null
        /// `true` or `false`.
        case boolean(Bool)
        /// A number without a fraction or an exponent that fits in 64 bits (`1`).
        case integer(Int64)
        /// Any other number (`1.0`, `-0.0`, `1e3`, an integer too large for 64 bits).
        case float(Double)
        /// A string, its escapes read.
        case string(String)
        /// An array, in order.
        case array([Value])
        /// An object, by name (names compared by their bytes, as Lua's keys are).
        case object([Name: Value])

        /// How deep a line's JSON may nest: a state's tables nest at most `LuaLimits.conversionDepth` (200) levels,
        /// and a line holds them at most three levels down (a change's value: the line, its changes, the change).
        public static let maximumDepth = 203

        /// Parses one JSON text (a line of a recording).
        public init(parsing text: Substring) throws(Malformed) {
            try self.init(parsing: Array(text.utf8))
        }

        /// The JSON value `bytes` (UTF-8) hold.
        public init(parsing bytes: some Collection<UInt8>) throws(Malformed) {
            let text = ContiguousArray(bytes)
            self = try text.withUnsafeBufferPointer { buffer throws(Malformed) in
                var parser = Parser(bytes: buffer)
                parser.skipSpace()
                let value = try parser.value(depth: 0)
                parser.skipSpace()
                guard parser.position == parser.bytes.count else { throw parser.fail("text after the value") }
                return value
            }
        }

        /// An entry line's fields, read without making a dictionary of them (`RecordingReader.entry`): those the
        /// format defines, the text of its `changes` (as written, not read: checked only for what bounds it), and how
        /// many fields it has.
        struct EntryFields {
            var seq: Value?, dt: Value?, origin: Value?, action: Value?, reload: Value?
            var failure: Value?, random: Value?
            /// The text of `scripts` (a digest, quoted: entries mostly repeat the one before, compared as written).
            var scripts: ArraySlice<UInt8>?
            /// Whether it has a `sum` (`RecordingLine.checkSum` reads it from the line's end).
            var hasSum = false
            var changes: ArraySlice<UInt8>?
            /// The first field the format does not define, by name.
            var unknown: String?
        }

        /// Whether the key `bytes` (as written between its quotes) is `name`.
        private static func same(_ bytes: Slice<UnsafeBufferPointer<UInt8>>, _ name: StaticString) -> Bool {
            bytes.count == name.utf8CodeUnitCount && bytes.elementsEqual(UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
        }

        /// The fields of the entry line `bytes` (a JSON object).
        static func entryFields(_ bytes: ArraySlice<UInt8>) throws(Malformed) -> EntryFields {
            try bytes.withUnsafeBufferPointer { buffer throws(Malformed) -> EntryFields in
                var parser = Parser(bytes: buffer)
                var fields = EntryFields()
                parser.skipSpace()
                guard parser.position < buffer.count, buffer[parser.position] == UInt8(ascii: "{") else {
                    throw Malformed(description: "an entry must be a JSON object")
                }
                parser.position += 1
                parser.skipSpace()
                if parser.position < buffer.count, buffer[parser.position] == UInt8(ascii: "}") {
                    parser.position += 1
                } else {
                    var met: UInt16 = 0
                    while true {
                        parser.skipSpace()
                        guard parser.position < buffer.count, buffer[parser.position] == UInt8(ascii: "\"") else { throw parser.fail("expected a key") }
                        // (A key is matched as written; one with an escape is read first.)
                        let keyStart = parser.position
                        try parser.skipString()
                        let written = buffer[(keyStart + 1)..<(parser.position - 1)]
                        var name: String?
                        if written.contains(UInt8(ascii: "\\")) {
                            var key = Parser(bytes: buffer)
                            key.position = keyStart
                            name = try key.string()
                        }
                        func named(_ field: StaticString) -> Bool {
                            if let name { return name.utf8.elementsEqual(UnsafeBufferPointer(start: field.utf8Start, count: field.utf8CodeUnitCount)) }
                            return Self.same(written, field)
                        }
                        parser.skipSpace()
                        guard parser.position < buffer.count, buffer[parser.position] == UInt8(ascii: ":") else { throw parser.fail("expected :") }
                        parser.position += 1
                        parser.skipSpace()
                        let start = parser.position
                        func span() -> ArraySlice<UInt8> { bytes[(bytes.startIndex + start)..<(bytes.startIndex + parser.position)] }
                        // (Each field the format defines once: a name met again is refused, as any object's is.)
                        func once(_ field: StaticString, _ bit: UInt16) throws(Malformed) -> Bool {
                            guard named(field) else { return false }
                            guard met & bit == 0 else {
                                parser.position = keyStart
                                throw parser.fail("the name \"\(field)\" appears twice in one object")
                            }
                            met |= bit
                            return true
                        }
                        if try once("seq", 1) { fields.seq = try parser.value(depth: 1) }
                        else if try once("dt", 2) { fields.dt = try parser.value(depth: 1) }
                        else if try once("origin", 4) { fields.origin = try parser.value(depth: 1) }
                        else if try once("action", 8) { fields.action = try parser.value(depth: 1) }
                        else if try once("changes", 16) { try parser.skipValue(depth: 1); fields.changes = span() }
                        else if try once("scripts", 32) { try parser.skipValue(depth: 1); fields.scripts = span() }
                        else if try once("sum", 64) { try parser.skipValue(depth: 1); fields.hasSum = true }
                        else if try once("reload", 128) { fields.reload = try parser.value(depth: 1) }
                        else if try once("failure", 256) { fields.failure = try parser.value(depth: 1) }
                        else if try once("random", 512) { fields.random = try parser.value(depth: 1) }
                        else {
                            try parser.skipValue(depth: 1)
                            if fields.unknown == nil { fields.unknown = name ?? String(decoding: written, as: UTF8.self) }
                        }
                        parser.skipSpace()
                        guard parser.position < buffer.count else { throw parser.fail("an object is not closed") }
                        if buffer[parser.position] == UInt8(ascii: ",") { parser.position += 1; continue }
                        guard buffer[parser.position] == UInt8(ascii: "}") else { throw parser.fail("expected , or }") }
                        parser.position += 1
                        break
                    }
                }
                parser.skipSpace()
                guard parser.position == buffer.count else { throw parser.fail("text after the value") }
                return fields
            }
        }

        /// Parses the JSON object `bytes` hold, and says where the text of its field `field` lies in them (as written,
        /// between the colon and the comma or brace after it; nil when the object has no such field).
        /// With `readsIt` false, the field is not read (nor in the object): its text is only checked for the
        /// brackets, quotes and escapes that bound it.
        public static func parsing(_ bytes: ArraySlice<UInt8>, spanOf field: String, readsIt: Bool = true) throws(Malformed)
            -> (value: Value, span: ArraySlice<UInt8>?) {
            try bytes.withUnsafeBufferPointer { buffer throws(Malformed) in
                var parser = Parser(bytes: buffer)
                parser.captured = field
                parser.readsCaptured = readsIt
                parser.skipSpace()
                let value = try parser.value(depth: 0)
                parser.skipSpace()
                guard parser.position == parser.bytes.count else { throw parser.fail("text after the value") }
                let span = parser.span.map { bytes[(bytes.startIndex + $0.lowerBound)..<(bytes.startIndex + $0.upperBound)] }
                return (value, span)
            }
        }

        /// The field `name` of an object.
        public subscript(name: String) -> Value? {
            if case .object(let fields) = self { return fields[Name(name)] }
            return nil
        }

        /// An object's member name: two names are one when their bytes are (as two Lua keys are), where Swift's
        /// strings call two spellings of one character equal (`"é"` and `"e\u{301}"`, two keys in Lua).
        public struct Name: Hashable, Sendable, ExpressibleByStringLiteral {
            /// The name as text.
            public let text: String

            /// The name `text`.
            public init(_ text: String) { self.text = text }
            public init(stringLiteral text: String) { self.text = text }

            public static func == (first: Name, second: Name) -> Bool { String.sameBytes(first.text, second.text) }
            public func hash(into hasher: inout Hasher) { text.hashBytes(into: &hasher) }
        }

        /// Reads JSON text in place (the caller's buffer, for as long as it parses).
        private struct Parser {
            let bytes: UnsafeBufferPointer<UInt8>
            var position = 0
            /// The field of the outermost object whose text is wanted, whether it is read too, and where it was found.
            var captured: String?
            var readsCaptured = true
            var span: Range<Int>?

            func fail(_ what: String) -> Malformed {
                Malformed(description: "malformed JSON at byte \(position + 1): \(what)")
            }

            mutating func skipSpace() {
                while position < bytes.count {
                    switch bytes[position] {
                    case 32, 9, 10, 13: position += 1
                    default: return
                    }
                }
            }

            mutating func expect(_ literal: StaticString, _ value: Value) throws(Malformed) -> Value {
                let count = literal.utf8CodeUnitCount
                guard bytes.count - position >= count,
                      (0..<count).allSatisfy({ bytes[position + $0] == literal.utf8Start[$0] }) else {
                    throw fail("expected \(literal)")
                }
                position += count
                return value
            }

            mutating func value(depth: Int) throws(Malformed) -> Value {
                guard depth < Value.maximumDepth else { throw fail("nested deeper than \(Value.maximumDepth) levels") }
                guard position < bytes.count else { throw fail("the text ends where a value should be") }
                switch bytes[position] {
                case UInt8(ascii: "n"): return try expect("null", .null)
                case UInt8(ascii: "t"): return try expect("true", .boolean(true))
                case UInt8(ascii: "f"): return try expect("false", .boolean(false))
                case UInt8(ascii: "\""): return .string(try string())
                case UInt8(ascii: "["):
                    position += 1
                    var items: [Value] = []
                    skipSpace()
                    if position < bytes.count, bytes[position] == UInt8(ascii: "]") {
                        position += 1
                        return .array(items)
                    }
                    while true {
                        skipSpace()
                        items.append(try value(depth: depth + 1))
                        skipSpace()
                        guard position < bytes.count else { throw fail("an array is not closed") }
                        if bytes[position] == UInt8(ascii: ",") { position += 1; continue }
                        guard bytes[position] == UInt8(ascii: "]") else { throw fail("expected , or ]") }
                        position += 1
                        return .array(items)
                    }
                case UInt8(ascii: "{"):
                    position += 1
                    skipSpace()
                    if position < bytes.count, bytes[position] == UInt8(ascii: "}") {
                        position += 1
                        return .object([:])
                    }
                    // (A recorded line's objects are small: made once, not regrown field by field.)
                    var fields = [Name: Value](minimumCapacity: 8)
                    while true {
                        skipSpace()
                        guard position < bytes.count, bytes[position] == UInt8(ascii: "\"") else { throw fail("expected a key") }
                        let keyStart = position
                        let key = try string()
                        let isCaptured = depth == 0 && captured.map { String.sameBytes(key, $0) } == true
                        guard fields[Name(key)] == nil, !(isCaptured && span != nil) else {
                            position = keyStart
                            throw fail("the name \(LuaPath.quoted(key)) appears twice in one object")
                        }
                        skipSpace()
                        guard position < bytes.count, bytes[position] == UInt8(ascii: ":") else { throw fail("expected :") }
                        position += 1
                        skipSpace()
                        let valueStart = position
                        if isCaptured {
                            if readsCaptured { fields[Name(key)] = try value(depth: depth + 1) } else { try skipValue(depth: depth + 1) }
                            span = valueStart..<position
                        } else {
                            fields[Name(key)] = try value(depth: depth + 1)
                        }
                        skipSpace()
                        guard position < bytes.count else { throw fail("an object is not closed") }
                        if bytes[position] == UInt8(ascii: ",") { position += 1; continue }
                        guard bytes[position] == UInt8(ascii: "}") else { throw fail("expected , or }") }
                        position += 1
                        return .object(fields)
                    }
                default:
                    return try number()
                }
            }

            mutating func number() throws(Malformed) -> Value {
                let start = position
                // The usual number, an integer of a few digits, is read as it is scanned; anything else from its text.
                var negative = false
                if position < bytes.count, bytes[position] == UInt8(ascii: "-") {
                    negative = true
                    position += 1
                }
                var magnitude: Int64 = 0
                var digits = 0
                while position < bytes.count, digits < 18, case 48...57 = bytes[position] {
                    magnitude = magnitude * 10 + Int64(bytes[position] - 48)
                    digits += 1
                    position += 1
                }
                if digits > 0, position == bytes.count || !Self.continuesNumber(bytes[position]),
                   digits == 1 || bytes[start + (negative ? 1 : 0)] != UInt8(ascii: "0") {
                    return .integer(negative ? -magnitude : magnitude)
                }
                position = start
                var isFloat = false
                while position < bytes.count {
                    let byte = bytes[position]
                    if byte == UInt8(ascii: ".") || byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E") {
                        isFloat = true
                    } else if !(byte == UInt8(ascii: "-") || byte == UInt8(ascii: "+") || (48...57).contains(byte)) {
                        break
                    }
                    position += 1
                }
                let text = String(decoding: bytes[start..<position], as: UTF8.self)
                guard !text.isEmpty else { throw fail("unexpected character") }
                if !isFloat, let integer = Int64(text) { return .integer(integer) }
                guard let float = Double(text), float.isFinite else { throw fail("not a number: \(text)") }
                return .float(float)
            }

            /// Moves past the value at `position` without making it: its text is checked for the brackets, quotes and
            /// escapes that bound it (what it means is read if it is parsed later).
            mutating func skipValue(depth: Int) throws(Malformed) {
                guard depth < Value.maximumDepth else { throw fail("nested deeper than \(Value.maximumDepth) levels") }
                guard position < bytes.count else { throw fail("the text ends where a value should be") }
                let opening = bytes[position]
                guard opening == UInt8(ascii: "[") || opening == UInt8(ascii: "{") else {
                    if opening == UInt8(ascii: "\"") { try skipString() } else { _ = try value(depth: depth) } // (small)
                    return
                }
                let isObject = opening == UInt8(ascii: "{")
                let closing = isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")
                position += 1
                skipSpace()
                if position < bytes.count, bytes[position] == closing {
                    position += 1
                    return
                }
                while true {
                    skipSpace()
                    if isObject {
                        guard position < bytes.count, bytes[position] == UInt8(ascii: "\"") else { throw fail("expected a key") }
                        try skipString()
                        skipSpace()
                        guard position < bytes.count, bytes[position] == UInt8(ascii: ":") else { throw fail("expected :") }
                        position += 1
                        skipSpace()
                    }
                    try skipValue(depth: depth + 1)
                    skipSpace()
                    guard position < bytes.count else { throw fail(isObject ? "an object is not closed" : "an array is not closed") }
                    if bytes[position] == UInt8(ascii: ",") {
                        position += 1
                        continue
                    }
                    guard bytes[position] == closing else { throw fail(isObject ? "expected , or }" : "expected , or ]") }
                    position += 1
                    return
                }
            }

            /// Moves past the string at `position`.
            mutating func skipString() throws(Malformed) {
                position += 1 // the opening quote
                while position < bytes.count {
                    let byte = bytes[position]
                    if byte == UInt8(ascii: "\"") {
                        position += 1
                        return
                    }
                    if byte == UInt8(ascii: "\\") {
                        position += 2
                        continue
                    }
                    guard byte >= 0x20 else { throw fail("a control character in a string") }
                    position += 1
                }
                throw fail("a string is not closed")
            }

            /// Whether `byte` may continue a number's text (a digit, a sign, a point or an exponent).
            static func continuesNumber(_ byte: UInt8) -> Bool {
                switch byte {
                case 48...57, UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E"), UInt8(ascii: "-"), UInt8(ascii: "+"): true
                default: false
                }
            }

            mutating func string() throws(Malformed) -> String {
                position += 1 // the opening quote
                // Most strings have no escape: made from their bytes at once.
                let start = position
                while position < bytes.count {
                    let byte = bytes[position]
                    if byte == UInt8(ascii: "\"") {
                        position += 1
                        return String(decoding: bytes[start..<position - 1], as: UTF8.self)
                    }
                    if byte == UInt8(ascii: "\\") || byte < 0x20 { break }
                    position += 1
                }
                position = start
                var scalars = String.UnicodeScalarView()
                var run = position
                func flush(_ end: Int) { scalars.append(contentsOf: String(decoding: bytes[run..<end], as: UTF8.self).unicodeScalars) }
                while position < bytes.count {
                    let byte = bytes[position]
                    if byte == UInt8(ascii: "\"") {
                        flush(position)
                        position += 1
                        return String(scalars)
                    }
                    guard byte == UInt8(ascii: "\\") else {
                        guard byte >= 0x20 else { throw fail("a control character in a string") }
                        position += 1
                        continue
                    }
                    flush(position)
                    position += 1
                    guard position < bytes.count else { break }
                    let escape = bytes[position]
                    position += 1
                    switch escape {
                    case UInt8(ascii: "\""): scalars.append("\"")
                    case UInt8(ascii: "\\"): scalars.append("\\")
                    case UInt8(ascii: "/"): scalars.append("/")
                    case UInt8(ascii: "b"): scalars.append("\u{8}")
                    case UInt8(ascii: "f"): scalars.append("\u{C}")
                    case UInt8(ascii: "n"): scalars.append("\n")
                    case UInt8(ascii: "r"): scalars.append("\r")
                    case UInt8(ascii: "t"): scalars.append("\t")
                    case UInt8(ascii: "u"):
                        var code = try hex4()
                        if (0xD800..<0xDC00).contains(code), bytes.count - position >= 6, bytes[position] == UInt8(ascii: "\\"),
                           bytes[position + 1] == UInt8(ascii: "u") {
                            position += 2
                            let low = try hex4()
                            guard (0xDC00..<0xE000).contains(low) else { throw fail("a lone surrogate") }
                            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                        }
                        guard let scalar = Unicode.Scalar(code) else { throw fail("a lone surrogate") }
                        scalars.append(scalar)
                    default: throw fail("an unknown escape")
                    }
                    run = position
                }
                throw fail("a string is not closed")
            }

            mutating func hex4() throws(Malformed) -> UInt32 {
                guard bytes.count - position >= 4, let code = UInt32(String(decoding: bytes[position..<position + 4], as: UTF8.self), radix: 16) else {
                    throw fail("a \\u escape needs four hex digits")
                }
                position += 4
                return code
            }
        }
    }
}
