/// The names the system's programs call each other by: the name a caller's TLS certificate
/// (or, in development, its Hello) proves, the `caller_service` it puts in metadata, and what
/// a method's allowed callers list (`AllowedCallersByMethod`). One spelling each, here.
public enum CallerName {
    public static let gateway = "gateway"
    public static let identity = "identity"
    public static let otpDispatch = "otp-dispatch"
    public static let session = "session"
    /// The operators' tool (docs/authctl.md).
    public static let authctl = "authctl"
}
