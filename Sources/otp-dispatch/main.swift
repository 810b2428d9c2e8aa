import AuthServiceRuntime

// The otp-dispatch service. Until its features land it serves only auth.health.v1.Health.
await ServiceMain.run(.otpDispatch)
