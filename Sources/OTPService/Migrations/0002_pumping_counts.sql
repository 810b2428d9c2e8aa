-- The SMS-pumping guard's figures per calling code and minute (docs/otp.md). Counting the last
-- hour's verifications of a calling code on every start read a number of rows that grows with
-- the traffic (at 500 sign-ins/s to one country: 1.8 million per start); these counters keep it
-- at most 61 minutes x 4 shards. A start adds to `started` in its minute, a right code to
-- `verified` in the minute its verification started, so both leave the hour together. `shard`
-- (random, 0-3) spreads concurrent starts to one calling code over four rows, since each start
-- holds its row's lock until it commits.
CREATE TABLE pumping_counts (
    calling_code text NOT NULL,
    minute timestamptz NOT NULL,
    shard smallint NOT NULL CHECK (shard BETWEEN 0 AND 3),
    started integer NOT NULL DEFAULT 0 CHECK (started >= 0),
    verified integer NOT NULL DEFAULT 0 CHECK (verified >= 0),
    PRIMARY KEY (calling_code, minute, shard)
);

-- The last hour of an existing installation, so the guard does not start from zero.
INSERT INTO pumping_counts (calling_code, minute, shard, started, verified)
SELECT calling_code, to_timestamp(floor(extract(epoch FROM created_at) / 60) * 60), 0,
    count(*), count(*) FILTER (WHERE status = 'verified')
FROM verifications
WHERE channel = 'sms' AND NOT test_destination AND created_at > now() - interval '61 minutes'
GROUP BY 1, 2;

-- Only the old count used it.
DROP INDEX verifications_calling_code_created_idx;
