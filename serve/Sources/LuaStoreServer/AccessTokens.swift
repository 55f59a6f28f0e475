import Crypto
import Foundation

/// What one bearer token grants: the store keys it reaches and what it may do there.
///
/// A key pattern is a key (`room-7`), or a prefix ending in `*` (`doc-*`; `*` alone: every key).
public struct AccessGrant: Sendable, Equatable, Codable {
    /// What a token may do with the keys it names.
    public enum Right: String, Sendable, Codable, CaseIterable {
        /// Read props and state, follow the live props, read the store's journal.
        case read
        /// Send actions.
        case dispatch
        /// Open the store's devtools (`GET /stores/KEY/devtools`, with `serve --devtools`): its journal, its state at
        /// any kept point, time travel, dispatch.
        case devtools
    }

    /// Who the token was issued to: connections are counted per subject (`ServerLimits.connectionsPerSubject`).
    public var subject: String
    public var keys: [String]
    public var rights: Set<Right>
    /// Seconds since 1970-01-01 UTC after which the token is refused; nil: never.
    public var expires: Int64?

    public init(subject: String, keys: [String], rights: Set<Right>, expires: Int64? = nil) {
        self.subject = subject
        self.keys = keys
        self.rights = rights
        self.expires = expires
    }

    private enum CodingKeys: String, CodingKey { case subject, keys, rights, expires }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        subject = try container.decode(String.self, forKey: .subject)
        keys = try container.decode([String].self, forKey: .keys)
        rights = try container.decode(Set<Right>.self, forKey: .rights)
        expires = try container.decodeIfPresent(Int64.self, forKey: .expires)
    }

    /// (The rights in their order: a grant is always written the same way.)
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(subject, forKey: .subject)
        try container.encode(keys, forKey: .keys)
        try container.encode(Right.allCases.filter(rights.contains), forKey: .rights)
        try container.encodeIfPresent(expires, forKey: .expires)
    }

    /// Whether the grant reaches `key` with `right`.
    public func allows(_ right: Right, on key: String) -> Bool {
        rights.contains(right) && keys.contains { pattern in
            pattern.hasSuffix("*") ? key.hasPrefix(pattern.dropLast()) : key == pattern
        }
    }
}

/// Why a token was refused (the server answers 401 with these words).
public struct TokenRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// Issues and verifies bearer tokens: `lst1.PAYLOAD.MAC`, the payload a grant as base64url JSON, the MAC an
/// HMAC-SHA256 of `lst1.PAYLOAD` under the server's secret. Only the holder of the secret can make one; a token
/// cannot be widened without breaking its MAC.
public struct TokenAuthority: Sendable {
    static let prefix = "lst1"
    /// The least secret taken, in bytes.
    public static let minimumSecretBytes = 32
    private let secret: Data
    private var key: SymmetricKey { SymmetricKey(data: secret) }

    /// An authority over `secret` (at least 32 bytes).
    public init(secret: Data) throws(TokenRefusal) {
        guard secret.count >= Self.minimumSecretBytes else {
            throw TokenRefusal("the token secret has \(secret.count) bytes; at least \(Self.minimumSecretBytes) are needed")
        }
        self.secret = secret
    }

    /// Reads a secret file (`luastore token secret` writes one: base64 text of 32 random bytes).
    public init(secretFile path: String) throws(TokenRefusal) {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw TokenRefusal("the token secret file \(path) cannot be read")
        }
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard let secret = Data(base64Encoded: text) else {
            throw TokenRefusal("the token secret file \(path) does not hold base64 text (`luastore token secret FILE` writes one)")
        }
        try self.init(secret: secret)
    }

    /// A new secret, as the text a secret file holds.
    public static func newSecretText() -> String {
        SymmetricKey(size: .bits256).withUnsafeBytes { Data($0).base64EncodedString() }
    }

    /// A token carrying `grant`.
    public func issue(_ grant: AccessGrant) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let payload = Self.base64URL((try? encoder.encode(grant)) ?? Data())
        let signed = "\(Self.prefix).\(payload)"
        return "\(signed).\(Self.base64URL(Data(HMAC<SHA256>.authenticationCode(for: Data(signed.utf8), using: key))))"
    }

    /// The grant `token` carries, if its MAC is this authority's and it has not expired at `now`.
    public func verify(_ token: String, now: Date = Date()) throws(TokenRefusal) -> AccessGrant {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == Self.prefix, let payload = Self.data(base64URL: parts[1]),
              let mac = Self.data(base64URL: parts[2]) else {
            throw TokenRefusal("the bearer token is not one this server issues (lst1.PAYLOAD.MAC)")
        }
        let signed = Data("\(parts[0]).\(parts[1])".utf8)
        guard HMAC<SHA256>.isValidAuthenticationCode(mac, authenticating: signed, using: key) else {
            throw TokenRefusal("the bearer token's signature does not match this server's secret")
        }
        guard let grant = try? JSONDecoder().decode(AccessGrant.self, from: payload) else {
            throw TokenRefusal("the bearer token's payload is not a grant")
        }
        if let expires = grant.expires, Int64(now.timeIntervalSince1970) >= expires {
            throw TokenRefusal("the bearer token expired at \(Date(timeIntervalSince1970: TimeInterval(expires)))")
        }
        return grant
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// The bytes `text` spells in unpadded base64url — only when it is the one spelling of them (`base64URL`): a
    /// pad, standard base64's `+` and `/`, or a last character whose unused low bits are set spell the same bytes
    /// differently, and a token must be one string, so that revoking, caching or logging it by its text holds.
    static func data(base64URL text: Substring) -> Data? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        guard let data = Data(base64Encoded: base64), base64URL(data) == text else { return nil }
        return data
    }
}
