import LuaKit
import LuaStoreScripting
import Testing

/// `RecordingReader.entry`: each field of an entry checked, read without a dictionary — keys as written, and read
/// when they carry an escape; a digest that repeats the one before compared as written, a new one checked.
@Suite struct RecordingReaderTests {
    static let digest = "0123456789abcdef"
    static let header = RecordingLine.withSum(#"{"format":"luastore-recording","version":3,"app":"a","schemaVersion":0,"scripts":"\#(digest)","seq":0,"state":{}}"#)

    static func reader() throws -> RecordingReader { try RecordingReader(header: ArraySlice(header.utf8)) }

    static func entry(_ seq: Int, _ fields: String) -> ArraySlice<UInt8> {
        ArraySlice(RecordingLine.withSum("{\"seq\":\(seq),\(fields)}").utf8)
    }

    static let toggle = #""origin":"outside","action":{"type":"toggle","id":3},"changes":[[["done"],true]],"scripts":"\#(digest)""#

    @Test func anEntryIsReadWithEveryFieldChecked() throws {
        var reader = try Self.reader()
        let first = try #require(try reader.entry(Self.entry(1, Self.toggle)))
        #expect(first.sequence == 1)
        #expect(first.action == ["type": "toggle", "id": 3])
        #expect(first.changesJSON.map { String(decoding: $0, as: UTF8.self) } == #"[[["done"],true]]"#)
        let second = try #require(try reader.entry(Self.entry(2, Self.toggle)))
        #expect(second.sequence == 2)
    }

    @Test func aKeyWithAnEscapeIsReadAsItsName() throws {
        var reader = try Self.reader()
        let escaped = #""\u006frigin":"outside","action":{"type":"toggle","id":3},"changes":[],"scr\u0069pts":"\#(Self.digest)""#
        let entry = try #require(try reader.entry(Self.entry(1, escaped)))
        #expect(entry.action == ["type": "toggle", "id": 3])
    }

    @Test(arguments: [
        (#""origin":"outside","action":{"type":"t"},"changes":[],"scripts":"0123456789abcdef","extra":1"#, "\"extra\""),
        (#""origin":"outside","action":{"type":"t"},"changes":[],"scripts":"0123456789ABCDEF""#, "16 hexadecimal digits"),
        (#""origin":"outside","action":{"type":"t"},"changes":[],"scripts":12"#, "16 hexadecimal digits"),
        (#""origin":"outside","action":{"type":"t"},"changes":[]"#, "16 hexadecimal digits"),
        (#""origin":"outside","changes":[],"scripts":"0123456789abcdef""#, "an \"action\" or a \"reload\""),
        (#""origin":"outside","action":{"type":"t"},"changes":[,],"scripts":"0123456789abcdef""#, "malformed JSON"),
    ])
    func anEntryThatIsNotWhatTheFormatSaysIsRefusedInWords(fields: String, words: String) throws {
        var reader = try Self.reader()
        _ = try reader.entry(Self.entry(1, Self.toggle)) // (its digest is the last one: a repeated digest is compared as written)
        #expect {
            _ = try reader.entry(Self.entry(2, fields))
        } throws: { error in
            "\(error)".contains(words)
        }
    }

    @Test func aLineWithoutItsSumIsRefused() throws {
        var reader = try Self.reader()
        let line = "{\"seq\":1,\(Self.toggle)}"
        #expect(throws: RecordingReader.Malformed.self) { _ = try reader.entry(ArraySlice(line.utf8)) }
    }
}
