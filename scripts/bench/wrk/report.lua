-- Shared by every wrk run of scripts/bench/gateway-wrk.sh (prepended to each script): each
-- thread's number in the global `id` (0, 1, …), and one machine-readable line at the end,
-- latency in microseconds.
--   WRK_RESULT <requests/s> <p50 µs> <p99 µs> <HTTP status ≥ 400> <socket errors> <requests> <p99.9 µs> <max µs>
local thread_count = 0

function setup(thread)
    thread:set("id", thread_count)
    thread_count = thread_count + 1
end

function done(summary, latency, requests)
    local e = summary.errors
    io.write(string.format("WRK_RESULT %.1f %d %d %d %d %d %d %d\n",
        summary.requests / (summary.duration / 1e6),
        latency:percentile(50), latency:percentile(99),
        e.status, e.connect + e.read + e.write + e.timeout, summary.requests,
        latency:percentile(99.9), latency.max))
end
