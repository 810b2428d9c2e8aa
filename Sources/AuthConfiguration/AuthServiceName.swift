/// The services of the system, with their default ports.
public enum AuthServiceName: String, Sendable, CaseIterable {
    case identity
    case otpDispatch = "otp-dispatch"
    case session
    case gateway

    /// The `AUTH_<NAME>_PORT` variable.
    public var portVariable: String {
        switch self {
        case .identity: "AUTH_IDENTITY_PORT"
        case .otpDispatch: "AUTH_OTP_PORT"
        case .session: "AUTH_SESSION_PORT"
        case .gateway: "AUTH_GATEWAY_PORT"
        }
    }

    /// The `AUTH_<NAME>_ADDRESSES` variable clients read to find this service (none for the
    /// gateway, which only serves HTTP).
    public var addressesVariable: String? {
        switch self {
        case .identity: "AUTH_IDENTITY_ADDRESSES"
        case .otpDispatch: "AUTH_OTP_ADDRESSES"
        case .session: "AUTH_SESSION_ADDRESSES"
        // Nothing calls the gateway over RPC: it serves HTTP only.
        case .gateway: nil
        }
    }

    /// The `AUTH_<NAME>_METRICS_PORT` variable of a backend service's Prometheus port (the
    /// gateway's is `AUTH_GATEWAY_ADMIN_PORT`, read by its own configuration).
    public var metricsPortVariable: String? {
        switch self {
        case .identity: "AUTH_IDENTITY_METRICS_PORT"
        case .otpDispatch: "AUTH_OTP_METRICS_PORT"
        case .session: "AUTH_SESSION_METRICS_PORT"
        case .gateway: nil
        }
    }

    public var defaultPort: Int {
        switch self {
        case .identity: 7101
        case .otpDispatch: 7102
        case .session: 7103
        case .gateway: 8080
        }
    }
}
