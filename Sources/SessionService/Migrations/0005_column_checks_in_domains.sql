-- Issue 24: the single-column CHECK constraints of the tables a sign-in and a refresh write move
-- into domains, with the same conditions (docs/database.md, "Column checks in domains").
-- PostgreSQL re-reads and re-plans a table's CHECK constraints from their stored form for every
-- INSERT and UPDATE; a domain's checks are planned once per connection and run only for the
-- columns a statement writes. The checks that span columns stay on the tables.
--
-- Each domain is created without its check and the columns take it (the base type is the
-- column's: no table is rewritten, but a partial index on such a column is built again); then
-- the check is added, which reads the columns once (every value already passed the same table
-- check).
CREATE DOMAIN user_id_text AS text;
CREATE DOMAIN amr_list AS text[];
CREATE DOMAIN generation_number AS bigint;
CREATE DOMAIN token_format_name AS text;
CREATE DOMAIN claims_email_text AS text;
CREATE DOMAIN claims_phone_text AS text;
CREATE DOMAIN sha256_digest AS bytea;

-- The view reads refresh_tokens' columns: a column's type cannot change under it.
DROP VIEW refresh_token_history;

ALTER TABLE sessions
    DROP CONSTRAINT sessions_user_id_check,
    DROP CONSTRAINT sessions_amr_check,
    DROP CONSTRAINT sessions_generation_check,
    DROP CONSTRAINT sessions_token_format_check,
    DROP CONSTRAINT sessions_claims_email_check,
    DROP CONSTRAINT sessions_claims_phone_check,
    ALTER COLUMN user_id TYPE user_id_text,
    ALTER COLUMN amr TYPE amr_list,
    ALTER COLUMN generation TYPE generation_number,
    ALTER COLUMN token_format TYPE token_format_name,
    ALTER COLUMN claims_email TYPE claims_email_text,
    ALTER COLUMN claims_phone TYPE claims_phone_text;

ALTER TABLE refresh_tokens
    DROP CONSTRAINT refresh_tokens_token_hash_check,
    DROP CONSTRAINT refresh_tokens_generation_check,
    ALTER COLUMN token_hash TYPE sha256_digest,
    ALTER COLUMN generation TYPE generation_number;

ALTER DOMAIN user_id_text ADD CONSTRAINT user_id_text_check CHECK (octet_length(VALUE) BETWEEN 1 AND 128);
ALTER DOMAIN amr_list ADD CONSTRAINT amr_list_check CHECK (cardinality(VALUE) BETWEEN 1 AND 8);
ALTER DOMAIN generation_number ADD CONSTRAINT generation_number_check CHECK (VALUE >= 0);
ALTER DOMAIN token_format_name ADD CONSTRAINT token_format_name_check CHECK (VALUE IN ('standard', 'supabase'));
ALTER DOMAIN claims_email_text ADD CONSTRAINT claims_email_text_check CHECK (octet_length(VALUE) <= 320);
ALTER DOMAIN claims_phone_text ADD CONSTRAINT claims_phone_text_check CHECK (octet_length(VALUE) <= 32);
ALTER DOMAIN sha256_digest ADD CONSTRAINT sha256_digest_check CHECK (octet_length(VALUE) = 32);

CREATE VIEW refresh_token_history AS
SELECT t.token_hash, t.session_id, t.generation, t.issued_at, t.expires_at,
    successor.issued_at AS used_at, successor.token_hash AS successor_hash
FROM refresh_tokens t
LEFT JOIN refresh_tokens successor
    ON successor.session_id = t.session_id AND successor.generation = t.generation + 1;
