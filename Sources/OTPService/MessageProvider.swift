#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One message as a provider sends it.
public struct OutgoingMessage: Sendable {
    /// The outbox message id (stable across retries: receivers deduplicate by it).
    public var id: UUID
    public var verificationID: UUID
    public var channel: Channel
    /// E.164 number or email address.
    public var to: String
    public var code: String
    public var purpose: String
    public var locale: String
    public var createdAt: Date
    /// When the code stops being accepted: a receiver that gets the message later drops it.
    public var expiresAt: Date
    /// The rendered text (and subject, for email).
    public var text: RenderedMessage
    /// The link the email carries besides the code (``LinkToken``), nil when none.
    public var link: String? = nil
}

/// What a provider says when it accepted a message.
public struct ProviderReceipt: Sendable {
    /// The provider's own id of the message (Twilio's `sid`), for delivery reports.
    public var providerMessageID: String?

    public init(providerMessageID: String? = nil) {
        self.providerMessageID = providerMessageID
    }
}

/// A failed send. `retryable` failures (timeouts, connection errors, 429, 5xx) are tried
/// again with backoff; others (a 4xx refusal) go straight to the failover provider or the
/// dead letter.
public struct ProviderError: Error, Sendable, CustomStringConvertible {
    public var retryable: Bool
    /// For operators: no code, no secret, no destination.
    public var message: String

    public init(retryable: Bool, _ message: String) {
        self.retryable = retryable
        self.message = message
    }

    public var description: String { message }
}

/// Sends messages of one or both channels. Adding a provider is one new type conforming to
/// this protocol and one case in ``ProviderKind``.
public protocol MessageProvider: Sendable {
    /// `log`, `webhook`, `twilio`: recorded per message and used as the metrics dimension.
    var name: String { get }
    /// Sends `message`; throws ``ProviderError`` (anything else counts as retryable).
    func send(_ message: OutgoingMessage) async throws -> ProviderReceipt
}

/// The providers of each channel: the primary first, then the failover.
public struct ProviderSet: Sendable {
    public var sms: [any MessageProvider]
    public var email: [any MessageProvider]

    public init(sms: [any MessageProvider], email: [any MessageProvider]) {
        self.sms = sms
        self.email = email
    }

    func providers(for channel: Channel) -> [any MessageProvider] {
        channel == .sms ? sms : email
    }
}
