import Foundation
import Glibc
import LuaKit
@testable import LuaStoreDevtools
import LuaStoreConcurrency
import LuaStorePersistence
import LuaStoreScripting
import LuaStoreTestSupport
import RawHTTPClient
import Testing

/// The devtools server under load and at its edges: a busy store, a page that falls behind, the command's
/// address and its refusals, ambiguous framing, binds beyond this machine.
extension DevtoolsTests {
    /// While the store's thread works through a long action, the server keeps answering: the session with what
    /// was last heard, marked busy; reads of the store "busy" (503) rather than a request left hanging.
    @Test func theServerAnswersWhileTheStoreIsBusy() async throws {
        let folder = try CLI.makeApp("""
            local app = {}
            function app.init() return { count = 0 } end
            function app.reduce(state, action)
              if action.type == "spin" then local n = 0 for i = 1, 300000000 do n = n + 1 end state.count = n end
            end
            function app.props(state) return { count = state.count } end
            return app
            """)
        defer { try? FileManager.default.removeItem(at: folder) }
        let session = try await Self.start(folder: folder, storeWait: .milliseconds(100), timeBudget: .seconds(600))
        // (An idle store answers within the wait; on a loaded machine, perhaps not at the first try.)
        func answersPromptly() async -> Bool {
            await eventually(timeout: .seconds(60)) {
                (try? Self.json(try await session.get("/api/session"))["busy"] as? Bool) == false
            }
        }
        #expect(await answersPromptly())
        session.store.dispatch(["type": "spin"])
        let answered = try Self.json(try await session.get("/api/session"))
        #expect(answered["busy"] as? Bool == true, "\(answered)")
        let state = try await session.get("/api/state?path=[]")
        #expect(state.status == 503)
        #expect(state.body.contains("the store is busy reducing actions"))
        await session.store.barrier()
        #expect(await answersPromptly())
        #expect(await eventually(timeout: .seconds(60)) { (try? await session.get("/api/state?path=[]").status) == 200 })
        await session.stop()
    }

    /// The kept history is bounded in bytes as well as in entries: entries that carry much (a large action, a
    /// save of a whole list) push the oldest out long before the entry count is reached; the newest always stays.
    @Test func theKeptHistoryIsBoundedInBytes() async throws {
        let journal = DevtoolsJournal(capacity: 10_000, bytes: 1 << 20)
        let big = String(repeating: "x", count: 100_000)
        for sequence in 1...100 {
            journal.hear(JournalEntry(sequence: UInt64(sequence), event: .action(["type": "save", "list": .string(big)]), origin: .outside,
                                      changes: [], failure: nil, scripts: "0"))
        }
        let bounds = journal.bounds
        #expect(bounds.last == 100)
        #expect((9...10).contains(bounds.count), "\(bounds)")
        #expect(bounds.first == 100 - UInt64(bounds.count) + 1)
        let huge = String(repeating: "y", count: 3 << 20)
        journal.hear(JournalEntry(sequence: 101, event: .action(["type": "save", "list": .string(huge)]), origin: .outside,
                                  changes: [], failure: nil, scripts: "0"))
        #expect(journal.bounds.count == 1 && journal.bounds.first == 101)
        for sequence in 102...200 {
            journal.hear(JournalEntry(sequence: UInt64(sequence), event: .action(["type": "add"]), origin: .outside, changes: [],
                                      failure: nil, scripts: "0"))
        }
        #expect(journal.bounds.count == 99 && journal.bounds.first == 102)
    }

    @Test func aPageThatFallsBehindIsDroppedAndToldWhy() async throws {
        let journal = DevtoolsJournal(capacity: 100, interval: .milliseconds(1))
        let clients = LiveClients(journal: journal, queue: 3)
        let (stream, _) = clients.open() // (never read until the end: a stalled page)
        for sequence in 1...40 {
            journal.hear(JournalEntry(sequence: UInt64(sequence), event: .action(["type": "add"]), origin: .outside, changes: [],
                                      failure: nil, scripts: "0"))
            clients.send()
        }
        let read = await withinDeadline {
            var messages: [String] = []
            for await message in stream {
                if case .text(let text) = message { messages.append(text) }
            }
            return messages
        }
        let messages = try #require(read, "the stalled page's stream ends")
        #expect(messages.count <= 4)
        #expect(messages.last?.contains(#""type":"dropped""#) == true)
        #expect(messages.last?.contains("fell more than 3 messages behind") == true)
    }

    /// A page that closes while the store's messages are handed to the pages never stalls either side. (Closing
    /// cancels the task reading the page's stream; the runtime then holds that task's lock while the stream's
    /// termination handler takes the clients' lock — so the pages' messages must never be handed over under it.
    /// Found beside busy loops: a hung `luastore-bench --quick`, one thread in `send` under the clients' lock
    /// waiting on a task's lock, another cancelling that task, waiting on the clients' lock.) Both sides run on
    /// threads of their own for a second and a half and at least 20 pages, so a deadlock fails the test instead of the
    /// whole run.
    @Test func pagesClosingWhileMessagesArriveNeverStall() async throws {
        let journal = DevtoolsJournal(capacity: 1_000, interval: .milliseconds(1))
        let clients = LiveClients(journal: journal, queue: 1_000)
        let finished = Protected(0), opened = Protected(0), openerDone = Protected(false)
        let until = ContinuousClock.now + .milliseconds(1_500)
        Thread {
            var sequence: UInt64 = 0
            while !openerDone.withLock({ $0 }) { // (as long as pages open and close)
                sequence += 1
                journal.hear(JournalEntry(sequence: sequence, event: .action(["type": "add"]), origin: .outside, changes: [],
                                          failure: nil, scripts: "0"))
                clients.send()
            }
            finished.withLock { $0 += 1 }
        }.start()
        Thread {
            // (At least 20 pages, however slowly a loaded machine runs them.)
            while ContinuousClock.now < until || opened.withLock({ $0 }) < 20 {
                let (stream, _) = clients.open()
                let reader = Task { for await _ in stream {} }
                if opened.withLock({ $0 += 1; return $0 }) % 2 == 0 { Thread.sleep(forTimeInterval: 0.000_1) }
                reader.cancel()
            }
            openerDone.withLock { $0 = true }
            finished.withLock { $0 += 1 }
        }.start()
        let both = await eventually(timeout: .seconds(60)) { finished.withLock { $0 } == 2 }
        #expect(both, "a page closing while messages arrive stalled the server (\(opened.withLock { $0 }) pages opened)")
        #expect(opened.withLock { $0 } >= 20)
    }

    /// `luastore run --devtools 0`, the built binary: one line on standard error gives the page's address; the run
    /// goes on serving after its actions, and an interrupt ends it as the end of input would (the state and the
    /// recording written, the exit status as usual).
    @Test func theCommandPrintsTheAddressServesUntilInterruptedAndFinishes() async throws {
        let folder = try CLI.makeApp(Self.app)
        defer { try? FileManager.default.removeItem(at: folder) }
        let actions = folder.appendingPathComponent("actions.jsonl")
        try Data(String(repeating: "{\"type\":\"add\"}\n", count: 3).utf8).write(to: actions)
        let stateFile = folder.appendingPathComponent("state.json"), recording = folder.appendingPathComponent("session.jsonl")
        let (process, errors) = try await Self.startServing(["run", folder.path, "--actions", actions.path, "--format", "json", "--devtools", "0",
                                                              "--state-out", stateFile.path, "--record", recording.path])
        defer { if process.isRunning { process.interrupt() } }
        let line = try #require(errors.split(separator: "\n").first { $0.hasPrefix("devtools: ") }, "no devtools line: \(errors)")
        let address = String(line.dropFirst("devtools: ".count))
        let match = try #require(address.wholeMatch(of: /http:\/\/127\.0\.0\.1:(\d+)\/\?token=([0-9a-f]{32})/))
        let port = try #require(UInt16(match.1)), token = String(match.2)
        // (The actions come from a file as the server starts: the session has all three once they are heard.)
        let heardAll = await eventually(timeout: .seconds(30)) {
            let session = try? await offPool { try RawHTTP.request("GET", "/api/session", port: port, token: token) }
            return session?.status == 200 && session?.body.contains(#""count":3"#) == true
        }
        #expect(heardAll, "the session never had the three entries")
        let page = try await offPool { try RawHTTP.request("GET", "/?token=\(token)", port: port, token: "") }
        #expect(page.status == 200)
        #expect(process.isRunning, "it serves after its actions")

        process.interrupt()
        let ended = await eventually(timeout: .seconds(30)) { !process.isRunning }
        #expect(ended)
        #expect(process.terminationStatus == 0)
        let state = try String(contentsOf: stateFile, encoding: .utf8)
        #expect(state.contains(#""count":3"#))
        #expect(try String(contentsOf: recording, encoding: .utf8).split(separator: "\n").count == 4)
    }

    /// A host name is resolved (`localhost` listens on 127.0.0.1, and answers to both names); an address that
    /// does not resolve, or is not this machine's, fails at once and in words; every address says whether other
    /// machines may reach it.
    @Test func theAddressIsResolvedAndBadOnesFailInWords() async throws {
        let local = try await Self.start(host: "localhost")
        #expect(local.server.address == "127.0.0.1")
        #expect(local.server.isLoopback)
        for host in ["localhost", "127.0.0.1"] {
            let response = try await local.get("/api/session", headers: ["Host": "\(host):\(local.server.port)"])
            #expect(response.status == 200, "Host \(host)")
        }
        #expect(try await local.get("/api/session", headers: ["Host": "example.com:\(local.server.port)"]).status == 403)
        await local.stop()

        let everywhere = try await Self.start(host: "0.0.0.0")
        #expect(!everywhere.server.isLoopback)
        await everywhere.stop()

        for (host, said) in [("nosuch.invalid", "cannot listen on 'nosuch.invalid': the name does not resolve to an address"),
                             ("192.0.2.1", "cannot listen on 192.0.2.1:0: cannot assign requested address")] {
            do {
                _ = try await Self.start(host: host)
                Issue.record("\(host) was accepted")
            } catch {
                #expect("\(error)".hasPrefix(said), "\(error)")
            }
        }
    }

    /// Requests whose framing is ambiguous are answered at once and the connection ends (before, two
    /// conflicting Content-Length headers left the connection hanging until the server's read timed out): a second
    /// length that differs, in a second header or in a list; a Transfer-Encoding; a folded header line; a header
    /// block over 64 KiB. A sound request before one of them on the same connection is served; identical
    /// repeated lengths are not a conflict.
    /// Writes `request` on a new connection to `port` and reads until the server ends it (a read waits at most 15 s).
    static func exchange(_ request: String, port: UInt16) async throws -> String {
        try await offPool {
            let socket = try RawSocket(port: port)
            defer { socket.close() }
            try socket.write(request)
            var answer: [UInt8] = []
            while let bytes = try? socket.readSome() { answer += bytes }
            return String(decoding: answer, as: UTF8.self)
        }
    }

    @Test func requestsWithAmbiguousFramingAreRefusedAtOnce() async throws {
        let session = try await Self.start()
        defer { Task { await session.stop() } }
        let (port, token) = (session.server.port, session.token)
        func exchange(_ request: String) async throws -> String { try await Self.exchange(request, port: port) }
        let head = "Host: 127.0.0.1:\(port)\r\nX-Devtools-Token: \(token)\r\n"
        let body = String(repeating: "x", count: 20)
        for (request, status, said) in [
            ("POST /api/dispatch HTTP/1.1\r\n\(head)Content-Length: 20\r\nContent-Length: 40\r\n\r\n\(body)", 400,
             "the request has conflicting Content-Length headers (20, 40): a request says its length once"),
            ("POST /api/dispatch HTTP/1.1\r\n\(head)Content-Length: 20, 40\r\n\r\n\(body)", 400,
             "the request has conflicting Content-Length headers (20, 40)"),
            ("POST /api/dispatch HTTP/1.1\r\n\(head)Transfer-Encoding: chunked\r\n\r\n14\r\n\(body)\r\n0\r\n\r\n", 400,
             "a request with a Transfer-Encoding is not accepted: send its body with a Content-Length"),
            ("GET /api/session HTTP/1.1\r\n\(head)X-Note: one\r\n  two\r\n\r\n", 400, "a header line is folded onto the next"),
            ("POST /api/dispatch HTTP/1.1\r\n\(head)Content-Length: twenty\r\n\r\n\(body)", 400, "the request's Content-Length is not a number: twenty"),
            ("GET /api/session HTTP/1.1\r\n\(head)X-Big: \(String(repeating: "y", count: 70_000))\r\n\r\n", 431,
             "the request's header block is over 64 KiB"),
        ] {
            let answer = try await exchange(request)
            #expect(answer.hasPrefix("HTTP/1.1 \(status) "), "\(answer.prefix(200))")
            #expect(answer.contains(said), "\(answer.prefix(400))")
        }
        let both = try await exchange("GET /api/session HTTP/1.1\r\n\(head)\r\n"
            + "POST /api/dispatch HTTP/1.1\r\n\(head)Content-Length: 20\r\nContent-Length: 40\r\n\r\n\(body)")
        #expect(both.hasPrefix("HTTP/1.1 200 "), "\(both.prefix(200))")
        #expect(both.contains("\"app\":\"demo\""))
        #expect(both.contains("HTTP/1.1 400 Bad Request"), "\(both.suffix(300))")
        let same = try await exchange("GET /api/session HTTP/1.1\r\n\(head)Content-Length: 0\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        #expect(same.hasPrefix("HTTP/1.1 200 "), "\(same.prefix(200))")
    }

    /// Strangers — connections that never show the token — cannot keep the owner out: with every place held by
    /// idle ones, a request with the token is answered (the stranger that came first makes room), and a silent
    /// stranger is closed after its deadline (5 s) rather than the server's 60 s.
    @Test func idleStrangersCannotKeepTheOwnerOut() async throws {
        let session = try await Self.start(connectionLimit: 8)
        defer { Task { await session.stop() } }
        let (port, token) = (session.server.port, session.token)
        let strangers = try await offPool { try (0..<20).map { _ in try RawSocket(port: port) } }
        defer { for stranger in strangers { stranger.close() } }
        func exchange(_ request: String) async throws -> String { try await Self.exchange(request, port: port) }
        for _ in 0..<3 {
            let answer = try await exchange("GET /api/session HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nX-Devtools-Token: \(token)\r\nConnection: close\r\n\r\n")
            #expect(answer.hasPrefix("HTTP/1.1 200 "), "\(answer.prefix(200))")
            #expect(answer.contains("\"app\":\"demo\""))
        }
        let closed = try await offPool { () -> (String, Duration) in
            let silent = try RawSocket(port: port)
            defer { silent.close() }
            let started = ContinuousClock.now
            var answer: [UInt8] = []
            while let bytes = try? silent.readSome() { answer += bytes } // (a read waits at most 15 s)
            return (String(decoding: answer, as: UTF8.self), ContinuousClock.now - started)
        }
        #expect(closed.1 < .seconds(14), "a silent stranger is closed at its deadline: \(closed.1)")
        let wrong = try await exchange("GET /api/session?token=nope HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n\r\n")
        #expect(wrong.hasPrefix("HTTP/1.1 401 "), "\(wrong.prefix(200))")
    }

    /// Stopping the front door acts on its own sockets only, once: a second `stop` shuts nothing down (its listener's
    /// number, closed by then, may be another socket of the process — another test's connection — by the time it
    /// runs), and neither does a stop after the listener closed.
    @Test func aSecondStopShutsNothingDown() async throws {
        let front = try FramingGuard(address: ListeningAddress(host: "127.0.0.1", port: 0), backend: "/nonexistent", token: "t")
        #expect(front.stop() == 1, "the listener")
        try await Task.sleep(for: .milliseconds(50)) // (the accepting thread closes it meanwhile)
        #expect(front.stop() == 0)
        #expect(front.stop() == 0)
    }

    /// The token is found where the API looks for it, and nowhere else.
    @Test func theFrontDoorFindsTheTokenWhereTheAPILooks() {
        let token = Array("abc123".utf8)
        for (head, carries) in [
            ("GET /?token=abc123 HTTP/1.1\r\nHost: x\r\n\r\n", true),
            ("GET /api/entries?limit=5&token=abc123 HTTP/1.1\r\n\r\n", true),
            ("GET /api HTTP/1.1\r\nX-Devtools-Token: abc123\r\n\r\n", true),
            ("GET /api HTTP/1.1\r\nx-devtools-token:abc123 \r\n\r\n", true),
            ("GET /api?token=abc12 HTTP/1.1\r\n\r\n", false),
            ("GET /api?xtoken=abc123 HTTP/1.1\r\n\r\n", false),
            ("GET /api HTTP/1.1\r\nX-Other: abc123\r\n\r\n", false),
            ("GET /abc123 HTTP/1.1\r\n\r\n", false),
        ] {
            #expect(FramingGuard.carries(token, in: Array(head.utf8)) == carries, "\(head)")
        }
    }

    /// Listening where other machines may reach the page is said as a warning.
    @Test func aBindBeyondThisMachineIsWarnedAbout() async throws {
        let folder = try CLI.makeApp(Self.app)
        defer { try? FileManager.default.removeItem(at: folder) }
        let (process, text) = try await Self.startServing(["run", folder.path, "--actions", "-", "--format", "json", "--devtools", "0",
                                                           "--devtools-host", "0.0.0.0"])
        defer { if process.isRunning { process.interrupt() } }
        #expect(text.contains("warning: the devtools listen on 0.0.0.0, which other machines may reach"), "\(text)")
        process.interrupt()
        #expect(await eventually(timeout: .seconds(30)) { !process.isRunning })
    }
}
