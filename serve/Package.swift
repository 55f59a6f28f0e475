// swift-tools-version:6.2
import PackageDescription

/// `luastore serve`: an app's stores by key behind HTTP and WebSockets, and many nodes on one PostgreSQL.
///
/// A package of its own, on LuaStore (the repository's root, by path), so that the server's dependencies —
/// Hummingbird and SwiftNIO, postgres-nio, swift-metrics — are never part of a build of the core or of its sanitizer
/// runs. It builds `luastore-serve` (the `serve` and `token` commands, which `luastore serve` and `luastore token`
/// run) and, beside it, the root's `luastore`, so that `serve/.build/debug` holds a whole command-line tool.
let strict: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .treatAllWarnings(as: .error),
]

let package = Package(
    name: "LuaStoreServe",
    products: [
        .library(name: "LuaStoreServer", targets: ["LuaStoreServer"]),
        .library(name: "LuaStoreCluster", targets: ["LuaStoreCluster"]),
        .executable(name: "luastore-serve", targets: ["luastore-serve"]),
    ],
    dependencies: [
        .package(name: "LuaStore", path: ".."),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        // Stores by key behind HTTP and WebSockets (LuaStoreServer), shut down gracefully (swift-service-lifecycle,
        // which Hummingbird runs on).
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket", from: "2.8.1"),
        // (A live connection's handler sits in its channel, beside NIO's WebSocket frame decoder.)
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        // `serve --cluster`: the keys' journals, leases and nodes in PostgreSQL (LuaStoreCluster).
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        // `serve`'s metrics: swift-metrics, shown in Prometheus' format.
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
    ],
    targets: [
        // Many `serve` nodes on one PostgreSQL: each key's journal and snapshots, its lease with a fencing epoch.
        .target(
            name: "LuaStoreCluster",
            dependencies: [
                .product(name: "LuaKit", package: "LuaStore"), .product(name: "LuaStoreConcurrency", package: "LuaStore"),
                .product(name: "LuaStoreScripting", package: "LuaStore"), .product(name: "LuaStorePersistence", package: "LuaStore"),
                .product(name: "PostgresNIO", package: "postgres-nio"), .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // One store per key, created from the app on first use, durable (LuaStorePersistence), hibernated when idle;
        // HTTP and a WebSocket per client (Hummingbird), bearer tokens, action ids.
        .target(
            name: "LuaStoreServer",
            dependencies: [
                "LuaStoreCluster",
                .product(name: "LuaKit", package: "LuaStore"), .product(name: "LuaStoreConcurrency", package: "LuaStore"),
                .product(name: "LuaStoreScripting", package: "LuaStore"), .product(name: "LuaStorePersistence", package: "LuaStore"),
                .product(name: "LuaStoreBundles", package: "LuaStore"), .product(name: "LuaStoreDevtools", package: "LuaStore"),
                .product(name: "Hummingbird", package: "hummingbird"), .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"), .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"), .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: strict
        ),
        // `luastore-serve serve|token`, which `luastore serve|token` run.
        .executableTarget(
            name: "luastore-serve",
            dependencies: [
                "LuaStoreServer", "LuaStoreCluster",
                .product(name: "LuaKit", package: "LuaStore"), .product(name: "LuaStoreScripting", package: "LuaStore"),
                .product(name: "LuaStorePersistence", package: "LuaStore"), .product(name: "LuaStoreCommandLine", package: "LuaStore"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "LuaStoreClusterTests",
            dependencies: [
                "LuaStoreCluster", .product(name: "LocalPostgres", package: "LuaStore"),
                .product(name: "LuaKit", package: "LuaStore"), .product(name: "LuaStorePersistence", package: "LuaStore"),
                .product(name: "LuaStoreScripting", package: "LuaStore"), .product(name: "LuaStoreTestSupport", package: "LuaStore"),
            ],
            swiftSettings: strict
        ),
        // Through the built programs: `luastore-serve`, and `luastore` running it.
        .testTarget(
            name: "LuaStoreServerTests",
            dependencies: [
                "LuaStoreServer", .target(name: "luastore-serve"), .product(name: "LocalPostgres", package: "LuaStore"),
                .product(name: "luastore", package: "LuaStore"), .product(name: "luastore-bench", package: "LuaStore"),
                .product(name: "LuaStoreTestSupport", package: "LuaStore"), .product(name: "RawHTTPClient", package: "LuaStore"),
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
    ]
)
