import Foundation
import LuaStoreTestSupport
import Testing

/// `samples/swift-host`, the sample Swift host: its observable model renders every distinct props, and each
/// `await send` says what its action did — run as a user runs it, from the package's root.
@Suite struct SwiftHostSampleTests {
    @Test func theSampleHostRendersAndSends() async throws {
        let host = CLI.buildFolder.appendingPathComponent("swift-host")
        let run = try await runChildProcess(host, [], directory: CLI.packageRoot)
        #expect(run.status == 0, "\(run.errors)")
        #expect(run.output == """
            view: 0 clicks
            sent {type = "increment"}: state.count = 1
            view: 1 click
            sent {by = 4, type = "increment"}: state.count = 5
            view: 5 clicks
            sent {type = "reset"}: state.count = 0
            view: 0 clicks
            sent {by = "two", type = "decrement"}: failed: app.lua:12: attempt to sub a 'number' with a 'string'

            """)
        #expect(run.errors.isEmpty, "\(run.errors)")
    }
}
