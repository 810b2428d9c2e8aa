import ArgumentParser
import AuthAPI
import AuthConfiguration
import AuthProtobuf

extension AuthCtl {
    struct Users: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "users",
            abstract: "Acts on the identity service's accounts.",
            subcommands: [Unlock.self]
        )

        struct Unlock: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Lifts an email's password lock (403 factor_locked, or the 15-minute lock).",
                discussion: """
                    Forgets the email's counted password failures, as a completed password reset does \
                    (docs/identity.md, Passwords). Prints whether the consecutive-failure limit had locked it.
                    """
            )

            @OptionGroup var target: ServiceTargetOptions

            @Argument(help: "The email address whose password sign-in is locked.")
            var email: String

            func run() async throws {
                let response = try await target.call(defaultServer: "identity") { client in
                    try await Auth_Identity_V1_Identity.Client(wrapping: client)
                        .unlockPassword(Auth_Identity_V1_UnlockPasswordRequest(email: email))
                }
                print(
                    response.wasLocked
                        ? "unlocked: the password was locked (factor_locked)"
                        : "cleared: the password was not locked"
                )
            }
        }
    }
}
