import FlyingFox
import Foundation
import LuaKit
import LuaStoreConcurrency
import LuaStoreScripting

/// The routes that change the store (answered only while the page is unlocked): dispatch and time travel.
extension DevtoolsAPI {
    // MARK: Changing (unlocked only)

    func change(_ route: String, _ request: HTTPRequest) async throws -> HTTPResponse {
        switch route {
        case "POST /api/dispatch":
            // (An imported recording is browsed, never changed by an action: one dispatched there would reach no app,
            // and push the recording's first entry out of its history.)
            if let imported = browsing.withLock({ $0?.imported }) {
                throw Refusal(409, "the page browses the imported recording \(imported.name.debugDescription): go Back to dispatch to the running app")
            }
            let body = try await Self.body(of: request, limit: options.bodyLimit)
            let action: LuaValue
            do {
                action = try LuaJSON.parse(String(decoding: body, as: UTF8.self))
            } catch {
                throw Refusal(400, "the action is \(error)")
            }
            guard action["type"].string != nil else { throw Refusal(400, "an action must be a JSON object with a string \"type\"") }
            store.dispatch(action)
            await store.barrier()
        case "POST /api/jump":
            try await store.jump(to: try sequence(request))
        case "POST /api/rewind":
            if let file = options.recordedTo {
                throw Refusal(409, "the session is being recorded to \(file) (--record), which cannot drop the entries a rewind "
                                   + "undoes: its replay would diverge. Jump here and Resume instead, or run without --record to rewind")
            }
            let target = try sequence(request)
            let last = await store.journalPosition().sequence
            try await store.rewind(to: target)
            journal.rewound(through: last)
        default:
            await store.resume()
        }
        await live.broadcastStatus(of: self)
        if await store.travelStatus().traveling { watchHeld() }
        return await session()
    }

    /// While the store shows a past point, actions that arrive are held, which the journal does not hear of:
    /// pages are told of the count as it grows (looked at every 100 ms, only while traveling).
    func watchHeld() {
        guard watchingHeld.withLock({ watching in defer { watching = true }; return !watching }) else { return }
        Task { [weak self] in
            var told = 0
            while let self {
                let status = await self.store.travelStatus()
                guard status.traveling else { break }
                if status.held != told {
                    told = status.held
                    await self.live.broadcastStatus(of: self)
                }
                try? await Task.sleep(for: .milliseconds(100))
            }
            self?.watchingHeld.withLock { $0 = false }
        }
    }

    /// The request's body, refused past `limit` bytes (by its declared length, or as it arrives).
    static func body(of request: HTTPRequest, limit: Int) async throws -> [UInt8] {
        if let length = request.headers[.contentLength].flatMap(Int.init), length > limit {
            // The body is read (and dropped) first, up to 16 MiB: the answer then follows a request the
            // connection has wholly carried, whatever the server does with a body no one read.
            if length <= 16 << 20 { for try await _ in request.bodySequence {} }
            throw Refusal(413, "the body is \(length) bytes; at most \(limit) are accepted")
        }
        var bytes: [UInt8] = []
        for try await chunk in request.bodySequence {
            bytes.append(contentsOf: chunk)
            if bytes.count > limit { throw Refusal(413, "the body is over \(limit) bytes, the most accepted") }
        }
        return bytes
    }

    /// What a status message says (live).
    func statusJSON() async -> String {
        let travel = await store.travelStatus()
        let history = await store.history()
        var json = JSONWriter()
        json.object { json in
            json.field("type", "status")
            json.field("traveling", travel.traveling)
            json.field("held", travel.held)
            json.field("at", history.at ?? 0)
            json.field("unlocked", unlocked.withLock { $0 })
        }
        return json.text
    }
}
