import Foundation
import LuaStoreTestSupport
import Testing

/// README and the pages of `docs/` stay true: every link between them (and to the repository's files) resolves,
/// and every shell session in them — a `sh` code block whose lines start with `$ ` — prints what it shows when run
/// from the package's root, with `swift run TOOL` standing for the built tool.
@Suite struct DocsTests {
    static var pages: [URL] {
        let docs = CLI.packageRoot.appendingPathComponent("docs")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: docs.path)) ?? []
        return [CLI.packageRoot.appendingPathComponent("README.md")]
            + names.filter { $0.hasSuffix(".md") }.sorted().map { docs.appendingPathComponent($0) }
    }

    @Test func thereAreDocs() {
        #expect(Self.pages.count >= 8)
        let readme = (try? String(contentsOf: Self.pages[0], encoding: .utf8)) ?? ""
        #expect(readme.split(separator: "\n", omittingEmptySubsequences: false).count <= 350, "README stays short: the rest is in docs/")
    }

    @Test(arguments: pages.map(\.lastPathComponent))
    func linksResolve(page: String) throws {
        let url = try #require(Self.pages.first { $0.lastPathComponent == page })
        let text = try String(contentsOf: url, encoding: .utf8)
        for match in text.matches(of: #/\]\(([^)\s]+)\)/#) {
            let target = String(match.output.1)
            if target.hasPrefix("http://") || target.hasPrefix("https://") || target.hasPrefix("#") { continue }
            let path = String(target.split(separator: "#", maxSplits: 1)[0])
            let resolved = url.deletingLastPathComponent().appendingPathComponent(path).standardizedFileURL
            #expect(FileManager.default.fileExists(atPath: resolved.path), "\(page): \(target) does not exist")
        }
    }

    /// The shell sessions of a page: each command and the lines it should print.
    static func sessions(in text: String) -> [(command: String, expected: [String])] {
        var sessions: [(command: String, expected: [String])] = []
        var inShell = false
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if line.hasPrefix("```") {
                inShell = !inShell && line == "```sh"
                continue
            }
            guard inShell else { continue }
            if line.hasPrefix("$ ") {
                sessions.append((String(line.dropFirst(2)), []))
            } else if !sessions.isEmpty {
                sessions[sessions.count - 1].expected.append(line)
            }
        }
        return sessions
    }

    @Test(arguments: pages.map(\.lastPathComponent))
    func shellSessionsRunAsShown(page: String) async throws {
        let url = try #require(Self.pages.first { $0.lastPathComponent == page })
        let sessions = Self.sessions(in: try String(contentsOf: url, encoding: .utf8))
        for (command, expected) in sessions {
            // (A generous default time budget: a loaded machine pauses the binaries for longer than 200 ms; a session
            // that shows a budget gives its own, which wins.)
            let script = "export PATH=\(CLI.buildFolder.path):$PATH LUASTORE_TIME_BUDGET_MS=30000\n"
                + command.replacingOccurrences(of: "swift run ", with: "")
            let run = try await runChildProcess(URL(fileURLWithPath: "/bin/bash"), ["-c", script + " 2>&1"],
                                                directory: CLI.packageRoot)
            let printed = run.output.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            #expect(printed.filter { !$0.isEmpty } == expected.filter { !$0.isEmpty }, "\(page): $ \(command)")
        }
    }
}
