-- Keeps a refresh to one HOT update of the session row and one insert (docs/session.md,
-- "Performance").
--
-- 1. A used token is no longer updated in place. Its successor's row (same session, next
--    generation) is the mark: it is inserted in the same statement that advances the session's
--    generation, so "used" and "has a successor" cannot disagree. The successor pair, sealed
--    under a key derived from the predecessor token, moves to the successor's row.
-- 2. refresh_expires_at changes on every refresh: with an index on it no update of a session
--    could be HOT. Clean-up uses the immutable expires_at and a partial index on revoked_at.

ALTER TABLE refresh_tokens
    DROP COLUMN used_at,
    DROP COLUMN successor_hash,
    DROP COLUMN successor_sealed,
    -- The pair this row's token and access token form, sealed for the holder of the previous
    -- generation's token (NULL for generation 0).
    ADD COLUMN sealed_for_predecessor bytea,
    ADD CHECK ((generation = 0) = (sealed_for_predecessor IS NULL));

ALTER TABLE refresh_tokens SET (fillfactor = 100);

DROP INDEX sessions_refresh_expires_at_idx;
CREATE INDEX sessions_expires_at_idx ON sessions (expires_at);
CREATE INDEX sessions_revoked_at_idx ON sessions (revoked_at) WHERE revoked_at IS NOT NULL;

-- Each token with when it was used and what replaced it, for people and audits.
CREATE VIEW refresh_token_history AS
SELECT t.token_hash, t.session_id, t.generation, t.issued_at, t.expires_at,
    successor.issued_at AS used_at, successor.token_hash AS successor_hash
FROM refresh_tokens t
LEFT JOIN refresh_tokens successor
    ON successor.session_id = t.session_id AND successor.generation = t.generation + 1;
