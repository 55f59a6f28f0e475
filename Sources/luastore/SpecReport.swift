import Foundation
import LuaKit

/// The results of `luastore test`, rendered for people (text) or tools (busted-style JSON, TAP, JUnit XML).
struct SpecReport {
    let results: [SpecResult]

    var passed: Int { results.count { $0.status == .passed } }
    var failed: Int { results.count { $0.status == .failed } }
    var errored: Int { results.count { $0.status == .errored } }
    var pending: Int { results.count { $0.status == .pending } }

    func render(_ output: SpecOutput) -> String {
        switch output {
        case .text: text
        case .json: json
        case .tap: tap
        case .junit: junit
        }
    }

    /// `FAIL file:line: name: message` for each failed assertion, `ERROR …` for each other error, `PENDING
    /// file:line: name` for each pending test, then `N passed, N failed` (and `, N errors`, `, N pending`).
    var text: String {
        var lines: [String] = []
        for result in results {
            switch result.status {
            case .failed, .errored:
                let message = (result.message ?? "").replacingOccurrences(of: "\n", with: "\n  ")
                lines.append("\(result.status == .failed ? "FAIL" : "ERROR") \(result.location): \(result.name): \(message)")
                if let traceback = result.traceback { lines.append("  " + traceback.replacingOccurrences(of: "\n", with: "\n  ")) }
            case .pending: lines.append("PENDING \(result.location): \(result.name)" + (result.message.map { ": " + $0 } ?? ""))
            case .passed: break
            }
        }
        lines.append("\(passed) passed, \(failed) failed" + (errored > 0 ? ", \(errored) \(errored == 1 ? "error" : "errors")" : "")
            + (pending > 0 ? ", \(pending) pending" : ""))
        return lines.joined(separator: "\n")
    }

    /// busted's JSON: `successes`, `failures` (assertions that failed), `errors` (anything else a test raised),
    /// `pendings` and `duration`; each element has `name`, `file` and `line` (the place: a test's own, or where it
    /// failed, in a module too) and `message` for failures and errors.
    var json: String {
        func element(_ result: SpecResult) -> LuaValue {
            // `file` and `line` say one place: where it failed (a module's line is the module's, not the spec's).
            var element = LuaTable(fields: ["name": .string(result.name), "file": .string(result.file)])
            if let colon = result.location.lastIndex(of: ":"), let line = Int64(result.location[result.location.index(after: colon)...]) {
                element["file"] = .string(String(result.location[..<colon]))
                element["line"] = .integer(line)
            }
            if let message = result.message { element["message"] = .string(message) }
            element["duration"] = .number(result.seconds)
            return .table(element)
        }
        func list(_ status: SpecResult.Status) -> LuaValue {
            .table(LuaTable(array: results.filter { $0.status == status }.map(element)))
        }
        let report = LuaTable(fields: [
            "successes": list(.passed), "failures": list(.failed), "errors": list(.errored), "pendings": list(.pending),
            "duration": .number(results.reduce(0) { $0 + $1.seconds }),
        ])
        // (Every empty table of busted's report is a list: `"pendings": []`.)
        return (try? LuaJSON.encode(.table(report), root: "report", emptyTable: .array)) ?? "{}"
    }

    /// TAP as busted writes it: an `ok`/`not ok` line per test, a failure's place (`# file @ line`, the test's) and
    /// message (`# Failure message: file:line: …`, where it was raised) as diagnostics, a pending test as `# SKIP` with
    /// its reason (at the line of its `pending`) or its name, and the plan (`1..N`) last.
    var tap: String {
        (results.enumerated().flatMap { Self.tapLines($0.element, number: $0.offset + 1) } + ["1..\(results.count)"])
            .joined(separator: "\n")
    }

    /// The TAP lines of one result, the `number`th.
    static func tapLines(_ result: SpecResult, number: Int) -> [String] {
        switch result.status {
        case .passed:
            return ["ok \(number) - \(result.name)"]
        case .pending:
            return ["ok \(number) - # SKIP " + (result.message.map { placed($0, at: result.location) } ?? result.name)]
        case .failed, .errored:
            var lines = ["not ok \(number) - \(result.name)"]
            let test = result.testLocation ?? result.location
            if let colon = test.lastIndex(of: ":"), test[test.index(after: colon)...].allSatisfy(\.isNumber) {
                lines.append("# \(test[..<colon]) @ \(test[test.index(after: colon)...])")
            } else {
                lines.append("# \(test)")
            }
            let message = placed(result.message ?? "Nil error", at: result.location)
            lines.append("# Failure message: " + message.replacingOccurrences(of: "\n", with: "\n# "))
            return lines
        }
    }

    /// `message` with the place it was raised at first (`file:line: …`), as busted keeps a failure's message.
    static func placed(_ message: String, at location: String) -> String {
        guard let colon = location.lastIndex(of: ":"), location[location.index(after: colon)...].allSatisfy(\.isNumber),
              !message.hasPrefix(location + ":") else { return message }
        return "\(location): \(message)"
    }

    /// JUnit XML: one `testsuite` per spec file.
    var junit: String {
        func escape(_ text: String) -> String {
            var escaped = ""
            for scalar in text.unicodeScalars {
                switch scalar {
                case "&": escaped += "&amp;"
                case "<": escaped += "&lt;"
                case ">": escaped += "&gt;"
                case "\"": escaped += "&quot;"
                case "\n", "\t": escaped.unicodeScalars.append(scalar)
                case _ where scalar.value < 0x20: escaped += "&#\(scalar.value);"
                default: escaped.unicodeScalars.append(scalar)
                }
            }
            return escaped
        }
        func time(_ seconds: Double) -> String { String(format: "%.6f", seconds) }
        var lines = [#"<?xml version="1.0" encoding="UTF-8"?>"#,
                     #"<testsuites tests="\#(results.count)" failures="\#(failed)" errors="\#(errored)" skipped="\#(pending)">"#]
        var files: [String] = []
        for result in results where !files.contains(result.file) { files.append(result.file) }
        for file in files {
            let own = results.filter { $0.file == file }
            let suite = SpecReport(results: own)
            lines.append(#"  <testsuite name="\#(escape(file))" tests="\#(own.count)" failures="\#(suite.failed)" errors="\#(suite.errored)" skipped="\#(suite.pending)" time="\#(time(own.reduce(0) { $0 + $1.seconds }))">"#)
            for result in own {
                let open = #"    <testcase classname="\#(escape(file))" name="\#(escape(result.name))" time="\#(time(result.seconds))""#
                switch result.status {
                case .passed: lines.append(open + "/>")
                case .pending: lines.append(open + "><skipped/></testcase>")
                case .failed, .errored:
                    let message = result.message ?? ""
                    let headline = message.split(separator: "\n").first.map(String.init) ?? ""
                    let element = result.status == .failed ? "failure" : "error"
                    lines.append(open + ">")
                    lines.append(#"      <\#(element) message="\#(escape(headline))">\#(escape(result.location + ": " + message))</\#(element)>"#)
                    lines.append("    </testcase>")
                }
            }
            lines.append("  </testsuite>")
        }
        lines.append("</testsuites>")
        return lines.joined(separator: "\n")
    }
}
