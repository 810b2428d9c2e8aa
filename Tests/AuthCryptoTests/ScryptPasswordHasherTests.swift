import AuthCrypto
import Testing

@Suite struct ScryptPasswordHasherTests {
    /// A fast hasher for tests: N = 2^10 (about 1 ms instead of about 100 ms).
    static let fast = ScryptPasswordHasher(parameters: .init(logN: 10, r: 8, p: 1))

    // MARK: RFC 7914 §12 test vectors

    @Test("RFC 7914 §12: P=\"\", S=\"\", N=16, r=1, p=1")
    func rfc7914EmptyPasswordAndSalt() throws {
        let key = try Scrypt.deriveKey(
            password: [],
            salt: [],
            parameters: .init(logN: 4, r: 1, p: 1),
            outputByteCount: 64
        )
        #expect(
            key
                == hex(
                    """
                    77 d6 57 62 38 65 7b 20 3b 19 ca 42 c1 8a 04 97
                    f1 6b 48 44 e3 07 4a e8 df df fa 3f ed e2 14 42
                    fc d0 06 9d ed 09 48 f8 32 6a 75 3a 0f c8 1f 17
                    e8 d3 e0 fb 2e 0d 36 28 cf 35 e2 0c 38 d1 89 06
                    """
                )
        )
    }

    @Test("RFC 7914 §12: P=\"password\", S=\"NaCl\", N=1024, r=8, p=16")
    func rfc7914Password() throws {
        let key = try Scrypt.deriveKey(
            password: utf8("password"),
            salt: utf8("NaCl"),
            parameters: .init(logN: 10, r: 8, p: 16),
            outputByteCount: 64
        )
        #expect(
            key
                == hex(
                    """
                    fd ba be 1c 9d 34 72 00 78 56 e7 19 0d 01 e9 fe
                    7c 6a d7 cb c8 23 78 30 e7 73 76 63 4b 37 31 62
                    2e af 30 d9 2e 22 a3 88 6f f1 09 27 9d 98 30 da
                    c7 27 af b9 4a 83 ee 6d 83 60 cb df a2 cc 06 40
                    """
                )
        )
    }

    @Test("RFC 7914 §12: P=\"pleaseletmein\", S=\"SodiumChloride\", N=16384, r=8, p=1")
    func rfc7914PleaseLetMeIn() throws {
        let key = try Scrypt.deriveKey(
            password: utf8("pleaseletmein"),
            salt: utf8("SodiumChloride"),
            parameters: .init(logN: 14, r: 8, p: 1),
            outputByteCount: 64
        )
        #expect(key == hex(Self.pleaseLetMeInKey))
    }
    // The fourth RFC 7914 vector (N=1048576, r=8, p=1) needs 1 GiB and several seconds: it is
    // skipped, and the default Limits reject it (see oversizedParameters).

    static let pleaseLetMeInKey = """
        70 23 bd cb 3a fd 73 48 46 1c 06 cd 81 fd 38 eb
        fd a8 fb ba 90 4f 8e 3e a9 b5 43 f6 54 5d a1 f2
        d5 43 29 55 61 3f 0f cf 62 d4 97 05 24 2a 9a f9
        e6 1e 85 dc 0d 65 1e 40 df cf 01 7b 45 57 58 87
        """

    // MARK: PHC strings

    @Test func hashFormat() throws {
        let phc = try Self.fast.hash(password: "correct horse battery staple")
        let fields = phc.split(separator: "$", omittingEmptySubsequences: false)
        #expect(fields.count == 5)
        #expect(fields[0] == "")
        #expect(fields[1] == "scrypt")
        #expect(fields[2] == "ln=10,r=8,p=1")
        #expect(Base64.decode(String(fields[3]), padded: false)?.count == 16)
        #expect(Base64.decode(String(fields[4]), padded: false)?.count == 32)
        #expect(!fields[3].contains("=") && !fields[4].contains("="), "PHC base64 has no padding")
        // Fresh salt every time.
        #expect(try Self.fast.hash(password: "correct horse battery staple") != phc)
    }

    @Test("a hash made with ln=10 verifies under a hasher whose defaults are ln=15")
    func parametersAreReadBack() throws {
        let phc = try Self.fast.hash(password: "pässwörd")
        let current = ScryptPasswordHasher()  // ln=15: verifying with ln=15 would give another key
        #expect(current.parameters.logN == 15)
        #expect(try current.verify(password: "pässwörd", against: phc))
        #expect(try !current.verify(password: "passwörd", against: phc))
        #expect(try !current.verify(password: "", against: phc))
        #expect(current.needsRehash(phc))
        #expect(!Self.fast.needsRehash(phc))
    }

    @Test("a PHC string built from the RFC 7914 vector verifies (interoperable format, 64-byte hash)")
    func rfcVectorAsPHC() throws {
        let phc =
            "$scrypt$ln=14,r=8,p=1$\(Base64.encode(utf8("SodiumChloride"), padded: false))$"
            + Base64.encode(hex(Self.pleaseLetMeInKey), padded: false)
        #expect(try Self.fast.verify(password: "pleaseletmein", against: phc))
        #expect(try !Self.fast.verify(password: "pleaseletmeout", against: phc))
    }

    @Test func emptyPassword() throws {
        let phc = try Self.fast.hash(password: "")
        #expect(try Self.fast.verify(password: "", against: phc))
        #expect(try !Self.fast.verify(password: " ", against: phc))
    }

    static let salt = "c2FsdHNhbHRzYWx0c2FsdA"  // 16 bytes
    static let key = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"  // 32 bytes

    @Test(arguments: [
        "",
        "scrypt",
        "$scrypt$",
        "$scrypt$ln=10,r=8,p=1$\(salt)",  // missing hash
        "$scrypt$ln=10,r=8,p=1$\(salt)$\(key)$",  // extra field
        "scrypt$ln=10,r=8,p=1$\(salt)$\(key)",  // no leading $
        "$argon2id$ln=10,r=8,p=1$\(salt)$\(key)",
        "$SCRYPT$ln=10,r=8,p=1$\(salt)$\(key)",
        "$scrypt$r=8,ln=10,p=1$\(salt)$\(key)",  // wrong order
        "$scrypt$ln=10,r=8$\(salt)$\(key)",  // missing p
        "$scrypt$ln=10,r=8,p=1,x=2$\(salt)$\(key)",
        "$scrypt$ln=010,r=8,p=1$\(salt)$\(key)",  // leading zero
        "$scrypt$ln=+10,r=8,p=1$\(salt)$\(key)",
        "$scrypt$ln=-1,r=8,p=1$\(salt)$\(key)",
        "$scrypt$ln=,r=8,p=1$\(salt)$\(key)",
        "$scrypt$ln=1e1,r=8,p=1$\(salt)$\(key)",
        "$scrypt$ln=99999999999999999999,r=8,p=1$\(salt)$\(key)",
        "$scrypt$ln = 10,r=8,p=1$\(salt)$\(key)",
        "$scrypt$ln=10,r=8,p=1$\(salt)==$\(key)",  // padding
        "$scrypt$ln=10,r=8,p=1$\(salt)$\(key)=",
        "$scrypt$ln=10,r=8,p=1$c2Fs-HNhbHRzYWx0c2FsdA$\(key)",  // base64url, not base64
        "$scrypt$ln=10,r=8,p=1$c2FsdA$\(key)",  // 4-byte salt
        "$scrypt$ln=10,r=8,p=1$\(salt)$AAECAwQFBgc",  // 8-byte hash
        "$scrypt$ln=10,r=8,p=1$\(salt)$\(key)\n",
    ])
    func malformedStringsAreRejected(_ phc: String) {
        do {
            _ = try Self.fast.verify(password: "password", against: phc)
            Issue.record("accepted \(phc)")
        } catch {
            #expect(error.code == .malformedPasswordHash, "\(error)")
        }
        #expect(Self.fast.needsRehash(phc))
    }

    @Test(arguments: [
        "$scrypt$ln=21,r=8,p=1$\(salt)$\(key)",  // ln over 20
        "$scrypt$ln=20,r=8,p=1$\(salt)$\(key)",  // 1 GiB of memory
        "$scrypt$ln=18,r=16,p=1$\(salt)$\(key)",  // 512 MiB
        "$scrypt$ln=10,r=64,p=1$\(salt)$\(key)",  // r over 32
        "$scrypt$ln=10,r=8,p=17$\(salt)$\(key)",  // p over 16
        "$scrypt$ln=18,r=8,p=16$\(salt)$\(key)",  // 4 GiB of work
        "$scrypt$ln=0,r=8,p=1$\(salt)$\(key)",  // N = 1
        "$scrypt$ln=10,r=0,p=1$\(salt)$\(key)",
        "$scrypt$ln=10,r=8,p=0$\(salt)$\(key)",
        "$scrypt$ln=16,r=1,p=1$\(salt)$\(key)",  // N must be below 2^(16 r)
        "$scrypt$ln=999999,r=8,p=1$\(salt)$\(key)",
    ])
    func oversizedParametersAreRejected(_ phc: String) {
        do {
            _ = try Self.fast.verify(password: "password", against: phc)
            Issue.record("accepted \(phc)")
        } catch {
            #expect(error.code == .unsupportedParameters, "\(error)")
        }
    }

    @Test func needsRehash() throws {
        let hasher = ScryptPasswordHasher(parameters: .init(logN: 11, r: 8, p: 2))
        let salt = Self.salt
        let key = Self.key
        #expect(hasher.needsRehash("$scrypt$ln=10,r=8,p=2$\(salt)$\(key)"))
        #expect(hasher.needsRehash("$scrypt$ln=11,r=4,p=2$\(salt)$\(key)"))
        #expect(hasher.needsRehash("$scrypt$ln=11,r=8,p=1$\(salt)$\(key)"))
        #expect(!hasher.needsRehash("$scrypt$ln=11,r=8,p=2$\(salt)$\(key)"))
        #expect(!hasher.needsRehash("$scrypt$ln=12,r=8,p=2$\(salt)$\(key)"))
        // 12-byte salt, 16-byte hash: shorter than what new hashes get.
        #expect(hasher.needsRehash("$scrypt$ln=11,r=8,p=2$c2FsdHNhbHRzYWx0$\(key)"))
        #expect(hasher.needsRehash("$scrypt$ln=11,r=8,p=2$\(salt)$AAECAwQFBgcICQoLDA0ODw"))
    }

    @Test func defaultParameters() {
        let hasher = ScryptPasswordHasher()
        #expect(hasher.parameters == .init(logN: 15, r: 8, p: 1))
        #expect(hasher.parameters.memoryBytes == 32 << 20)
        #expect(ScryptPasswordHasher.saltByteCount == 16)
        #expect(ScryptPasswordHasher.hashByteCount == 32)
    }

    @Test func deriveKeyRejectsBadLengths() {
        #expect(throws: CryptoError.self) {
            try Scrypt.deriveKey(password: [], salt: [], parameters: .init(logN: 4, r: 1, p: 1), outputByteCount: 0)
        }
    }
}
