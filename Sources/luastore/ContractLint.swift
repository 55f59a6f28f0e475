import Foundation
import LuaKit
import LuaStoreContract
import LuaStoreScripting

/// What `luastore check` says of an app's declared contract (docs/contracts.md), besides what loading it says (the
/// notation; the props against their declaration): an initial state that does not match its declaration, declared
/// actions no reducer handles and actions handled that are not declared. Handled means compared:
/// `action.type == "add"` (or the other way round, or through a local that copies it: `local kind = action.type`) in
/// the app's own files, with the name the reducer gives its action; an app whose reducers compare none (a table of
/// handlers, say) is not told which it handles.
enum ContractLint {
    /// `place`: what the files are named from in messages (`plugins/cart/` for a mounted plugin's); `slice`: the key a
    /// mounted plugin's state lies at (its `init` makes that slice, not the whole state).
    static func findings(in folder: URL, main: String, contract: AppContract, state: LuaValue, place: String = "",
                         slice: String? = nil) -> [String] {
        var findings: [String] = []
        let root = slice.map { "state.\($0)" } ?? "state"
        if let type = contract.state, let problem = contract.mismatch(of: state, as: type, at: root) {
            findings.append("\(place)\(main): the \(slice == nil ? "state" : "slice") init makes does not match its declaration: \(problem)")
        }
        let cases = contract.actionCases
        guard !cases.isEmpty else { return findings }
        let handled = comparedActionTypes(in: folder, parameter: contract.actionParameter ?? "action")
        guard !handled.isEmpty else { return findings }
        for (name, declared) in cases.sorted(by: { $0.key < $1.key }) where handled[name] == nil {
            findings.append("\(place)\(declared.file):\(declared.line): action \"\(name)\" is declared (\(declared.name)) but no reducer handles it")
        }
        for (name, found) in handled.sorted(by: { $0.key < $1.key }) where cases[name] == nil {
            findings.append("\(place)\(found.file):\(found.line): the reducer handles action \"\(name)\", which the contract does not declare")
        }
        return findings
    }

    /// The same of each plugin the app mounts from a folder (a bundle's files are its publisher's): its contract
    /// against its slice of `state`, its declared actions against the ones its reducer compares.
    static func mountFindings(of folder: URL, state: LuaValue) -> [String] {
        var findings: [String] = []
        for plugin in AppContract.mountedFolders(of: folder) {
            let main = AppContract.mainFile(of: plugin.folder)
            let (contract, problems) = AppContract.read(app: plugin.folder, main: main)
            guard problems.isEmpty else {
                findings += problems.map { "\(plugin.place)\($0)" }
                continue
            }
            guard contract.declares else { continue }
            findings += Self.findings(in: plugin.folder, main: main, contract: contract, state: state[.string(plugin.key)],
                                      place: plugin.place, slice: plugin.key)
        }
        return findings
    }

    /// Each action type the app's own files compare `PARAMETER.type` with, and the first place it does.
    static func comparedActionTypes(in folder: URL, parameter: String) -> [String: (file: String, line: Int)] {
        var found: [String: (file: String, line: Int)] = [:]
        let name = NSRegularExpression.escapedPattern(for: parameter)
        guard let pattern = try? NSRegularExpression(pattern: #"\b\#(name)\.type\s*==\s*(["'])([^"'\n]*)\1|(["'])([^"'\n]*)\3\s*==\s*\b\#(name)\.type\b"#),
              let copies = try? NSRegularExpression(pattern: #"local\s+([A-Za-z_][A-Za-z0-9_]*)\s*=\s*\#(name)\.type\b"#) else {
            return found
        }
        for file in AppFiles.namespaces(in: folder).first ?? [] {
            guard let data = FileManager.default.contents(atPath: folder.appendingPathComponent(file).path) else { continue }
            let source = String(decoding: data, as: UTF8.self)
            // (A reducer that reads the type once, `local kind = action.type`, compares that name.)
            var patterns = [pattern]
            for local in copies.matches(in: source, range: NSRange(source.startIndex..., in: source)) {
                guard let range = Range(local.range(at: 1), in: source) else { continue }
                let copy = NSRegularExpression.escapedPattern(for: String(source[range]))
                if let compared = try? NSRegularExpression(pattern: #"\b\#(copy)\s*==\s*(["'])([^"'\n]*)\1|(["'])([^"'\n]*)\3\s*==\s*\b\#(copy)\b"#) {
                    patterns.append(compared)
                }
            }
            for (offset, line) in source.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let text = String(line)
                for match in patterns.flatMap({ $0.matches(in: text, range: NSRange(text.startIndex..., in: text)) }) {
                    for group in [2, 4] {
                        if let range = Range(match.range(at: group), in: text), found[String(text[range])] == nil {
                            found[String(text[range])] = (file, offset + 1)
                        }
                    }
                }
            }
        }
        return found
    }
}
