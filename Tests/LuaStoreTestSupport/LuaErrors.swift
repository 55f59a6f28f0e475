import LuaKit
import Testing

/// The error `body` throws, which must be a `LuaError` (anything else is recorded as an issue).
public func luaError(_ body: () throws -> Void) -> LuaError? {
    do {
        try body()
        return nil
    } catch let error as LuaError {
        return error
    } catch {
        Issue.record("expected a LuaError, got \(error)")
        return nil
    }
}
