import AuthCrypto
import NIOPosix

/// scrypt hashing off the event loops and off Swift's cooperative pool: on a dedicated thread
/// pool of ``concurrency`` threads, so at most that many hashes (each holding 128·r·N bytes)
/// run at once however many calls arrive; the others wait in the pool's queue.
///
/// Unknown-email sign-ins verify against ``dummyHash`` (a hash of random bytes with the current
/// parameters), so they take the time a wrong password takes.
public final class PasswordHashing: Sendable {
    public let hasher: ScryptPasswordHasher
    public let concurrency: Int
    private let threads: NIOThreadPool
    /// A hash no password matches, with the current parameters.
    let dummyHash: String

    /// Starts the threads and computes the dummy hash (one hash's time).
    public init(parameters: ScryptPasswordHasher.Parameters, concurrency: Int) throws {
        self.hasher = ScryptPasswordHasher(parameters: parameters)
        self.concurrency = concurrency
        self.threads = NIOThreadPool(numberOfThreads: concurrency)
        self.threads.start()
        self.dummyHash = try hasher.hash(password: Base64URL.encode(SecureRandom.bytes(count: 32)))
    }

    /// Stops the threads (after the queued work).
    public func shutdown() async {
        try? await threads.shutdownGracefully()
    }

    /// A new PHC string for an already normalised password.
    func hash(_ password: String) async throws -> String {
        let hasher = self.hasher
        return try await threads.runIfActive { try hasher.hash(password: password) }
    }

    /// Whether `password` matches `phc`; with `phc` nil, verifies against ``dummyHash`` (always
    /// false) so the caller spends the same time. A malformed stored hash counts as no match.
    func verify(_ password: String, against phc: String?) async throws -> Bool {
        let hasher = self.hasher
        let stored = phc ?? dummyHash
        let matches = try await threads.runIfActive {
            (try? hasher.verify(password: password, against: stored)) ?? false
        }
        return phc != nil && matches
    }

    /// Whether a stored hash should be replaced after a successful sign-in.
    func needsRehash(_ phc: String) -> Bool { hasher.needsRehash(phc) }
}
