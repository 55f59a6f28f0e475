import CLua
import CLuaGuard

extension LuaVM {
    // MARK: Swift to Lua

    /// [-0, +1, -] Pushes `value`. The host allocates outside the cap (so no Lua error can arise in Swift code);
    /// a value that takes the heap past the cap is dropped again at once and refused with a `.memory` error.
    /// Values far too large to fit are refused before anything is built.
    func push(_ value: borrowing LuaValue, path root: @autoclosure () -> String = "value") throws(LuaError) {
        let limit = guardState.pointee.bytesLimit
        switch value {
        case .string(let text) where text.utf8.count > limit:
            throw LuaError(.memory, "a string of \(text.utf8.count) bytes does not fit under the memory cap of \(limit) bytes")
        case .table(let table) where table.count > limit / 16:
            throw LuaError(.memory, "a table of \(table.count) entries does not fit under the memory cap of \(limit) bytes")
        default:
            break
        }
        let top = lua_gettop(state)
        do throws(ConversionFailure) {
            try pushUnchecked(value, depth: 0, deepest: conversionDepth)
        } catch {
            lua_settop(state, top)
            throw error.error(root: root())
        }
        try refuseIfOverCap(above: top)
    }

    /// After the host built a value on the stack above `top` (outside the cap): if the heap went past the cap,
    /// drops the value again, collects, and refuses it with a `.memory` error — worded the same whatever the heap
    /// held (a recording's replay compares failures word for word, and the heap's size is no input of the app's).
    /// [-(0|n), +0, -] Pops the n values above `top` when it refuses them.
    func refuseIfOverCap(above top: Int32) throws(LuaError) {
        let limit = guardState.pointee.bytesLimit
        guard guardState.pointee.bytesInUse > limit else { return }
        lua_settop(state, top)
        _ = clua_gc(state, LUA_GCCOLLECT, 0)
        throw LuaError(.memory, "the value does not fit in the VM's memory beside what it holds (the memory cap is \(limit) bytes)")
    }

    /// [-0, +1, -] `deepest`: `conversionDepth`.
    private func pushUnchecked(_ value: borrowing LuaValue, depth: Int, deepest: Int) throws(ConversionFailure) {
        switch value {
        case .nil: lua_pushnil(state)
        case .boolean(let flag): lua_pushboolean(state, flag ? 1 : 0)
        case .integer(let integer): lua_pushinteger(state, integer)
        case .number(let number): lua_pushnumber(state, number)
        case .string(let text): pushString(text)
        case .table(let table):
            try pushTable(table, depth: depth, deepest: deepest)
        }
    }

    /// [-0, +1, -]
    private func pushTable(_ table: borrowing LuaTable, depth: Int, deepest: Int) throws(ConversionFailure) {
        guard depth < deepest else {
            throw ConversionFailure("nested deeper than \(deepest) tables")
        }
        guard lua_checkstack(state, 4) != 0 else { throw ConversionFailure("the Lua stack cannot grow") }
        if table.array.isEmpty, pushSmallFields(table) { return }
        lua_createtable(state, Int32(truncatingIfNeeded: table.array.count), Int32(truncatingIfNeeded: table.fieldCount))
        if !table.array.isEmpty {
            var position: lua_Integer = 1
            for element in table.array {
                do throws(ConversionFailure) {
                    try pushUnchecked(element, depth: depth + 1, deepest: deepest)
                } catch {
                    throw error.under(.integer(position))
                }
                lua_rawseti(state, -2, position)
                position += 1
            }
        }
        // A few string-keyed fields (an action's, a literal's): read where they lie, no key made for each.
        let pushedPairs: Void? = try table.withStringPairs { fields throws(ConversionFailure) in
            for index in fields.indices {
                pushString(fields[index].0)
                do throws(ConversionFailure) {
                    try pushUnchecked(fields[index].1, depth: depth + 1, deepest: deepest)
                } catch {
                    throw error.under(.string(fields[index].0))
                }
                lua_rawset(state, -3)
            }
        }
        if pushedPairs != nil { return }
        try table.forEachField { (key, element) throws(ConversionFailure) in
            switch key {
            case .string(let name): pushString(name)
            case .integer(let integer): lua_pushinteger(state, integer)
            case .boolean(let flag): lua_pushboolean(state, flag ? 1 : 0)
            case .number(let number):
                if number.isNaN { throw ConversionFailure("a table key is NaN") }
                lua_pushnumber(state, number)
            }
            switch element {
            case .nil: clua_pop(state, 1); return
            case .boolean(let flag): lua_pushboolean(state, flag ? 1 : 0)
            case .integer(let integer): lua_pushinteger(state, integer)
            case .number(let number): lua_pushnumber(state, number)
            case .string(let text): pushString(text)
            case .table:
                do throws(ConversionFailure) {
                    try pushUnchecked(element, depth: depth + 1, deepest: deepest)
                } catch {
                    throw error.under(key)
                }
            }
            lua_rawset(state, -3)
        }
    }

    /// [-0, +(0|1), -] A table of a few string-keyed fields whose keys and string values are all small strings
    /// (an action's, usually), with booleans and numbers: pushed in one call (`clua_push_small_fields`), its strings
    /// from the cache `pushString` keeps. Returns false, pushing nothing, for any other table.
    private func pushSmallFields(_ table: borrowing LuaTable) -> Bool {
        guard cachesSmallStrings else { return false }
        return table.withStringPairs { pairs -> Bool in
            withUnsafeTemporaryAllocation(of: CLuaSmallField.self, capacity: pairs.count) { fields -> Bool in
                for index in pairs.indices {
                    guard let field = Self.smallField(pairs[index].0, pairs[index].1) else { return false }
                    fields.initializeElement(at: index, to: field)
                }
                clua_push_small_fields(state, fields.baseAddress, Int32(pairs.count))
                return true
            }
        } ?? false
    }

    /// The most actions `pushSmallTables` converts in one call, and the most fields each may have.
    private static let smallTablesAtOnce = 16, smallTableFields = 8

    /// [-0, +0, -] Converts the values of `buffer` from `start` on that are tables `pushSmallFields` would push —
    /// up to the first that is not one, or that is the very value before it (a repeat, which the caller copies
    /// inside the VM), at most `smallTablesAtOnce` — in one call (`clua_push_small_tables`), storing them in the
    /// list at `list` from `position` on. Returns how many it converted (0 when the first is not such a table).
    func pushSmallTables(_ buffer: UnsafeBufferPointer<LuaValue>, from start: Int, list: Int32, position: lua_Integer) -> Int {
        guard cachesSmallStrings else { return 0 }
        let scratch = smallTablesScratch ?? {
            let made = (fields: UnsafeMutablePointer<CLuaSmallField>.allocate(capacity: Self.smallTablesAtOnce * Self.smallTableFields),
                        counts: UnsafeMutablePointer<Int32>.allocate(capacity: Self.smallTablesAtOnce))
            smallTablesScratch = made
            return made
        }()
        var tables = 0, filled = 0
        var index = start
        while index < buffer.count, tables < Self.smallTablesAtOnce {
            if index > start, Self.isSameValue(buffer, index, index - 1) { break }
            guard case .table(let table) = buffer[index], table.array.isEmpty else { break }
            let count: Int? = table.withStringPairs { pairs -> Int? in
                guard pairs.count <= Self.smallTableFields else { return nil }
                for pair in pairs.indices {
                    guard let field = Self.smallField(pairs[pair].0, pairs[pair].1) else { return nil }
                    (scratch.fields + filled + pair).initialize(to: field)
                }
                return pairs.count
            } ?? nil
            guard let count else { break }
            scratch.counts[tables] = Int32(count)
            filled += count
            tables += 1
            index += 1
        }
        guard tables > 0, clua_push_small_tables(state, list, position, scratch.fields, scratch.counts, Int32(tables)) != 0 else { return 0 }
        return tables
    }

    /// A string-keyed field as `clua_push_small_fields` takes it, when its key and any string value are small
    /// strings and its value is not a table or `nil`.
    private static func smallField(_ key: String, _ value: LuaValue) -> CLuaSmallField? {
        let form = unsafeBitCast(key, to: (UInt64, UInt64).self)
        guard form.1 & Self.smallStringFlag != 0 else { return nil }
        var field = CLuaSmallField()
        field.key = form
        switch value {
        case .boolean(let flag):
            field.type = LUA_TBOOLEAN
            field.integer = flag ? 1 : 0
        case .integer(let integer):
            field.type = LUA_TNUMBER
            field.isInteger = 1
            field.integer = integer
        case .number(let number):
            field.type = LUA_TNUMBER
            field.number = number
        case .string(let text):
            let form = unsafeBitCast(text, to: (UInt64, UInt64).self)
            guard form.1 & Self.smallStringFlag != 0 else { return nil }
            field.type = LUA_TSTRING
            field.string = form
        case .nil, .table:
            return nil
        }
        return field
    }

    /// [-0, +1, -]
    func pushString(_ text: String) {
        // A small string (at most 15 bytes: an action's keys and names) holds its bytes in its own 16 bytes, which
        // are the same for two strings exactly when their bytes are: the VM's cache of such strings is keyed by them.
        let form = unsafeBitCast(text, to: (UInt64, UInt64).self)
        if cachesSmallStrings, form.1 & Self.smallStringFlag != 0 {
            withUnsafeBytes(of: form) { bytes in
                clua_push_short_string(state, form.0, form.1, bytes.baseAddress!.assumingMemoryBound(to: CChar.self),
                                       Int((form.1 >> 56) & 0xF))
            }
            return
        }
        let pushed: Void? = text.utf8.withContiguousStorageIfAvailable { bytes in
            _ = lua_pushlstring(state, UnsafeRawPointer(bytes.baseAddress)?.assumingMemoryBound(to: CChar.self), bytes.count)
        }
        if pushed == nil {
            var text = text
            text.withUTF8 { bytes in
                bytes.withMemoryRebound(to: CChar.self) { _ = lua_pushlstring(state, $0.baseAddress, $0.count) }
            }
        }
    }

    /// The flag of a small string in the high word of a Swift `String`'s 16 bytes (64-bit platforms).
    static let smallStringFlag: UInt64 = 1 << 61

    /// Whether small strings lie as `pushString` reads them — bytes first, the count in the high word's top byte
    /// below the flags — checked once on strings of every small length, so that a different layout only costs the
    /// cache, never a wrong string.
    static let smallStringsHoldTheirBytes: Bool = {
        guard MemoryLayout<String>.size == 16, 1.littleEndian == 1 else { return false }
        return (0...15).allSatisfy { count in
            let text = String(decoding: (0..<count).map { UInt8(0x61 + $0) }, as: UTF8.self)
            let form = unsafeBitCast(text, to: (UInt64, UInt64).self)
            guard form.1 & smallStringFlag != 0, Int((form.1 >> 56) & 0xF) == count else { return false }
            return withUnsafeBytes(of: form) { Array($0.prefix(count)) } == Array(text.utf8)
        }
    }()

    // MARK: Lua to Swift

    /// [-0, +0, -] Converts the value at `index` to a `LuaValue`, with raw access only (no metamethod runs), within
    /// the depth and size limits; cycles, functions, userdata and strings that are not UTF-8 are refused, and the
    /// error names the path of the offending value from `root`.
    func value(at index: Int32, root: @autoclosure () -> String) throws(LuaError) -> LuaValue {
        switch lua_type(state, index) {
        case LUA_TNIL, LUA_TNONE: return .nil
        case LUA_TBOOLEAN: return .boolean(lua_toboolean(state, index) != 0)
        case LUA_TNUMBER:
            return lua_isinteger(state, index) != 0 ? .integer(clua_tointeger(state, index)) : .number(clua_tonumber(state, index))
        default: break
        }
        let top = lua_gettop(state)
        var reader = ValueReader(vm: self)
        do throws(ConversionFailure) {
            return try reader.read(lua_absindex(state, index), depth: 0)
        } catch {
            lua_settop(state, top)
            throw error.error(root: root())
        }
    }
}

/// One Lua-to-Swift conversion: counts what it converted, remembers the tables on the current path.
private struct ValueReader {
    // (The VM's state and limits, read once: each read of a class's `var` is checked for exclusive access.)
    let state: OpaquePointer
    let maximumElements: Int
    let maximumDepth: Int
    var elements = 0

    init(vm: LuaVM) {
        state = vm.state
        maximumElements = vm.conversionElements
        maximumDepth = vm.conversionDepth
    }

    /// A table being read, and the one it is in: the tables being read are a list on the stack (a cycle leads back
    /// to one of them), searched in place of hashing into a set — and nothing is allocated to keep it.
    struct Ancestor {
        let identity: UnsafeRawPointer
        let outer: UnsafePointer<Ancestor>?
    }

    func failure(_ message: String) -> ConversionFailure {
        ConversionFailure(message)
    }

    /// [-0, +0, -]
    mutating func read(_ index: Int32, depth: Int, in ancestors: UnsafePointer<Ancestor>? = nil) throws(ConversionFailure) -> LuaValue {
        elements += 1
        if elements > maximumElements {
            throw failure("more than \(maximumElements) values to convert")
        }
        switch lua_type(state, index) {
        case LUA_TNIL, LUA_TNONE: return .nil
        case LUA_TBOOLEAN: return .boolean(lua_toboolean(state, index) != 0)
        case LUA_TNUMBER:
            return lua_isinteger(state, index) != 0 ? .integer(clua_tointeger(state, index)) : .number(clua_tonumber(state, index))
        case LUA_TSTRING: return .string(try readString(index))
        case LUA_TTABLE: return .table(try readTable(index, depth: depth, in: ancestors))
        case let type:
            let name = String(cString: lua_typename(state, type))
            throw failure("a \(name) cannot be converted (only nil, booleans, numbers, strings and tables can)")
        }
    }

    /// [-0, +0, -]
    func readString(_ index: Int32) throws(ConversionFailure) -> String {
        var length = 0
        let bytes = lua_tolstring(state, index, &length)!
        guard let text = String(utf8: UnsafeRawBufferPointer(start: bytes, count: length)) else {
            throw failure("the string is not valid UTF-8")
        }
        return text
    }

    /// [-0, +0, -]
    mutating func readTable(_ index: Int32, depth: Int, in ancestors: UnsafePointer<Ancestor>?) throws(ConversionFailure) -> LuaTable {
        guard depth < maximumDepth else {
            throw failure("tables nested deeper than \(maximumDepth) levels")
        }
        if let table = readFlatFields(index) { return table }
        let identity = lua_topointer(state, index)!
        var outer = ancestors
        while let ancestor = outer {
            if ancestor.pointee.identity == identity { throw failure("the table contains itself (a cycle)") }
            outer = ancestor.pointee.outer
        }
        guard lua_checkstack(state, 3) != 0 else { throw failure("the Lua stack cannot grow") }
        return try withUnsafePointer(to: Ancestor(identity: identity, outer: ancestors)) { table throws(ConversionFailure) in
            try readEntries(index, depth: depth, of: table)
        }
    }

    /// [-0, +0, -] A table of at most `LuaTable.pairsLimit` string-keyed fields that hold booleans, numbers and
    /// strings (props, most actions, most records of a state), read in one call (`clua_read_flat_fields`) and
    /// kept as pairs, as `readEntries` keeps them; nil for any other table, and for one that `readEntries` must
    /// refuse (a string that is not UTF-8, more values than the limit allows), which it then reads again and
    /// words the error for.
    private mutating func readFlatFields(_ index: Int32) -> LuaTable? {
        withUnsafeTemporaryAllocation(of: CLuaFlatField.self, capacity: LuaTable.pairsLimit) { fields -> LuaTable? in
            let count = Int(clua_read_flat_fields(state, index, fields.baseAddress, Int32(fields.count)))
            guard count >= 0, elements + count <= maximumElements else { return nil }
            var pairs: [(String, LuaValue)] = []
            pairs.reserveCapacity(count)
            for field in fields[..<count] {
                guard let key = String(utf8: UnsafeRawBufferPointer(start: field.key, count: field.keyLength)) else {
                    return nil
                }
                switch field.type {
                case LUA_TBOOLEAN:
                    pairs.append((key, .boolean(field.boolean != 0)))
                case LUA_TNUMBER:
                    pairs.append((key, field.isInteger != 0 ? .integer(field.integer) : .number(field.number)))
                default:
                    guard let text = String(utf8: UnsafeRawBufferPointer(start: field.string, count: field.stringLength)) else {
                        return nil
                    }
                    pairs.append((key, .string(text)))
                }
            }
            elements += count
            return LuaTable(array: [], distinctPairs: pairs)
        }
    }

    /// `readTable`'s entries, with `table` at the head of the tables being read.
    private mutating func readEntries(_ index: Int32, depth: Int, of table: UnsafePointer<Ancestor>) throws(ConversionFailure) -> LuaTable {

        var array: [LuaValue] = []
        let border = lua_rawlen(state, index)
        var position: lua_Integer = 1
        while position <= border {
            guard lua_rawgeti(state, index, position) != LUA_TNIL else {
                clua_pop(state, 1)
                break
            }
            do throws(ConversionFailure) {
                array.append(try read(lua_gettop(state), depth: depth + 1, in: table))
            } catch {
                throw error.under(.integer(Int64(position)))
            }
            clua_pop(state, 1)
            position += 1
        }
        let sequenceEnd = Int64(array.count)
        // A few string-keyed fields (props, most tables of a state) are kept as pairs, as a literal's are; the
        // first other key or one field too many moves them into a dictionary.
        var pairs: [(String, LuaValue)] = []
        var fields: [LuaKey: LuaValue]?
        // Counted first (no allocation), so that the pairs are allocated once rather than grown 1, 2, 4, 8.
        var entries = 0
        lua_pushnil(state)
        while lua_next(state, index) != 0 {
            clua_pop(state, 1)
            entries += 1
        }
        let others = entries - array.count
        if others > 0, others <= LuaTable.pairsLimit { pairs.reserveCapacity(others) }
        lua_pushnil(state)
        while lua_next(state, index) != 0 {
            let key: LuaKey
            switch lua_type(state, -2) {
            case LUA_TSTRING: key = .string(try readString(lua_gettop(state) - 1))
            case LUA_TNUMBER:
                key = lua_isinteger(state, -2) != 0 ? .integer(clua_tointeger(state, -2)) : .number(clua_tonumber(state, -2))
            case LUA_TBOOLEAN: key = .boolean(lua_toboolean(state, -2) != 0)
            case let type:
                throw failure("a table key of type \(String(cString: lua_typename(state, type))) cannot be converted")
            }
            if case .integer(let integer) = key, integer >= 1, integer <= sequenceEnd {
                clua_pop(state, 1)
                continue
            }
            let value: LuaValue
            do throws(ConversionFailure) {
                value = try read(lua_gettop(state), depth: depth + 1, in: table)
            } catch {
                throw error.under(key)
            }
            clua_pop(state, 1)
            if fields == nil, case .string(let name) = key, pairs.count < LuaTable.pairsLimit {
                pairs.append((name, value))
            } else {
                if fields == nil {
                    fields = Dictionary(uniqueKeysWithValues: pairs.lazy.map { (LuaKey.string($0.0), $0.1) })
                    pairs = []
                }
                fields![key] = value
            }
        }
        if let fields { return LuaTable(array: array, fields: fields) }
        return LuaTable(array: array, distinctPairs: pairs)
    }
}
