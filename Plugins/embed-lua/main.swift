// embed-lua OUTPUT MODULE_DIR MODULE_NAME FILE...
//
// Writes OUTPUT, a Swift file declaring `enum EmbeddedLua` with one `EmbeddedLuaFile` per Lua file: its path from
// `Sources/` (`LuaKit/Sandbox/prelude.lua`) and its text, byte for byte, as a raw string literal. The constant's
// name is the file's name in lower camel case (`state_runtime.lua` → `stateRuntime`). Run by the EmbedLua
// build-tool plugin; a file that cannot be embedded is an error naming it.
import Foundation

struct EmbedError: Error, CustomStringConvertible {
    let description: String
}

/// `state_runtime.lua` → `stateRuntime`; `luastore-spec.lua` → `luastoreSpec`.
func identifier(for file: String) throws -> String {
    let stem = file.hasSuffix(".lua") ? String(file.dropLast(4)) : file
    let words = stem.split(whereSeparator: { !($0.isLetter || $0.isNumber) || !$0.isASCII })
    guard let first = words.first, first.first?.isLetter == true else {
        throw EmbedError(description: "\(file): a Lua file's name must start with a letter to be embedded")
    }
    return first.prefix(1).lowercased() + first.dropFirst() + words.dropFirst().map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined()
}

/// The file's text as a Swift raw string literal: delimited by one more `#` than the longest run in the text, so
/// nothing inside can end it or start an escape.
func literal(_ text: String, file: String) throws -> String {
    if let bad = text.unicodeScalars.first(where: { $0.value < 0x20 && $0 != "\n" && $0 != "\t" }) {
        throw EmbedError(description: "\(file): control character U+\(String(bad.value, radix: 16)) cannot be embedded (use an escape in the Lua string)")
    }
    var longest = 0
    var run = 0
    for character in text {
        run = character == "#" ? run + 1 : 0
        longest = max(longest, run)
    }
    let hashes = String(repeating: "#", count: longest + 1)
    // A multi-line literal ends before the newline preceding its closing delimiter: one more keeps the text exact.
    return hashes + "\"\"\"\n" + text + "\n\"\"\"" + hashes
}

func embed(arguments: [String]) throws {
    guard arguments.count >= 3 else {
        throw EmbedError(description: "usage: embed-lua OUTPUT MODULE_DIR MODULE_NAME FILE...")
    }
    let output = URL(fileURLWithPath: arguments[0])
    let moduleDirectory = URL(fileURLWithPath: arguments[1]).standardizedFileURL.path
    let moduleName = arguments[2]
    var constants: [String: String] = [:]
    var body = ""
    for path in arguments.dropFirst(3) {
        let url = URL(fileURLWithPath: path).standardizedFileURL
        guard url.path.hasPrefix(moduleDirectory + "/") else {
            throw EmbedError(description: "\(path) is not inside \(moduleDirectory)")
        }
        let relative = moduleName + "/" + url.path.dropFirst(moduleDirectory.count + 1)
        let name = try identifier(for: url.lastPathComponent)
        if let other = constants[name] {
            throw EmbedError(description: "\(relative) and \(other) would both be EmbeddedLua.\(name): rename one")
        }
        constants[name] = relative
        let data = try Data(contentsOf: url)
        guard let text = String(data: data, encoding: .utf8) else {
            throw EmbedError(description: "\(relative) is not UTF-8")
        }
        body += "\n    /// `\(relative)`\n"
        body += "    static let \(name) = EmbeddedLuaFile(path: \"\(relative)\", source: \(try literal(text, file: relative)))\n"
    }
    let file = """
        // Generated at build time by the EmbedLua plugin (Plugins/EmbedLua) from \(moduleName)'s .lua files. Do not edit.

        /// A Lua file of this module, embedded into the binary at build time.
        struct EmbeddedLuaFile: Sendable {
            /// The file's path from `Sources/` (`LuaKit/Sandbox/prelude.lua`): what its chunk is named after, so
            /// messages and tracebacks name the file and its lines.
            let path: String
            /// The file's text, byte for byte.
            let source: String
        }

        /// This module's Lua files.
        enum EmbeddedLua {
        """ + body + "}\n"
    // Written only when it changes, so an unchanged file does not make the module build again.
    if let existing = try? String(contentsOf: output, encoding: .utf8), existing == file { return }
    try file.write(to: output, atomically: true, encoding: .utf8)
}

do {
    try embed(arguments: Array(CommandLine.arguments.dropFirst()))
} catch {
    FileHandle.standardError.write(Data("embed-lua: \(error)\n".utf8))
    exit(1)
}
