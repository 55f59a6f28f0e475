import Foundation
@testable import LuaStoreServer
import Testing

/// Bearer tokens on their own (no server): a grant's token is one string — any other spelling of its bytes is
/// refused, so that revoking, caching or logging a token by its text holds.
@Suite struct AccessTokenTests {
    @Test func aTokenIsOneStringOnly() throws {
        let authority = try TokenAuthority(secret: Data(repeating: 9, count: 32))
        let token = authority.issue(AccessGrant(subject: "s", keys: ["doc-*"], rights: [.read]))
        #expect(try authority.verify(token).subject == "s")
        let parts = token.split(separator: ".").map(String.init)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        let mac = parts[2], last = try #require(mac.last.flatMap { alphabet.firstIndex(of: $0) })
        // (A 32-byte MAC is 43 characters: the last one's two low bits are unused.)
        let lowBitsSet = String(mac.dropLast()) + String(alphabet[last ^ 1])
        var spellings = [mac + "=", lowBitsSet, parts[1] + "=" + "." + mac]
        let standard = mac.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        if standard != mac { spellings.append(standard) }
        for spelling in spellings {
            let other = spelling.contains(".") ? "\(parts[0]).\(spelling)" : "\(parts[0]).\(parts[1]).\(spelling)"
            #expect(throws: TokenRefusal.self, "\(other) is the same grant spelled otherwise") { try authority.verify(other) }
        }
    }
}
