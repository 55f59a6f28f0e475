// swift-tools-version:6.2
import PackageDescription

/// LuaStore: app logic in sandboxed Lua 5.4, side effects in Swift.
///
/// Layers, data flowing one way:
/// `CLua` (Lua's C headers and shims) → `LuaKit` (the safe, bounded VM; the only importer of `CLua`).
let strict: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .treatAllWarnings(as: .error),
]

let package = Package(
    name: "LuaStore",
    products: [
        .library(name: "LuaKit", targets: ["LuaKit"]),
        .executable(name: "luakit", targets: ["luakit"]),
    ],
    targets: [
        .systemLibrary(
            name: "CLua",
            pkgConfig: "lua5.4",
            providers: [.apt(["liblua5.4-dev"])]
        ),
        .target(name: "LuaKit", dependencies: ["CLua"], swiftSettings: strict),
        .executableTarget(name: "luakit", dependencies: ["LuaKit"], swiftSettings: strict),
        .testTarget(name: "LuaKitTests", dependencies: ["LuaKit"], swiftSettings: strict),
    ]
)
