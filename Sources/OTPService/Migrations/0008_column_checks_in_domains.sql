-- Issue 24: the single-column CHECK constraints of the tables a sign-in writes move into
-- domains, with the same conditions (docs/database.md, "Column checks in domains").
-- PostgreSQL re-reads and re-plans a table's CHECK constraints from their stored form for every
-- INSERT and UPDATE; a domain's checks are planned once per connection and run only for the
-- columns a statement writes. The check that spans columns (a message's code) stays on its table.
--
-- Each domain is created without its check and the columns take it (the base type is the
-- column's: no table is rewritten, but a partial index on such a column is built again); then
-- the check is added, which reads the columns once (every value already passed the same table
-- check).
CREATE DOMAIN channel_name AS text;
CREATE DOMAIN destination_text AS text;
CREATE DOMAIN purpose_name AS text;
CREATE DOMAIN code_mac_bytes AS bytea;
CREATE DOMAIN count_number AS integer;
CREATE DOMAIN verification_status AS text;
CREATE DOMAIN subject_text AS text;
CREATE DOMAIN message_state AS text;
CREATE DOMAIN pumping_shard AS smallint;
CREATE DOMAIN limit_kind AS text;

ALTER TABLE verifications
    DROP CONSTRAINT verifications_channel_check,
    DROP CONSTRAINT verifications_destination_check,
    DROP CONSTRAINT verifications_purpose_check,
    DROP CONSTRAINT verifications_code_mac_check,
    DROP CONSTRAINT verifications_resends_check,
    DROP CONSTRAINT verifications_status_check,
    DROP CONSTRAINT verifications_subject_check,
    ALTER COLUMN channel TYPE channel_name,
    ALTER COLUMN destination TYPE destination_text,
    ALTER COLUMN purpose TYPE purpose_name,
    ALTER COLUMN code_mac TYPE code_mac_bytes,
    ALTER COLUMN resends TYPE count_number,
    ALTER COLUMN status TYPE verification_status,
    ALTER COLUMN subject TYPE subject_text;

ALTER TABLE messages
    DROP CONSTRAINT messages_channel_check,
    DROP CONSTRAINT messages_state_check,
    ALTER COLUMN channel TYPE channel_name,
    ALTER COLUMN state TYPE message_state;

ALTER TABLE pumping_counts
    DROP CONSTRAINT pumping_counts_shard_check,
    DROP CONSTRAINT pumping_counts_started_check,
    DROP CONSTRAINT pumping_counts_verified_check,
    ALTER COLUMN shard TYPE pumping_shard,
    ALTER COLUMN started TYPE count_number,
    ALTER COLUMN verified TYPE count_number;

ALTER TABLE limit_events
    DROP CONSTRAINT limit_events_kind_check,
    ALTER COLUMN kind TYPE limit_kind;

ALTER DOMAIN channel_name ADD CONSTRAINT channel_name_check CHECK (VALUE IN ('sms', 'email'));
ALTER DOMAIN destination_text ADD CONSTRAINT destination_text_check CHECK (octet_length(VALUE) BETWEEN 1 AND 320);
ALTER DOMAIN purpose_name ADD CONSTRAINT purpose_name_check CHECK (VALUE IN ('login', 'signup', 'verify',
    'password_reset', 'change_contact', 'contact_changed', 'signup_attempted'));
ALTER DOMAIN code_mac_bytes ADD CONSTRAINT code_mac_bytes_check CHECK (octet_length(VALUE) = 32);
ALTER DOMAIN count_number ADD CONSTRAINT count_number_check CHECK (VALUE >= 0);
ALTER DOMAIN verification_status ADD CONSTRAINT verification_status_check
    CHECK (VALUE IN ('pending', 'verified', 'failed'));
ALTER DOMAIN subject_text ADD CONSTRAINT subject_text_check CHECK (octet_length(VALUE) <= 128);
ALTER DOMAIN message_state ADD CONSTRAINT message_state_check
    CHECK (VALUE IN ('queued', 'sending', 'sent', 'delivered', 'failed', 'superseded'));
ALTER DOMAIN pumping_shard ADD CONSTRAINT pumping_shard_check CHECK (VALUE BETWEEN 0 AND 3);
ALTER DOMAIN limit_kind ADD CONSTRAINT limit_kind_check
    CHECK (VALUE IN ('start_destination', 'start_ip', 'resend', 'wrong_code'));
