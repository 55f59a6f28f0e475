import Foundation
import LuaStoreDemoAPI

/// `luastore-demo-api [--port N]`: the search sample's API on 127.0.0.1 (default port 8765).
var port: UInt16 = 8765
var arguments = Array(CommandLine.arguments.dropFirst())
while !arguments.isEmpty {
    let argument = arguments.removeFirst()
    if argument == "--port", let value = arguments.first.flatMap(UInt16.init) {
        arguments.removeFirst()
        port = value
    } else {
        FileHandle.standardError.write(Data("usage: luastore-demo-api [--port N]\n".utf8))
        exit(2)
    }
}
let (_, task, actualPort) = try await SearchAPI.start(port: port)
FileHandle.standardError.write(Data("search API listening on http://127.0.0.1:\(actualPort) (ctrl-C to stop)\n".utf8))
try await task.value
