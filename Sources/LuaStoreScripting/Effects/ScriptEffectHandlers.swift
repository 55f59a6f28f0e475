import Foundation
import LuaKit
import LuaStoreCore

/// Performs the effects scripts ask for: `http` through a `URLEffectRunner`, `delay`, `timer`, `log`.
enum ScriptEffectHandlers {
    /// Handlers that perform nothing (for replays, where effect results come from the recording).
    static var inert: EffectInterpreter<ScriptEffect, Void, LuaValue> {
        ScriptEffect.kinds.reduce(EffectInterpreter()) { interpreter, kind in
            interpreter.handling(EffectKind(kind)) { _, _ in }
        }
    }

    /// `redirect`: why an `http` effect may not follow a redirect to a URL (nil: it may) — the app's declared
    /// capabilities, which the first request is checked against too.
    static func interpreter(runner: URLEffectRunner, storage: URL?, protecting inputs: [FileIdentity: String] = [:],
                            redirect: @escaping @Sendable (ScriptEffect, URL) -> String? = { _, _ in nil },
                            log: @escaping @Sendable (String) -> Void)
        -> EffectInterpreter<ScriptEffect, Void, LuaValue> {
        EffectInterpreter<ScriptEffect, Void, LuaValue>()
            .handling("http") { effect, context in
                let request = effect.payload
                let result = await runner.perform(urlRequest(request), redirect: { redirect(effect, $0) })
                context.dispatch(resultAction(for: request, result))
            }
            .handlingDelay("delay", delay: { effect in
                effect.payload["seconds"].number.map { Duration.seconds($0) }
            }, action: { effect in effect.payload["action"] })
            .handlingTimer("timer", interval: { effect in
                effect.payload["every"].number.map { Duration.seconds($0) }
            }, action: { effect in effect.payload["action"] })
            .handling("log") { effect, _ in
                log(effect.payload["message"].string ?? "")
            }
            .handling("save") { effect, _ in
                let key = effect.payload["key"].string ?? ""
                let value = effect.payload["value"]
                try StorageFailure.words(.save, key) {
                    let file = try storageFile(storage, key: key, creatingFolder: value != .nil)
                    if let identity = FileIdentity(path: file.path), let input = inputs[identity] {
                        throw StorageFailure.Reason("\(file.path) is the same file as \(input), an input of this run; nothing was written")
                    }
                    if value == .nil {
                        if unlink(file.path) != 0 && errno != ENOENT { throw StorageFailure.System(code: errno, path: file.path) }
                    } else {
                        // (LuaKit's one plain-JSON writer: a float is written as a float, `2.0`, so `load` gives
                        // back the very value saved.)
                        let text: String
                        do {
                            text = try LuaJSON.encode(value, root: "value")
                        } catch {
                            throw StorageFailure.Reason("\(error) (nothing was written)")
                        }
                        do {
                            try OutputFile.write(Array(text.utf8), to: file.path)
                        } catch let failure as OutputFailure {
                            throw StorageFailure.Reason(failure.description)
                        }
                    }
                }
            }
            .handling("load") { effect, context in
                let key = effect.payload["key"].string ?? ""
                let value = try StorageFailure.words(.load, key) { () throws -> LuaValue in
                    let file = try storageFile(storage, key: key, creatingFolder: false)
                    guard FileManager.default.fileExists(atPath: file.path) else { return .nil }
                    if let problem = FileIdentity.notARegularFile(file.path) { throw StorageFailure.Reason("\(file.path) \(problem)") }
                    guard let data = FileManager.default.contents(atPath: file.path) else {
                        throw StorageFailure.System(code: access(file.path, R_OK) == 0 ? EIO : errno, path: file.path)
                    }
                    do {
                        return try data.withUnsafeBytes { bytes throws(LuaJSON.Malformed) in try LuaJSON.parse(bytes) }
                    } catch {
                        throw StorageFailure.Reason("\(file.path) is \(error)")
                    }
                }
                context.dispatch(["type": effect.payload["success"], "key": .string(key), "value": value])
            }
            .inTurn(["save", "load"]) // (in the order asked: a load reads what every save before it wrote, saves of a key land in order)
    }

    /// The file a storage key lives in. The storage folder is made when a save needs it, if the folder it is in
    /// exists (the CLI's default, `APP_DIR/.data`); a folder further away that does not exist is a mistake.
    static func storageFile(_ folder: URL?, key: String, creatingFolder: Bool) throws -> URL {
        guard let folder else { throw StorageUnavailable() }
        let path = folder.path
        var isFolder: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) {
            guard isFolder.boolValue else { throw StorageFailure.Reason("the data folder \(path) is a file, not a folder") }
        } else if creatingFolder {
            guard mkdir(path, 0o755) == 0 || errno == EEXIST else {
                if errno == ENOENT { throw StorageFailure.Reason("the data folder \(path) does not exist, nor the folder it would be in") }
                throw StorageFailure.System(code: errno, path: path)
            }
        }
        let file = folder.appendingPathComponent(key + ".json")
        // (A key's file is the store's own: a link there — shipped with an app, say — would read or replace a file
        // anywhere else.)
        var status = stat()
        if lstat(file.path, &status) == 0, status.st_mode & S_IFMT == S_IFLNK {
            throw StorageFailure.Reason("\(file.path) is a symbolic link: a store saves and loads only files of its own (nothing was read or written)")
        }
        return file
    }

    static func urlRequest(_ request: LuaValue) -> URLRequestEffect {
        var headers: [String: String] = [:]
        for (key, value) in request["headers"].table?.fields ?? [:] {
            if case .string(let name) = key, let text = value.string { headers[name] = text }
        }
        return URLRequestEffect(
            method: request["method"].string ?? "GET",
            url: request["url"].string ?? "",
            headers: headers,
            body: request["body"].string.map { Data($0.utf8) },
            timeout: request["timeout"].number.map { Duration.seconds($0) })
    }

    /// The action reporting a request's outcome: `{type = success, id, status, headers, body, json}` or
    /// `{type = failure, id, reason, message, status, body}`.
    static func resultAction(for request: LuaValue, _ result: Result<URLResponseValue, URLFailure>) -> LuaValue {
        var action = LuaTable()
        action["id"] = request["id"]
        switch result {
        case .success(let response):
            action["type"] = request["success"]
            fill(&action, with: response)
        case .failure(let failure):
            action["type"] = request["failure"]
            action["reason"] = .string(failure.reason.rawValue)
            action["message"] = .string(failure.message)
            if let response = failure.response { fill(&action, with: response) }
        }
        return .table(action)
    }

    private static func fill(_ action: inout LuaTable, with response: URLResponseValue) {
        action["status"] = .integer(Int64(response.status))
        var headers = LuaTable()
        for (name, value) in response.headers { headers[name] = .string(value) }
        action["headers"] = .table(headers)
        if let text = response.text { action["body"] = .string(text) }
        // (A JSON body read as every JSON the store reads: names kept by their bytes — two spellings of "é" are two
        // keys, as in Lua —, integers as integers, an object naming a member twice no JSON; then `json` is absent.)
        // A stand-in's response (a test's, with no body) gives its `json` as it is.
        guard let given = response.json else { return }
        if response.body.isEmpty {
            action["json"] = LuaValue(json: given)
        } else if let json = try? response.body.withUnsafeBytes({ bytes throws(LuaJSON.Malformed) in try LuaJSON.parse(bytes) }) {
            action["json"] = json
        }
    }
}

extension LuaValue {
    /// JSON as Lua data: `null` becomes `nil` (absent from tables; a hole in arrays), arrays become sequences.
    public init(json: JSONValue) {
        switch json {
        case .null: self = .nil
        case .bool(let flag): self = .boolean(flag)
        case .integer(let integer): self = .integer(integer)
        case .number(let number): self = .number(number)
        case .string(let text): self = .string(text)
        case .array(let items):
            self = .table(items.enumerated().reduce(into: LuaTable()) { table, item in
                table[.integer(Int64(item.offset + 1))] = LuaValue(json: item.element)
            })
        case .object(let fields):
            self = .table(fields.reduce(into: LuaTable()) { table, field in table[.string(field.key)] = LuaValue(json: field.value) })
        }
    }
}

/// A save or load that failed, in words: `save "todos" failed: the data folder /x is a file, not a folder`.
struct StorageFailure: Error, CustomStringConvertible {
    enum Operation: String { case save, load }

    let operation: Operation
    let key: String
    let reason: String
    var description: String { "\(operation.rawValue) \"\(key)\" failed: \(reason)" }

    /// What went wrong, already in words.
    struct Reason: Error {
        let text: String
        init(_ text: String) { self.text = text }
    }

    /// A system call's error on `path`.
    struct System: Error {
        let code: Int32
        let path: String
    }

    /// Runs `body`; whatever it throws becomes a `StorageFailure` of `operation` on `key`, in words.
    static func words<T>(_ operation: Operation, _ key: String, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let failure as Reason {
            throw StorageFailure(operation: operation, key: key, reason: failure.text)
        } catch let failure as System {
            throw StorageFailure(operation: operation, key: key, reason: "\(failure.path): \(OutputFailure.words(failure.code))")
        } catch let error as StorageUnavailable {
            throw error
        } catch {
            throw StorageFailure(operation: operation, key: key, reason: Self.words(for: error))
        }
    }

    /// A Foundation file error in words (`OutputFailure.words(for:)`).
    static func words(for error: any Error) -> String {
        OutputFailure.words(for: error)
    }
}

/// A save or load effect ran in a store without a storage folder.
struct StorageUnavailable: Error, CustomStringConvertible {
    var description: String { "save and load effects need a storage folder (ScriptedStoreOptions.storageFolder)" }
}
