import ArgumentParser
import AuthAPI
import AuthConfiguration
import AuthProtobuf

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension AuthCtl {
    struct OTP: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "otp",
            abstract: "Reads and acts on the otp-dispatch service's state.",
            subcommands: [Status.self, Unlock.self]
        )

        struct Unlock: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Lifts a destination's lock (403 factor_locked, or the 15-minute lock).",
                discussion: """
                    Forgets the destination's wrong codes (docs/otp.md, Attempts and locks). Prints whether \
                    the consecutive-failure limit had locked it.
                    """
            )

            @OptionGroup var target: ServiceTargetOptions

            @Argument(help: "The phone number (E.164) or email address.")
            var destination: String

            func run() async throws {
                let response = try await target.call(defaultServer: "otp-dispatch") { client in
                    try await Auth_Otp_V1_OTP.Client(wrapping: client)
                        .unlockDestination(Auth_Otp_V1_UnlockDestinationRequest(destination: destination))
                }
                print(
                    response.wasLocked
                        ? "unlocked: the destination was locked (factor_locked)"
                        : "cleared: the destination was not locked"
                )
            }
        }

        struct Status: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Shows where a verification's code message is (queued, sent, delivered, failed).",
                discussion:
                    "Answers why a user got no code: the provider, the attempts and the last error (docs/otp.md)."
            )

            @OptionGroup var target: ServiceTargetOptions

            @Argument(help: "The verification id Start returned.")
            var verificationID: String

            func run() async throws {
                let response = try await target.call(defaultServer: "otp-dispatch") { client in
                    try await Auth_Otp_V1_OTP.Client(wrapping: client)
                        .getDeliveryStatus(Auth_Otp_V1_GetDeliveryStatusRequest(verificationID: verificationID))
                }
                let state: String =
                    switch response.state {
                    case .queued: "queued"
                    case .sent: "sent"
                    case .delivered: "delivered"
                    case .failed: "failed"
                    case .notSentTestDestination: "not sent (test destination)"
                    default: "unknown"
                    }
                let channel = response.channel == .sms ? "sms" : "email"
                var line = "\(state): \(channel) to \(response.maskedDestination)"
                if !response.provider.isEmpty { line += " via \(response.provider)" }
                line += ", \(response.attempts) attempt(s), \(response.messages) message(s)"
                if response.updatedAt > 0 {
                    line +=
                        ", updated \(Date(timeIntervalSince1970: TimeInterval(response.updatedAt)).ISO8601Format())"
                }
                print(line)
                if !response.lastError.isEmpty { print("last error: \(response.lastError)") }
            }
        }
    }
}
