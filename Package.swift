// swift-tools-version:6.2
import PackageDescription

/// LuaStore: app logic in sandboxed Lua 5.4, side effects in Swift.
///
/// Layers, data flowing one way:
/// `CLua` (Lua's C headers and shims), `CLuaGuard` (the C that runs where Lua may raise) → `LuaKit` (the safe, bounded VM; the only importer of `CLua`) ·
/// `LuaStoreCore` (the pure-Swift store: effects, subscription diffing, URL effects, deduplicating observers) →
/// `LuaStoreScripting` (Lua reducers and props on the store; state kept in the VM; hot reload), with `CLuaState` (its
/// state engine's C: the write barrier, the recording's JSON), which it alone depends on.
/// The server — `luastore serve`, many nodes on PostgreSQL — is a package of its own, `serve/`, on this one by path: its
/// dependencies (Hummingbird, SwiftNIO, postgres-nio) are never part of a build of the core or of its sanitizer runs.
let strict: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .treatAllWarnings(as: .error),
]

let package = Package(
    name: "LuaStore",
    products: [
        .library(name: "LuaKit", targets: ["LuaKit"]),
        .library(name: "LuaStoreCore", targets: ["LuaStoreCore"]),
        .library(name: "LuaStoreScripting", targets: ["LuaStoreScripting"]),
        .library(name: "LuaStoreContract", targets: ["LuaStoreContract"]),
        .library(name: "LuaStoreDevtools", targets: ["LuaStoreDevtools"]),
        .library(name: "LuaStoreTesting", targets: ["LuaStoreTesting"]),
        .library(name: "LuaStorePersistence", targets: ["LuaStorePersistence"]),
        .library(name: "LuaStoreBundles", targets: ["LuaStoreBundles"]),
        .library(name: "LuaStoreConcurrency", targets: ["LuaStoreConcurrency"]),
        .library(name: "LuaStoreCommandLine", targets: ["LuaStoreCommandLine"]),
        // The repository's own test helpers, for the tests of the `serve/` package (not API).
        .library(name: "LuaStoreTestSupport", targets: ["LuaStoreTestSupport"]),
        .library(name: "RawHTTPClient", targets: ["RawHTTPClient"]),
        // A PostgreSQL server in a temporary folder, for the `serve/` package's tests and the cluster's benchmarks (not API).
        .library(name: "LocalPostgres", targets: ["LocalPostgres"]),
        // Swift types that follow an app's Lua contract on every build (docs/contracts.md).
        .plugin(name: "LuaStoreSwiftTypes", targets: ["LuaStoreSwiftTypes"]),
        .executable(name: "luakit", targets: ["luakit"]),
        .executable(name: "luastore", targets: ["luastore"]),
        .executable(name: "luastore-demo-api", targets: ["luastore-demo-api"]),
        // (For the `serve/` package's test of the bench's serve rows.)
        .executable(name: "luastore-bench", targets: ["luastore-bench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swhitty/FlyingFox", from: "0.27.1"),
        // Tests only: runs the built binaries (Foundation's `Process` waits for every descendant that inherits
        // its exit-watching socket, so a program that starts a daemon, such as tmux, never "exits").
        .package(url: "https://github.com/swiftlang/swift-subprocess", from: "1.0.2"),
        .package(url: "https://github.com/apple/swift-system", from: "1.8.1"),
        // Durable stores: the state's log and snapshots in one SQLite file (LuaStorePersistence).
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        // Plugin bundles (LuaStoreBundles): Ed25519 signatures and SHA-256 digests, and the zip they come in.
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        .package(url: "https://github.com/weichsel/ZIPFoundation", from: "0.9.20"),
        // The reference: `swift package generate-documentation` (scripts/docs), a DocC catalog per library product.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // Debian's Lua 5.4, linked statically (`liblua5.4.a`, named in `Sources/CLua/module.modulemap`; headers from
        // `/usr/include/lua5.4`), as Debian's own `lua5.4` is: calls into Lua are then direct. Through the shared
        // library every Lua API call went through its PLT, which cost ≈ 13 % of a dispatch (README, Benchmarks).
        .systemLibrary(
            name: "CLua",
            providers: [.apt(["liblua5.4-dev"])]
        ),
        // What must run in C where Lua may raise, and the watchdog that enforces time budgets.
        .target(name: "CLuaGuard", dependencies: ["CLua"]),
        // The scripted store's state engine in C (the write barrier, the recording's JSON); LuaStoreScripting only.
        .target(name: "CLuaState", dependencies: ["CLua", "CLuaGuard"]),
        // `Protected`, the one lock wrapper, below both LuaKit and LuaStoreCore (as swift-nio keeps its locks in
        // NIOConcurrencyHelpers).
        .target(name: "LuaStoreConcurrency", swiftSettings: strict),
        .target(
            name: "LuaKit", dependencies: ["CLua", "CLuaGuard", "LuaStoreConcurrency"], swiftSettings: strict, plugins: ["EmbedLua"]
        ),
        // The folder is not `Sources/luakit`: a case-insensitive file system would merge it with `Sources/LuaKit`.
        .executableTarget(name: "luakit", dependencies: ["LuaKit"], path: "Sources/LuaKitTool", swiftSettings: strict),
        // Lua that a module runs (the sandbox's prelude, the state runtime, the `luastore` module, the spec
        // library) lives in `.lua` files beside its Swift; this plugin embeds them into the binary at build time.
        .plugin(name: "EmbedLua", capability: .buildTool(), dependencies: ["embed-lua"], path: "Plugins/EmbedLua"),
        .executableTarget(name: "embed-lua", path: "Plugins/embed-lua", swiftSettings: strict),
        // The Swift types of an app's declared contract, written on every build where its Lua changed (a target names the
        // apps in its `luastore-types.json`): a props field renamed in Lua fails the Swift build where it is used.
        .plugin(name: "LuaStoreSwiftTypes", capability: .buildTool(), dependencies: ["luastore-swift-types"], path: "Plugins/LuaStoreSwiftTypes"),
        // (It depends on no module with Lua in it: a plugin's tool is built apart, without the plugins of its dependencies,
        // so not with LuaKit's embedded Lua.)
        .executableTarget(name: "luastore-swift-types", dependencies: ["LuaStoreContract"], path: "Plugins/luastore-swift-types",
                          swiftSettings: strict),
        .executableTarget(
            name: "luastore",
            dependencies: [
                "LuaKit", "LuaStoreCore", "LuaStoreScripting", "LuaStoreContract", "LuaStoreDevtools", "LuaStorePersistence",
                "LuaStoreBundles", "LuaStoreCommandLine", "LuaStoreConcurrency", .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strict,
            plugins: ["EmbedLua"]
        ),
        // What `luastore` and `luastore-serve` (the `serve/` package) share: the console, exit statuses, apps from a
        // folder or a verified bundle, the default time budget.
        .target(
            name: "LuaStoreCommandLine",
            dependencies: [
                "LuaKit", "LuaStoreConcurrency", "LuaStoreScripting", "LuaStoreBundles", "LuaStorePersistence",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strict
        ),
        // The devtools: a web page for a running app, served over HTTP and a WebSocket (FlyingFox).
        .target(
            name: "LuaStoreDevtools",
            dependencies: ["LuaKit", "LuaStoreConcurrency", "LuaStoreScripting", "PollingSocketPool", .product(name: "FlyingFox", package: "FlyingFox")],
            swiftSettings: strict,
            plugins: ["EmbedLua"]
        ),
        // Plugin bundles: a zip of an app's files with a digest of each and an Ed25519 signature over them; keys,
        // packing, verifying (refusing traversal, links, duplicates, bombs) and unpacking.
        .target(
            name: "LuaStoreBundles",
            dependencies: [
                "LuaStoreScripting", "LuaStoreConcurrency", .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ZIPFoundation", package: "ZIPFoundation"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "LuaStoreDemoAPI",
            dependencies: ["PollingSocketPool", .product(name: "FlyingFox", package: "FlyingFox")],
            swiftSettings: strict
        ),
        .executableTarget(name: "luastore-demo-api", dependencies: ["LuaStoreDemoAPI"], swiftSettings: strict),
        // A Swift program hosting a scripted app: its props as an @Observable model, actions sent with `await send`.
        .executableTarget(name: "swift-host", dependencies: ["LuaKit", "LuaStoreScripting"], path: "samples/swift-host",
                          swiftSettings: strict, plugins: ["LuaStoreSwiftTypes"]),
        .executableTarget(
            name: "luastore-bench",
            dependencies: [
                "LuaKit", "LuaStoreCore", "LuaStoreScripting", "LuaStoreDevtools", "LuaStorePersistence", "LuaStoreBundles",
                "RawHTTPClient", "LocalPostgres", "CSocketWait",
            ],
            swiftSettings: strict,
            plugins: ["EmbedLua"]
        ),
        // epoll for the bench's load generator (Swift's Glibc module does not declare it).
        .target(name: "CSocketWait"),
        .target(
            name: "LuaStoreCore",
            dependencies: ["LuaStoreConcurrency", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strict
        ),
        .target(
            name: "LuaStoreScripting", dependencies: ["CLuaState", "LuaKit", "LuaStoreCore", "LuaStoreContract"], swiftSettings: strict,
            plugins: ["EmbedLua"]
        ),
        // What an app declares in LuaLS annotations, read, and the Swift types written from it: plain Swift, no Lua (the
        // LuaStoreSwiftTypes plugin's tool is built on it alone). Values are checked against it in LuaStoreScripting.
        .target(name: "LuaStoreContract", swiftSettings: strict),
        // Durable stores: what each action changed, appended to a SQLite database (GRDB), with snapshots.
        .target(
            name: "LuaStorePersistence",
            dependencies: ["LuaKit", "LuaStoreConcurrency", "LuaStoreScripting", .product(name: "GRDB", package: "GRDB.swift")],
            swiftSettings: strict
        ),
        .target(
            name: "LuaStoreTesting", dependencies: ["LuaKit", "LuaStoreCore", "LuaStoreScripting"], swiftSettings: strict
        ),
        .testTarget(
            name: "LuaStoreDevtoolsTests",
            dependencies: [
                "LuaKit", "LuaStoreConcurrency", "LuaStoreCore", "LuaStoreScripting", "LuaStoreDevtools", "LuaStorePersistence", "LuaStoreTestSupport",
                "RawHTTPClient", "PollingSocketPool", .target(name: "luastore"), .product(name: "FlyingSocks", package: "FlyingFox"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "LuaStoreBundlesTests",
            dependencies: [
                "LuaKit", "LuaStoreBundles", "LuaStoreScripting", "LuaStoreTestSupport",
                .product(name: "Crypto", package: "swift-crypto"), .product(name: "ZIPFoundation", package: "ZIPFoundation"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "LuaStorePersistenceTests",
            dependencies: ["LuaKit", "LuaStoreCore", "LuaStoreScripting", "LuaStorePersistence", "LuaStoreTestSupport"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "LuaStoreTestingTests",
            dependencies: ["LuaKit", "LuaStoreCore", "LuaStoreScripting", "LuaStoreTesting", "LuaStoreTestSupport"],
            // (samples/todos's types, with the test store's typed steps, written by the plugin at each build.)
            swiftSettings: strict,
            plugins: ["LuaStoreSwiftTypes"]
        ),
        // The socket pool every FlyingFox server here runs on: poll(2), whose waits survive descriptor numbers being reused.
        .target(name: "PollingSocketPool", dependencies: [.product(name: "FlyingSocks", package: "FlyingFox")], swiftSettings: strict),
        // A bounded HTTP and WebSocket client on a plain socket, for the devtools' tests and benchmarks.
        .target(name: "RawHTTPClient", swiftSettings: strict),
        // Debian's PostgreSQL server started with initdb and pg_ctl in a temporary folder (the cluster's tests, benchmarks).
        .target(name: "LocalPostgres", dependencies: ["LuaStoreConcurrency"], path: "Tests/LocalPostgres", swiftSettings: strict),
        .target(
            name: "LuaStoreTestSupport",
            dependencies: [
                "LuaKit", "LuaStoreConcurrency", "PollingSocketPool",
                .product(name: "FlyingFox", package: "FlyingFox"),
                .product(name: "Subprocess", package: "swift-subprocess"),
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            path: "Tests/LuaStoreTestSupport",
            swiftSettings: strict
        ),
        .testTarget(
            name: "LuaKitTests",
            dependencies: [
                "LuaKit", "LuaStoreConcurrency", "LuaStoreTestSupport",
                .product(name: "Subprocess", package: "swift-subprocess"), .product(name: "SystemPackage", package: "swift-system"),
            ], exclude: ["Fuzz", "Differential"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "LuaStoreCoreTests",
            dependencies: ["LuaStoreCore", "LuaStoreTestSupport"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "luastoreTests",
            dependencies: [
                "LuaStoreDemoAPI", "LuaStoreTestSupport", "LuaStoreDevtools", "LuaStoreScripting", "RawHTTPClient", .target(name: "luastore"),
            ],
            exclude: ["golden", "specs", "busted", "busted-project", "busted-messages", "busted-errors", "state-differential"],
            swiftSettings: strict
        ),
        // What README, docs/ and the samples promise: links, shell sessions, the design's map, the Swift host.
        .testTarget(
            name: "DocsTests",
            dependencies: ["LuaStoreTestSupport", .target(name: "luastore"), .target(name: "swift-host")],
            swiftSettings: strict
        ),
        .testTarget(
            name: "LuaStoreScriptingTests",
            dependencies: ["CLuaState", "LuaStoreScripting", "LuaStoreContract", "LuaStoreTestSupport"],
            swiftSettings: strict
        ),
    ]
)
