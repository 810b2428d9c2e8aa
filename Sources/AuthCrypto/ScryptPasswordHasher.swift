internal import COpenSSL

/// Password hashing with scrypt (RFC 7914), stored as PHC strings:
/// `$scrypt$ln=15,r=8,p=1$<salt>$<hash>` (salt and hash in standard base64 without padding).
///
/// Hashing and verifying take about 100 ms of CPU and 32 MiB of memory at the default
/// parameters, on purpose. The hasher is synchronous: **never call it on an event-loop thread**;
/// run it on a thread pool (for example `NIOThreadPool.runIfActive`) and bound how many run at
/// once, since each holds its memory for the whole computation.
///
/// ``verify(password:against:)`` reads the cost parameters from the stored string, not from the
/// hasher, so old hashes keep verifying after the defaults are raised; ``needsRehash(_:)`` tells
/// when to store a new hash after a successful login. Parameters read from a string are bounded
/// by ``Limits`` so a corrupted or hostile string cannot make the process allocate gigabytes.
public struct ScryptPasswordHasher: Sendable {
    /// scrypt cost parameters.
    public struct Parameters: Hashable, Sendable, CustomStringConvertible {
        /// log2 of the CPU/memory cost N (N = 2^logN).
        public var logN: Int
        /// Block size factor r.
        public var r: Int
        /// Parallelisation factor p (OpenSSL computes the p lanes one after another: p multiplies
        /// time, not memory).
        public var p: Int

        /// Creates parameters.
        public init(logN: Int, r: Int, p: Int) {
            self.logN = logN
            self.r = r
            self.p = p
        }

        /// N = 2^15, r = 8, p = 1: 32 MiB and about 100 ms per hash on one current core
        /// (the RFC 7914 interactive-login figure, scaled for today's hardware).
        public static let `default` = Parameters(logN: 15, r: 8, p: 1)

        /// Memory scrypt needs for V: 128 · r · N bytes.
        public var memoryBytes: Int { (128 * self.r) << self.logN }

        public var description: String { "ln=\(self.logN),r=\(self.r),p=\(self.p)" }
    }

    /// Bounds on the parameters accepted from a stored hash (and by ``Scrypt/deriveKey``).
    public struct Limits: Hashable, Sendable {
        /// Largest accepted log2(N).
        public var maxLogN: Int
        /// Largest accepted r.
        public var maxR: Int
        /// Largest accepted p.
        public var maxP: Int
        /// Largest accepted 128 · r · N (the memory one computation holds).
        public var maxMemoryBytes: Int
        /// Largest accepted 128 · r · N · p (proportional to the time one computation takes).
        public var maxWorkBytes: Int

        /// Creates limits.
        public init(maxLogN: Int, maxR: Int, maxP: Int, maxMemoryBytes: Int, maxWorkBytes: Int) {
            self.maxLogN = maxLogN
            self.maxR = maxR
            self.maxP = maxP
            self.maxMemoryBytes = maxMemoryBytes
            self.maxWorkBytes = maxWorkBytes
        }

        /// ln ≤ 20, r ≤ 32, p ≤ 16, at most 256 MiB of memory and 1 GiB of work (8× and 32× the
        /// defaults): room to raise the defaults for years, never gigabytes of memory.
        public static let `default` = Limits(
            maxLogN: 20,
            maxR: 32,
            maxP: 16,
            maxMemoryBytes: 256 << 20,
            maxWorkBytes: 1 << 30
        )

        /// Throws ``CryptoError/Code/unsupportedParameters`` unless `parameters` are within these
        /// limits and valid for scrypt (N > 1 and N < 2^(16·r), RFC 7914 §2).
        public func check(_ parameters: Parameters) throws(CryptoError) {
            guard (1...self.maxLogN).contains(parameters.logN),
                (1...self.maxR).contains(parameters.r),
                (1...self.maxP).contains(parameters.p)
            else {
                throw CryptoError(
                    code: .unsupportedParameters,
                    message:
                        "scrypt parameters \(parameters) outside ln 1...\(self.maxLogN), r 1...\(self.maxR), p 1...\(self.maxP)"
                )
            }
            guard parameters.logN < 16 * parameters.r else {
                throw CryptoError(
                    code: .unsupportedParameters,
                    message: "scrypt requires N < 2^(16·r); got \(parameters)"
                )
            }
            // Bounded above, so these products cannot overflow: 128 · 32 · 2^20 · 16 < 2^63.
            guard parameters.memoryBytes <= self.maxMemoryBytes,
                parameters.memoryBytes * parameters.p <= self.maxWorkBytes
            else {
                throw CryptoError(
                    code: .unsupportedParameters,
                    message:
                        "scrypt parameters \(parameters) need \(parameters.memoryBytes) bytes × p \(parameters.p), over the limits"
                )
            }
        }
    }

    /// Salt length of new hashes (16 bytes, as RFC 7914 and the PHC recommend).
    public static let saltByteCount = 16
    /// Derived key length of new hashes (32 bytes).
    public static let hashByteCount = 32

    /// The parameters of new hashes.
    public let parameters: Parameters
    /// The bounds applied to parameters read from stored hashes.
    public let limits: Limits

    /// Creates a hasher that hashes with `parameters` and verifies hashes within `limits`.
    ///
    /// - Precondition: `parameters` satisfy `limits` (a configuration error otherwise).
    public init(parameters: Parameters = .default, limits: Limits = .default) {
        do {
            try limits.check(parameters)
        } catch {
            preconditionFailure("ScryptPasswordHasher parameters outside their own limits: \(error)")
        }
        self.parameters = parameters
        self.limits = limits
    }

    /// A new PHC string for `password` (UTF-8 bytes as given: normalise first if the clients
    /// may send different Unicode forms), with a fresh random salt. Slow: see the type's docs.
    public func hash(password: String) throws(CryptoError) -> String {
        let salt = SecureRandom.bytes(count: Self.saltByteCount)
        var passwordBytes = Array(password.utf8)
        defer { secureZero(&passwordBytes) }
        let derived = try Scrypt.deriveKey(
            password: passwordBytes,
            salt: salt,
            parameters: self.parameters,
            outputByteCount: Self.hashByteCount,
            limits: self.limits
        )
        return PHCString(parameters: self.parameters, salt: salt, hash: derived).encoded
    }

    /// Whether `password` matches the PHC string `phc`, using the parameters, salt and hash
    /// length stored in `phc`. Slow: see the type's docs.
    ///
    /// - Returns: `false` when the password does not match.
    /// - Throws: ``CryptoError/Code/malformedPasswordHash`` when `phc` is not a scrypt PHC string,
    ///   ``CryptoError/Code/unsupportedParameters`` when its parameters exceed ``limits``.
    public func verify(password: String, against phc: String) throws(CryptoError) -> Bool {
        let stored = try PHCString(parsing: phc)
        var passwordBytes = Array(password.utf8)
        defer { secureZero(&passwordBytes) }
        let derived = try Scrypt.deriveKey(
            password: passwordBytes,
            salt: stored.salt,
            parameters: stored.parameters,
            outputByteCount: stored.hash.count,
            limits: self.limits
        )
        return ConstantTime.equals(derived, stored.hash)
    }

    /// Whether `phc` should be replaced by a new ``hash(password:)`` (call after a successful
    /// ``verify(password:against:)``, when the password is at hand): true when any stored
    /// parameter, the salt or the hash length is below the current ones, or when `phc` cannot
    /// be parsed at all.
    public func needsRehash(_ phc: String) -> Bool {
        guard let stored = try? PHCString(parsing: phc) else { return true }
        return stored.parameters.logN < self.parameters.logN
            || stored.parameters.r < self.parameters.r
            || stored.parameters.p < self.parameters.p
            || stored.salt.count < Self.saltByteCount
            || stored.hash.count < Self.hashByteCount
    }
}

/// The scrypt key-derivation function (RFC 7914) through OpenSSL's `EVP_PBE_scrypt`.
public enum Scrypt {
    /// scrypt(password, salt, N = 2^logN, r, p, outputByteCount). Slow and memory-hungry by
    /// design; synchronous: keep it off event-loop threads.
    ///
    /// - Throws: ``CryptoError/Code/unsupportedParameters`` when `parameters` exceed `limits`,
    ///   ``CryptoError/Code/invalidArgument`` for an output length outside 1...1024.
    public static func deriveKey(
        password: [UInt8],
        salt: [UInt8],
        parameters: ScryptPasswordHasher.Parameters,
        outputByteCount: Int,
        limits: ScryptPasswordHasher.Limits = .default
    ) throws(CryptoError) -> [UInt8] {
        try limits.check(parameters)
        guard (1...1024).contains(outputByteCount) else {
            throw CryptoError(
                code: .invalidArgument,
                message: "scrypt output length \(outputByteCount) outside 1...1024"
            )
        }
        // OpenSSL refuses to run when its estimate (128·r·(N+2) for V plus 128·r·p for B) exceeds
        // maxmem, and maxmem 0 means 32 MiB, which N=2^15, r=8 already exceeds. Pass our own
        // bounded figure plus slack; `limits` above is the real guard.
        let n = UInt64(1) << UInt64(parameters.logN)
        let maxMemory = 128 * UInt64(parameters.r) * (n + 2 + UInt64(parameters.p)) + (1 << 20)
        var out = [UInt8](repeating: 0, count: outputByteCount)
        let ok = password.withNonNullBytes { passwordBytes, passwordCount in
            salt.withNonNullBytes { saltBytes, saltCount in
                out.withUnsafeMutableBufferPointer { key in
                    passwordBytes.withMemoryRebound(to: CChar.self, capacity: max(passwordCount, 1)) { passwordChars in
                        EVP_PBE_scrypt(
                            passwordChars,
                            passwordCount,
                            saltBytes,
                            saltCount,
                            n,
                            UInt64(parameters.r),
                            UInt64(parameters.p),
                            maxMemory,
                            key.baseAddress,
                            key.count
                        )
                    }
                }
            }
        }
        guard ok == 1 else {
            throw CryptoError.openSSL(.internalError, "EVP_PBE_scrypt failed for \(parameters)")
        }
        return out
    }
}

/// `$scrypt$ln=<logN>,r=<r>,p=<p>$<salt>$<hash>` (PHC string format, scrypt as passlib and
/// others write it; base64 is the standard alphabet without padding).
struct PHCString {
    var parameters: ScryptPasswordHasher.Parameters
    var salt: [UInt8]
    var hash: [UInt8]

    /// Accepted salt lengths (bytes).
    static let saltRange = 8...64
    /// Accepted hash lengths (bytes).
    static let hashRange = 16...64

    init(parameters: ScryptPasswordHasher.Parameters, salt: [UInt8], hash: [UInt8]) {
        self.parameters = parameters
        self.salt = salt
        self.hash = hash
    }

    var encoded: String {
        "$scrypt$\(self.parameters)$\(Base64.encode(self.salt, padded: false))$\(Base64.encode(self.hash, padded: false))"
    }

    /// Parses strictly: exactly this shape, parameters in this order, canonical decimal numbers,
    /// strict unpadded base64, bounded lengths.
    init(parsing string: String) throws(CryptoError) {
        func malformed(_ why: String) -> CryptoError {
            CryptoError(code: .malformedPasswordHash, message: "not a scrypt PHC string: \(why)")
        }
        guard string.utf8.count <= 512 else { throw malformed("too long") }
        let fields = string.utf8.split(separator: UInt8(ascii: "$"), omittingEmptySubsequences: false)
        guard fields.count == 5, fields[0].isEmpty else { throw malformed("expected $scrypt$<params>$<salt>$<hash>") }
        guard fields[1].elementsEqual("scrypt".utf8) else { throw malformed("algorithm is not scrypt") }

        let assignments = fields[2].split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false)
        guard assignments.count == 3 else { throw malformed("expected ln=,r=,p=") }
        var values: [Int] = []
        for (assignment, name) in zip(assignments, ["ln", "r", "p"]) {
            let parts = assignment.split(separator: UInt8(ascii: "="), omittingEmptySubsequences: false)
            guard parts.count == 2, parts[0].elementsEqual(name.utf8) else {
                throw malformed("expected parameter \(name)")
            }
            guard let value = Self.canonicalDecimal(parts[1]) else {
                throw malformed("parameter \(name) is not a decimal number")
            }
            values.append(value)
        }
        guard let salt = Base64Codec.standard.decode(Array(fields[3]), padded: false),
            Self.saltRange.contains(salt.count)
        else { throw malformed("bad salt") }
        guard let hash = Base64Codec.standard.decode(Array(fields[4]), padded: false),
            Self.hashRange.contains(hash.count)
        else { throw malformed("bad hash") }

        self.parameters = ScryptPasswordHasher.Parameters(logN: values[0], r: values[1], p: values[2])
        self.salt = salt
        self.hash = hash
    }

    /// A non-negative decimal without sign or leading zero, at most 6 digits (so it fits and
    /// stays far below any limit check's overflow).
    private static func canonicalDecimal(_ digits: some Collection<UInt8>) -> Int? {
        guard (1...6).contains(digits.count) else { return nil }
        guard digits.count == 1 || digits.first != UInt8(ascii: "0") else { return nil }
        var value = 0
        for digit in digits {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(digit) else { return nil }
            value = value * 10 + Int(digit - UInt8(ascii: "0"))
        }
        return value
    }
}
