import Foundation
import LuaKit
import LuaStoreTestSupport
import Testing

/// `LuaValueBuffer`: values queued as bytes read back as they went in, and reach the VM exactly as converting
/// the `LuaValue` makes them — the same tables, the same errors — checked against that conversion.
@Suite struct LuaValueBufferTests {
    /// Every kind of value, nested and not, with keys of every kind (an integral float key, a negative zero, the
    /// largest integers, infinities, strings that are empty, long or not ASCII).
    static let values: [LuaValue] = [
        .nil, true, false, 0, .integer(.max), .integer(.min), 2.5, .number(-0.0), .number(.infinity), .number(-.infinity),
        "", "héllo wörld ✓", .string(String(repeating: "long ", count: 500)),
        ["type": "add", "by": 1, "note": "note 3", "flag": true],
        [1, 2, "three", [4, [5, ["six": 6]]]],
        .table(LuaTable(array: ["first", "second"], fields: [.integer(5): "five", .number(1.5): "x", .boolean(true): "yes",
                                                              .number(7.0): "seven", "nested": ["a": ["b": ["c": []]]]])),
        .table(LuaTable(array: [], fields: (0..<40).reduce(into: [LuaKey: LuaValue]()) { $0[.string("k\($1)")] = .integer(Int64($1)) })),
        [:],
    ]

    /// Values the bytes do not carry (kept as they are): a `nil` in a table, a NaN key, tables nested deeper
    /// than `maximumDepth`.
    static let kept: [LuaValue] = [
        .table(LuaTable(array: [1, .nil, 3])),
        .table(LuaTable(fields: ["a": 1, "gone": .nil])),
        .table(LuaTable(fields: [.number(.nan): 1])),
        (0..<(LuaValueBuffer.maximumDepth + 2)).reduce(LuaValue.integer(0)) { inner, _ in [inner] },
    ]

    @Test func valuesReadBackAsTheyWentIn() {
        var buffer = LuaValueBuffer()
        for value in Self.values + Self.kept { buffer.append(value) }
        #expect(buffer.count == Self.values.count + Self.kept.count)
        for (position, value) in (Self.values + Self.kept).enumerated() {
            #expect(buffer[position] == value, "position \(position)")
            #expect(buffer.isTable(position) == (value.table != nil))
        }
        var nan = LuaValueBuffer()
        nan.append(.number(.nan))
        #expect(nan[0].number?.isNaN == true)
        buffer.removeAll()
        #expect(buffer.isEmpty)
        buffer.append("again")
        #expect(buffer.count == 1 && buffer[0] == "again")
    }

    /// A copy of a buffer is a value: appending to one leaves the other as it was.
    @Test func buffersAreValues() {
        var first = LuaValueBuffer()
        first.append(["type": "one"])
        var second = first
        second.append(["type": "two"])
        first.removeAll()
        #expect(first.isEmpty)
        #expect(second.count == 2 && second[0] == ["type": "one"] && second[1] == ["type": "two"])
    }

    /// Converting from the buffer and converting each value give the same Lua values, for every kind of value,
    /// kept ones and ones appended again (each a table of its own).
    @Test func theVMGetsWhatConvertingTheValuesGives() async throws {
        let action: LuaValue = ["type": "move", "by": ["x": 1]]
        let all = Self.values.filter { $0 != .nil } + [Self.kept[0], Self.kept[1], Self.kept[3], action, action, action, "same", "same"]
        try await withVM { vm throws in
            var buffer = LuaValueBuffer()
            for value in all { buffer.append(value) }
            let fromBytes = try vm.value(of: try vm.reference(toList: buffer, positions: 0..<buffer.count), root: "list")
            #expect(fromBytes.table?.count == all.count)
            for (index, value) in all.enumerated() {
                let converted = try vm.value(of: try vm.reference(to: value), root: "value")
                #expect(fromBytes[.integer(Int64(index + 1))] == converted, "list[\(index + 1)]")
            }
            // A part of the buffer, starting at a value appended again: converted from its first's bytes.
            let tail = try vm.reference(toList: buffer, positions: (all.count - 4)..<all.count)
            let probe = try vm.load("local l = ... l[1].by.x = 9 return l[1] ~= l[2] and l[1].by ~= l[2].by, l[2].by.x, #l", chunkName: "probe.lua")
            #expect(try vm.call(probe, arguments: [.reference(tail)]) == [true, 1, 4])
        }
    }

    /// A value the buffer cannot carry fails as converting the value fails: the same kind and message (which
    /// names the value's place in the list).
    @Test func failuresAreTheConversions() async throws {
        var limits = LuaLimits()
        limits.memoryBytes = 1 << 20
        let failing: [LuaValue] = [
            .table(LuaTable(fields: ["ok": 1, "inner": .table(LuaTable(fields: [.number(.nan): 1]))])),
            .string(String(repeating: "x", count: 2 << 20)),
            .table(LuaTable(array: (0..<200_000).map { .integer(Int64($0)) })),
            (0..<300).reduce(LuaValue.integer(0)) { inner, _ in [inner] },
        ]
        try await withVM(limits: limits) { vm throws in
            for value in failing {
                var buffer = LuaValueBuffer()
                buffer.append(["type": "fine"])
                buffer.append(value)
                let fromBytes = luaError { _ = try vm.reference(toList: buffer, positions: 0..<2) }
                let fromValue = luaError { _ = try vm.reference(to: value) }
                #expect(fromBytes != nil)
                #expect(fromBytes?.kind == fromValue?.kind)
                #expect(fromBytes?.message == fromValue?.message.replacingOccurrences(of: "value", with: "list[2]"))
            }
            #expect(try vm.run("return 1", chunkName: "after.lua") == [1])
        }
        // Tables nested deeper than a VM takes (its limit under the buffer's own depth) are refused as values are.
        var shallow = LuaLimits()
        shallow.conversionDepth = 3
        try await withVM(limits: shallow) { vm throws in
            var buffer = LuaValueBuffer()
            buffer.append([[[[1]]]])
            let error = luaError { _ = try vm.reference(toList: buffer, positions: 0..<1) }
            #expect(error?.message.contains("nested deeper than 3 tables") == true, "\(String(describing: error))")
        }
    }
}
