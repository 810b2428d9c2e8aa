-- Replaced by the session schema migrations.
SELECT 1;
