import AuthAccessToken
import AuthTime

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A refresh token and its session as one snapshot of the database shows them.
struct RefreshTokenState: Sendable, Equatable {
    var sessionID: UUID
    var userID: String
    var amr: [String]
    /// The token's generation in its session (0 for the token Issue returned).
    var tokenGeneration: Int64
    var tokenExpiresAt: Date
    /// When the token was exchanged for its successor (nil while it is the current token).
    var usedAt: Date?
    /// The sealed successor pair (set together with `usedAt`).
    var successorSealed: [UInt8]?
    /// The session's generation: the generation of its current refresh token.
    var sessionGeneration: Int64
    var sessionExpiresAt: Date
    var revokedAt: Date?
    /// The session's Supabase-format claims (nil: our format): every refresh mints the same.
    var supabase: SupabaseClaims? = nil
}

/// What to do with a presented refresh token. A pure function of the snapshot, the time and
/// the grace window, so every rule is tested without a database.
///
/// Because the write that follows ``rotate`` is a compare-and-set on the session's generation
/// (and on `revoked_at IS NULL`), a decision made on a snapshot that has since changed cannot
/// take effect: the service reads again and decides again.
enum RefreshDecision: Equatable {
    /// The current token: issue its successor (generation + 1).
    case rotate
    /// The token whose successor is current, presented again within the grace window: return
    /// that same successor pair.
    case returnSuccessor
    /// A used token outside the grace window (or one whose successor was used too): the
    /// session's tokens are in two hands. Revoke the session.
    case reuseDetected
    /// Refuse without changing anything.
    case reject(SessionError.Code)

    static func decide(_ state: RefreshTokenState, now: Date, graceWindow: Duration) -> RefreshDecision {
        if state.revokedAt != nil { return .reject(.sessionRevoked) }
        if now >= state.sessionExpiresAt { return .reject(.sessionExpired) }
        if state.tokenGeneration == state.sessionGeneration {
            return now >= state.tokenExpiresAt ? .reject(.sessionExpired) : .rotate
        }
        if state.tokenGeneration > state.sessionGeneration {
            // Cannot be stored (generations only grow, tokens are inserted with the CAS).
            return .reject(.invalidRefreshToken)
        }
        if state.tokenGeneration == state.sessionGeneration - 1, let usedAt = state.usedAt,
            state.successorSealed != nil, now.timeIntervalSince(usedAt) <= graceWindow.timeInterval
        {
            return .returnSuccessor
        }
        return .reuseDetected
    }
}
