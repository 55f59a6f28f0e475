import Foundation
import LuaKit
import LuaStoreCore
import LuaStoreScripting
@testable import LuaStoreScripting
import LuaStoreTestSupport
import Testing

/// The recording's lines: values written losslessly and read back, sums made and checked together as alone,
/// fields found as written.
@Suite struct RecordingFormatTests {
    /// Recorded values come back exactly: integers and floats, keys that are not strings, empty tables, a
    /// string key that looks like the encoding's own.
    @Test func recordedValuesRoundTrip() throws {
        let values: [LuaValue] = [
            ["flags": .table(LuaTable(fields: [.boolean(true): "yes"])), "marks": .table(LuaTable(fields: [5: true]))],
            ["one": 1, "onePointZero": .number(1.0), "tiny": .number(1e-300), "big": .number(1.5e300), "third": .number(1.0 / 3)],
            ["empty": .table(LuaTable()), "list": [1, 2, 3], "holes": .table(LuaTable(array: [1], fields: [3: 3]))],
            ["$map": 1], .table(LuaTable(fields: [.number(2.5): "a", .integer(-1): "b", .boolean(false): [:]])),
            ["text": "quote \" backslash \\ newline \n tab \t nul \u{0} é 🙂"], .integer(Int64.min), .number(-0.0),
        ]
        for value in values {
            let text = try RecordingJSON.encode(value)
            let back = try RecordingJSON.decode(text: text[...])
            #expect(back == value, "\(text)")
            if case .number(let number) = value { #expect(back.number?.sign == number.sign) }
        }
        #expect(throws: RecordingJSON.Unrepresentable.self) { try RecordingJSON.encode(.number(.infinity)) }
    }

    /// Keys that are other bytes are other keys in a recording as in Lua — `"é"` composed and decomposed, which
    /// Swift's strings call equal (a replay of a state holding both diverged: one of them was read as the other) —
    /// and an object naming a member twice is refused, in an entry's own fields and inside its values.
    @Test func namesAreKeptByTheirBytesAndNamedOnce() throws {
        let value: LuaValue = .table(LuaTable(stringFields: [("\u{E9}", 1), ("e\u{301}", 2)]))
        #expect(value.table?.fields.count == 2)
        let text = try RecordingJSON.encode(value)
        #expect(try RecordingJSON.decode(text: text[...]) == value)
        #expect(throws: RecordingJSON.Malformed.self) { try RecordingJSON.Value(parsing: #"{"a":1,"b":{"x":1,"x":2}}"#[...]) }
        do {
            _ = try RecordingJSON.Value(parsing: #"{"a":1,"a":2}"#[...])
        } catch {
            #expect("\(error)".contains(#"at byte 8: the name "a" appears twice in one object"#), "\(error)")
        }
        do {
            _ = try RecordingJSON.Value.entryFields(Array(#"{"seq":1,"dt":0,"seq":2}"#.utf8)[...])
            Issue.record("an entry naming seq twice was read")
        } catch {
            #expect("\(error)".contains(#"at byte 17: the name "seq" appears twice in one object"#), "\(error)")
        }
    }

    /// Sums checked four lines at a time say of each line what `checkSum` says alone: lines of many lengths, one
    /// with a byte changed, one whose sum is not hexadecimal, one without a sum, in groups of four and the rest.
    @Test func sumsCheckedTogetherAgreeWithEachLineAlone() throws {
        for count in [1, 2, 4, 5, 9, 13] {
            var bytes: [UInt8] = []
            var ranges: [Range<Int>] = []
            for index in 0..<count {
                var line = Array(#"{"seq":\#(index + 1),"text":""#.utf8)
                line += (0..<([3, 180, 40, 1_500, 0][index % 5] + index)).map { UInt8(truncatingIfNeeded: 97 + ($0 + index) % 26) }
                line += Array(#""}"#.utf8)
                line = Array(RecordingLine.withSum(String(decoding: line, as: UTF8.self)).utf8)
                switch index % 6 {
                case 2: line[8] ^= 1 // a byte changed
                case 3: line[line.count - 4] = UInt8(ascii: "g") // a sum that is not hexadecimal
                case 5: line.removeLast(RecordingLine.sumSuffixLength) // no sum
                default: break
                }
                ranges.append(bytes.count..<(bytes.count + line.count))
                bytes += line
            }
            let together = RecordingLine.sumsMatch(ranges, in: bytes)
            for (index, range) in ranges.enumerated() {
                let alone = (try? RecordingLine.checkSum(bytes[range])) != nil
                #expect(together[index] == alone, "line \(index + 1) of \(count)")
                #expect(alone == ![2, 3, 5].contains(index % 6), "line \(index + 1) of \(count)")
            }
        }
    }

    /// A table that keeps its fields as pairs (a literal, a small table read from the VM) is written as the same
    /// table kept as a dictionary is: keys in byte order, a lone "$map" key as a map.
    @Test func tablesKeptAsPairsAreWrittenAsDictionariesAre() throws {
        let literals: [LuaValue] = [
            ["type": "toggle", "id": 7], ["b": 1, "ab": 2, "a": 3, "": 4, "é": 5, "Z": 6, "a\u{0}": 7, "zz": 8],
            ["$map": 1], ["$map": 1, "x": 2], ["only": [1, 2]],
        ]
        for literal in literals {
            guard case .table(let kept) = literal else { Issue.record("not a table"); continue }
            #expect(kept.stringPairs != nil, "\(literal): kept as pairs")
            let written = try RecordingJSON.encode(literal)
            #expect(written == (try RecordingJSON.encode(.table(LuaTable(fields: kept.fields)))), "\(literal)")
            #expect(try RecordingJSON.decode(text: written[...]) == literal)
        }
    }

    /// Sums written four lines at a time (a run's entries) are each line's own: lines of many lengths (a
    /// byte or two, far longer than the others), after text that is not summed, in groups of four and the rest alone.
    @Test func sumsWrittenTogetherAreEachLinesOwn() throws {
        for count in [1, 3, 4, 5, 8, 11] {
            var output = Array("before\n".utf8)
            var sums = RecordingLine.SumsToWrite()
            var starts: [Int] = []
            for index in 0..<count {
                starts.append(output.count)
                let length = [1, 2, 190, 7, 2_000, 63][index % 6] + index
                output.append(contentsOf: (0..<length).map { UInt8(truncatingIfNeeded: 32 + ($0 * 7 + index) % 90) })
                sums.appendSuffix(to: &output, from: starts[index])
                output.append(10)
            }
            sums.write(into: &output)
            #expect(output.starts(with: Array("before\n".utf8)))
            for (index, start) in starts.enumerated() {
                let end = (starts.dropFirst(index + 1).first ?? output.count) - 1
                let line = output[start..<end]
                #expect(throws: Never.self, "line \(index) of \(count)") { try RecordingLine.checkSum(line) }
                var alone = Array(line.dropLast(RecordingLine.sumSuffixLength))
                RecordingLine.appendSum(to: &alone, from: 0)
                #expect(alone.elementsEqual(line), "line \(index) of \(count)")
            }
        }
    }

    /// `RecordingJSON.Value.parsing(_:spanOf:)` parses as `init(parsing:)` does and finds the text of an outermost field,
    /// exactly as written, and only an outermost one.
    @Test func aFieldsTextIsFoundAsWritten() throws {
        let line = #"{"seq":3,"action":{"changes":"not this one"},"changes": [[["a"], 1] , [["b"]]] ,"scripts":"x"}"#
        let bytes = ArraySlice(Array(line.utf8))
        let (value, span) = try RecordingJSON.Value.parsing(bytes, spanOf: "changes")
        #expect(value == (try RecordingJSON.Value(parsing: line[...])))
        #expect(span.map { String(decoding: $0, as: UTF8.self) } == #"[[["a"], 1] , [["b"]]]"#)
        #expect(try RecordingJSON.Value.parsing(bytes, spanOf: "missing").span == nil)
        #expect(try RecordingJSON.Value.parsing(bytes[bytes.startIndex...], spanOf: "seq").span.map { Array($0) } == Array("3".utf8))
        let recorded = RecordingLine.RecordedAction(sequence: 3, action: [:], changesJSON: span)
        #expect(try recorded.readChanges() == [StateChange(path: ["a"], value: 1), StateChange(path: ["b"], value: nil)])
        // The text is bounded by its brackets, quotes and escapes, not read: an unclosed list is refused at once,
        // a list of the wrong shape when it is read.
        let unclosed = ArraySlice(Array(#"{"seq":1,"action":{"type":"x"},"changes":[["a\"]"],1]"#.utf8))
        #expect(throws: RecordingJSON.Malformed.self) { try RecordingJSON.Value.parsing(unclosed, spanOf: "changes", readsIt: false) }
        let wrongLine = ArraySlice(Array(#"{"seq":1,"action":{"type":"x"},"changes":{"a":[1,"]"]}}"#.utf8))
        let wrongSpan = try #require(try RecordingJSON.Value.parsing(wrongLine, spanOf: "changes", readsIt: false).span)
        #expect(String(decoding: wrongSpan, as: UTF8.self) == #"{"a":[1,"]"]}"#)
        let wrongShape = RecordingLine.RecordedAction(sequence: 1, action: [:], changesJSON: wrongSpan)
        #expect(throws: RecordingJSON.Malformed.self) { try wrongShape.readChanges() }
    }
}
