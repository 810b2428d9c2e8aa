import AuthCrypto
import AuthText
import NIOPosix
import Synchronization

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

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
    /// Hashes running now, and the most that ever ran at once (tests check the bound).
    private let running = Atomic<Int>(0)
    private let peak = Atomic<Int>(0)
    /// Hashes and verifications computed since the start (tests check that a path paid one).
    private let computed = Atomic<Int>(0)
    /// The threads hashes ran on (`pthread_self`) and their names (tests check they are the
    /// pool's own); a thread's name is read once, the first time it hashes.
    private let threadsSeen = Mutex<(ids: Set<UInt>, names: Set<String>)>(([], []))

    var peakConcurrency: Int { peak.load(ordering: .relaxed) }
    var computedCount: Int { computed.load(ordering: .relaxed) }
    var hashingThreadNames: Set<String> { threadsSeen.withLock { $0.names } }

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
    public func hash(_ password: String) async throws -> String {
        let hasher = self.hasher
        return try await threads.runIfActive { try self.counted { try hasher.hash(password: password) } }
    }

    /// Runs `body` on a pool thread, keeping ``peakConcurrency`` and ``hashingThreadNames``.
    private func counted<R>(_ body: () throws -> R) rethrows -> R {
        let now = running.add(1, ordering: .relaxed).newValue
        defer { running.subtract(1, ordering: .relaxed) }
        computed.add(1, ordering: .relaxed)
        var seen = peak.load(ordering: .relaxed)
        while now > seen {
            let (exchanged, current) = peak.compareExchange(expected: seen, desired: now, ordering: .relaxed)
            if exchanged { break }
            seen = current
        }
        // A new thread: its kernel name (NIOThreadPool names its threads; Foundation's `Thread`
        // is not in FoundationEssentials).
        let id = UInt(pthread_self())
        if threadsSeen.withLock({ $0.ids.insert(id).inserted }),
            let comm = try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)
        {
            threadsSeen.withLock { _ = $0.names.insert(comm.trimmingWhitespace()) }
        }
        return try body()
    }

    /// Whether `password` matches `phc`; with `phc` nil, verifies against ``dummyHash`` (always
    /// false) so the caller spends the same time. A malformed stored hash counts as no match.
    public func verify(_ password: String, against phc: String?) async throws -> Bool {
        let hasher = self.hasher
        let stored = phc ?? dummyHash
        let matches = try await threads.runIfActive {
            self.counted { (try? hasher.verify(password: password, against: stored)) ?? false }
        }
        return phc != nil && matches
    }

    /// Whether a stored hash should be replaced after a successful sign-in.
    func needsRehash(_ phc: String) -> Bool { hasher.needsRehash(phc) }
}
