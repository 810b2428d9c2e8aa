-- Issue 24: the single-column CHECK constraints of users, which every sign-in writes, move into
-- domains, with the same conditions (docs/database.md, "Column checks in domains").
-- PostgreSQL re-reads and re-plans a table's CHECK constraints from their stored form for every
-- INSERT and UPDATE; a domain's checks are planned once per connection and run only for the
-- columns a statement writes. The check that spans columns (a deleted account) stays on the table.
--
-- Each domain is created without its check and the columns take it (the base type is the
-- column's: no table is rewritten, but a partial index on such a column is built again); then
-- the check is added, which reads the columns once (every value already passed the same table
-- check).
CREATE DOMAIN phone_number AS text;
CREATE DOMAIN email_address AS text;

ALTER TABLE users
    DROP CONSTRAINT users_phone_check,
    DROP CONSTRAINT users_email_check,
    ALTER COLUMN phone TYPE phone_number,
    ALTER COLUMN email TYPE email_address;

ALTER DOMAIN phone_number ADD CONSTRAINT phone_number_check CHECK (VALUE ~ '^\+[1-9][0-9]{7,14}$');
ALTER DOMAIN email_address ADD CONSTRAINT email_address_check
    CHECK (VALUE = lower(VALUE) AND octet_length(VALUE) <= 255);
