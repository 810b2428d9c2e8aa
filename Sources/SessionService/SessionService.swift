// The session service: see docs/session.md.
