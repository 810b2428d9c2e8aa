// AuthTestSupport
