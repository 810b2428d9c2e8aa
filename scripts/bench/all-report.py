#!/usr/bin/env python3
"""The table of scripts/bench/all.sh, and runs of it side by side.

    all-report.py table RAW_DIR OUT.md OUT.tsv   the table of one run from the outputs all.sh left
                                                 in RAW_DIR; printed, and written to OUT.md, its rows
                                                 to OUT.tsv
    all-report.py compare RUN.tsv...             several runs' OUT.tsv side by side (one column
                                                 each), the latency rows also over all of them
"""
import csv
import glob
import os
import re
import signal
import statistics
import sys


def count(value):
    return "{:,}".format(round(value))


def micros(value):
    return "%.2f ms" % (value / 1000) if value >= 1000 else "%.0f µs" % value


def percent(value):
    return "%.0f %%" % (100 * value)


def times(value):
    return "%.1f×" % value if value < 100 else "%.0f×" % value


def read_tsv(path):
    """The rows of a tab-separated file with a header line, as dicts; [] when it is missing."""
    if not os.path.exists(path):
        return []
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


def number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


class Run:
    """What one all.sh run left in its folder."""

    def __init__(self, raw):
        self.raw = raw
        self.failed = set(open(os.path.join(raw, "failed")).read().split()) if os.path.exists(
            os.path.join(raw, "failed")) else set()

    def result(self, name, measurement, in_flight=None):
        for row in read_tsv(os.path.join(self.raw, name + ".tsv")):
            if row["measurement"] == measurement and (in_flight is None or row["in_flight"] == str(in_flight)):
                return {key: number(value) if key != "measurement" else value for key, value in row.items()}
        return None

    def gateway(self, key):
        for row in read_tsv(os.path.join(self.raw, "gateway.tsv")):
            if row["key"] == key:
                return {k: (v if k in ("key", "label") else number(v)) for k, v in row.items()}
        return None

    def pgbench(self, name):
        """tps, transactions, CPU µs per transaction (pgbench + the whole server), max latency µs."""
        path = os.path.join(self.raw, name + ".out")
        if not os.path.exists(path):
            return None
        text = open(path).read()
        tps = re.search(r"tps = ([0-9.]+) \(without initial connection time\)", text)
        done = re.search(r"number of transactions actually processed: (\d+)", text)
        if not tps or not done:
            return None
        result = {"tps": float(tps.group(1)), "transactions": int(done.group(1))}
        try:
            user, system = open(os.path.join(self.raw, name + ".time")).read().split()[-2:]
            ticks, hz = open(os.path.join(self.raw, name + ".server-ticks")).read().split()
            cpu = float(user) + float(system) + int(ticks) / int(hz)
            result["cpu_us"] = cpu / max(result["transactions"], 1) * 1e6
        except (OSError, ValueError):
            pass
        maximum = None
        for log in glob.glob(os.path.join(self.raw, name + ".[0-9]*")):
            for line in open(log):
                fields = line.split()
                if len(fields) >= 6 and int(fields[1]) > 0:
                    maximum = max(maximum or 0, float(fields[5]))
        result["max_us"] = maximum
        return result


class Table:
    def __init__(self):
        self.rows = []

    def add(self, key, figure, measured="—", reference="—", ratio="—", cpu="—", goal="—", met="—", **values):
        self.rows.append(dict(key=key, figure=figure, measured=measured, reference=reference, ratio=ratio, cpu=cpu,
                              goal=goal, met=met, **values))

    def missing(self, key, figure, why, goal="—"):
        self.add(key, figure, measured="— (%s)" % why, goal=goal)


def verdict(ok):
    return "yes" if ok else "**no**"


def build(run):
    t = Table()
    failed = lambda step: "failed: see %s.log" % step if step in run.failed else "no result"

    # 1. RPC in one process.
    default = {m: run.result("rpc-default", m, 64) for m in ("rpc", "plain echo", "batched echo")}
    inline = {m: run.result("rpc-inline", m, 64) for m in ("rpc", "plain echo", "batched echo")}

    def rpc_rows(key, label, results, goals, step):
        rpc = results["rpc"]
        for echo, goal in zip(("plain echo", "batched echo"), goals):
            figure = "%s vs the %s" % (label, echo)
            reference = results[echo]
            if not rpc or not reference:
                t.missing("%s-vs-%s" % (key, echo.split()[0]), figure, failed(step), goal[0] if goal else "—")
                continue
            ratio = rpc["calls_per_s"] / reference["calls_per_s"]
            t.add("%s-vs-%s" % (key, echo.split()[0]), figure,
                  measured="%s calls/s" % count(rpc["calls_per_s"]),
                  reference="%s: %s calls/s" % (echo, count(reference["calls_per_s"])),
                  ratio=percent(ratio),
                  cpu="%s (echo %s)" % (micros(rpc["cpu_us_per_call"]), micros(reference["cpu_us_per_call"])),
                  goal=goal[0] if goal else "—",
                  met=verdict(ratio >= goal[1]) if goal else "—",
                  value=rpc["calls_per_s"], reference_value=reference["calls_per_s"], ratio_value=ratio,
                  cpu_us=rpc["cpu_us_per_call"])

    rpc_rows("rpc-default", "RPC in one process, 64 B, 64 in flight, default placement (`rpc-benchmark`)", default,
             [("≥ 80 %", 0.80), ("≥ 40 %", 0.40)], "rpc-default")
    rpc_rows("rpc-inline", "same, `--inline-handlers`", inline, [None, None], "rpc-inline")
    figure = "default placement ÷ `--inline-handlers` (RPC calls/s, the two runs above)"
    if default["rpc"] and inline["rpc"]:
        ratio = default["rpc"]["calls_per_s"] / inline["rpc"]["calls_per_s"]
        t.add("rpc-default-vs-inline", figure,
              measured="%s calls/s" % count(default["rpc"]["calls_per_s"]),
              reference="inline: %s calls/s" % count(inline["rpc"]["calls_per_s"]),
              ratio=percent(ratio),
              cpu="%s (inline %s)" % (micros(default["rpc"]["cpu_us_per_call"]),
                                      micros(inline["rpc"]["cpu_us_per_call"])),
              goal="≥ 90 % (within 10 %)", met=verdict(ratio >= 0.90),
              value=default["rpc"]["calls_per_s"], reference_value=inline["rpc"]["calls_per_s"], ratio_value=ratio,
              cpu_us=default["rpc"]["cpu_us_per_call"])
    else:
        t.missing("rpc-default-vs-inline", figure, "no result", "≥ 90 % (within 10 %)")

    # 2. RPC across processes.
    across = run.result("rpc-across", "rpc", 64)
    echo_across = run.result("echo-across", "plain echo", 64)
    figure = "RPC across processes, 64 in flight (`rpc-benchmark --serve` ← `--target`) vs the plain echo across processes"
    if across and echo_across:
        ratio = across["calls_per_s"] / echo_across["calls_per_s"]
        t.add("rpc-across-vs-plain", figure,
              measured="%s calls/s" % count(across["calls_per_s"]),
              reference="plain echo across processes: %s calls/s" % count(echo_across["calls_per_s"]),
              ratio=percent(ratio),
              cpu="%s, both processes (echo %s)" % (micros(across["cpu_us_per_call"]),
                                                    micros(echo_across["cpu_us_per_call"])),
              goal="≥ 70 %", met=verdict(ratio >= 0.70),
              value=across["calls_per_s"], reference_value=echo_across["calls_per_s"], ratio_value=ratio,
              cpu_us=across["cpu_us_per_call"])
    else:
        t.missing("rpc-across-vs-plain", figure, failed("rpc-across" if not across else "echo-across"), "≥ 70 %")
    figure = "same, vs the in-process plain echo (how `docs/benchmarks.md` measured 40–45 %)"
    if across and default["plain echo"]:
        ratio = across["calls_per_s"] / default["plain echo"]["calls_per_s"]
        t.add("rpc-across-vs-inprocess-plain", figure,
              measured="%s calls/s" % count(across["calls_per_s"]),
              reference="in-process plain echo: %s calls/s" % count(default["plain echo"]["calls_per_s"]),
              ratio=percent(ratio), cpu=micros(across["cpu_us_per_call"]), goal="≥ 70 %",
              met=verdict(ratio >= 0.70),
              value=across["calls_per_s"], reference_value=default["plain echo"]["calls_per_s"], ratio_value=ratio,
              cpu_us=across["cpu_us_per_call"])
    else:
        t.missing("rpc-across-vs-inprocess-plain", figure, "no result", "≥ 70 %")

    # 3. Session Refresh beside pgbench.
    refresh = run.result("session", "Refresh", 16)
    before, after = run.pgbench("pgbench-before"), run.pgbench("pgbench-after")
    figure = "session Refresh, 16 in flight (`session-benchmark`) vs `pgbench -M prepared -N -c 16` before and after"
    if refresh and before and after:
        mean = (before["tps"] + after["tps"]) / 2
        ratio = refresh["calls_per_s"] / mean
        pg_cpu = [p["cpu_us"] for p in (before, after) if "cpu_us" in p]
        t.add("session-refresh-vs-pgbench", figure,
              measured="%s refreshes/s" % count(refresh["calls_per_s"]),
              reference="pgbench %s / %s tps (before / after)" % (count(before["tps"]), count(after["tps"])),
              ratio=percent(ratio),
              cpu="%s per refresh (pgbench %s per transaction)" % (
                  micros(refresh["cpu_us_per_call"]),
                  " / ".join(micros(c) for c in pg_cpu) if pg_cpu else "–"),
              goal="≥ 60 %", met=verdict(ratio >= 0.60),
              value=refresh["calls_per_s"], reference_value=mean, ratio_value=ratio,
              cpu_us=refresh["cpu_us_per_call"])
    else:
        t.missing("session-refresh-vs-pgbench", figure,
                  failed("session") if not refresh else "pgbench: no result", "≥ 60 %")

    # 4. Through the gateway: CPU per request against the bare route's.
    bare = run.gateway("bare")
    closed = run.gateway("signins-closed")

    def against_bare(key, gateway_key, figure, unit, goal, limit):
        row = run.gateway(gateway_key)
        if not row or not bare or not bare["system_us"]:
            t.missing(key, figure, failed("gateway-wrk"), goal)
            return
        ratio = row["system_us"] / bare["system_us"]
        t.add(key, figure,
              measured="%s per %s (%s/s)" % (micros(row["system_us"]), unit, count(row["rate"])),
              reference="bare route: %s per request (%s req/s)" % (micros(bare["system_us"]), count(bare["rate"])),
              ratio=times(ratio), cpu="%s (load generator %s)" % (micros(row["system_us"]),
                                                                   micros(row["load_generator_us"])),
              goal=goal, met=verdict(ratio <= limit),
              value=row["system_us"], reference_value=bare["system_us"], ratio_value=ratio,
              cpu_us=row["system_us"])

    against_bare("signin-cpu-vs-bare", "signins-closed",
                 "OTP sign-in (send + code + verify) through the gateway, closed loop (`gateway-wrk.sh`): "
                 "system CPU per sign-in ÷ the bare route's CPU per request", "sign-in", "≤ 60×", 60)
    against_bare("session-cpu-vs-bare", "session", "`GET /v1/session`, CPU per request ÷ bare route", "request",
                 "≤ 12×", 12)
    against_bare("refresh-cpu-vs-bare", "refresh", "`POST /v1/token/refresh`, CPU per request ÷ bare route",
                 "request", "≤ 20×", 20)
    figure = "the sign-in load generator's CPU per sign-in, % of the system's"
    if closed and closed["system_us"]:
        ratio = closed["load_generator_us"] / closed["system_us"]
        t.add("signin-load-generator", figure,
              measured="%s per sign-in" % micros(closed["load_generator_us"]),
              reference="system: %s per sign-in" % micros(closed["system_us"]),
              ratio=percent(ratio), cpu=micros(closed["load_generator_us"]), goal="≤ 5 %",
              met=verdict(ratio <= 0.05),
              value=closed["load_generator_us"], reference_value=closed["system_us"], ratio_value=ratio,
              cpu_us=closed["load_generator_us"])
    else:
        t.missing("signin-load-generator", figure, failed("gateway-wrk"), "≤ 5 %")

    # 5. Delivery in batches.
    default_batch = "16"
    if os.path.exists(os.path.join(run.raw, "otp-default-batch")):
        default_batch = open(os.path.join(run.raw, "otp-default-batch")).read().strip()
    one = run.result("otp-deliver", "deliver batch 1")
    batched = run.result("otp-deliver", "deliver batch %s" % default_batch)
    figure = ("otp-dispatch delivery through the webhook, %s workers (`otp-benchmark`): claim batch %s vs 1"
              % (int(batched["in_flight"]) if batched else "default", default_batch))
    if one and batched:
        ratio = batched["calls_per_s"] / one["calls_per_s"]
        t.add("otp-delivery-batch", figure,
              measured="%s messages/s" % count(batched["calls_per_s"]),
              reference="batch 1: %s messages/s" % count(one["calls_per_s"]),
              ratio=times(ratio),
              cpu="%s per message (batch 1: %s)" % (micros(batched["cpu_us_per_call"]),
                                                   micros(one["cpu_us_per_call"])),
              goal="≥ 4×", met=verdict(ratio >= 4),
              value=batched["calls_per_s"], reference_value=one["calls_per_s"], ratio_value=ratio,
              cpu_us=batched["cpu_us_per_call"])
    else:
        t.missing("otp-delivery-batch", figure, failed("otp-deliver"), "≥ 4×")

    # 6. Latency: p99, p99.9 and max of every row that has them.
    latencies = [
        ("latency-rpc-default", "RPC in one process, default placement", default["rpc"]),
        ("latency-rpc-inline", "RPC in one process, `--inline-handlers`", inline["rpc"]),
        ("latency-rpc-across", "RPC across processes", across),
        ("latency-session-refresh", "session Refresh over RPC, 16 in flight", refresh),
    ]
    for key, label in (("bare", "`GET /health/live`, bare route (wrk)"),
                       ("health", "`GET /health/live`, gateway (wrk)"),
                       ("session", "`GET /v1/session` (wrk)"),
                       ("refresh", "`POST /v1/token/refresh` (wrk)"),
                       ("signins-closed", "OTP sign-in, closed loop"),
                       ("signins-open", "OTP sign-in, open loop at half that rate")):
        row = run.gateway(key)
        latencies.append(("latency-" + key, label, row and {
            "p99_us": row["p99_us"], "p999_us": row["p999_us"], "max_us": row["max_us"]}))
    for key, label, row in latencies:
        figure = "latency, %s: max vs p99" % label
        if not row or not row.get("p99_us") or row.get("max_us") is None:
            t.missing(key, figure, "no result", "max < 10× p99")
            continue
        ratio = row["max_us"] / row["p99_us"]
        t.add(key, figure,
              measured="max %s (p99.9 %s)" % (micros(row["max_us"]),
                                               micros(row["p999_us"]) if row.get("p999_us") is not None else "–"),
              reference="p99 %s" % micros(row["p99_us"]), ratio=times(ratio),
              goal="max < 10× p99 (over 10 runs)", met=verdict(ratio < 10),
              value=row["max_us"], reference_value=row["p99_us"], ratio_value=ratio, p999_us=row.get("p999_us"))
    for name in ("pgbench-before", "pgbench-after"):
        result = run.pgbench(name)
        if result and result.get("max_us") is not None:
            t.add("latency-" + name, "latency, `pgbench` (%s): max" % name.split("-")[1],
                  measured="max %s" % micros(result["max_us"]), reference="(pgbench gives no p99 cheaply)",
                  value=result["max_us"])
    return t


def table_markdown(t):
    lines = ["| figure | measured | reference (same run) | ratio | CPU per op | issue 24 goal | met? |",
             "|---|---:|---:|---:|---:|---|---|"]
    for row in t.rows:
        lines.append("| %s |" % " | ".join(row[k] for k in (
            "figure", "measured", "reference", "ratio", "cpu", "goal", "met")))
    return lines


TSV_FIELDS = ["key", "figure", "value", "reference_value", "ratio_value", "cpu_us", "p999_us", "ratio", "goal",
              "met"]


def command_table(raw, out_md, out_tsv):
    run = Run(raw)
    meta = dict(line.rstrip("\n").split("=", 1) for line in open(os.path.join(raw, "meta.txt")) if "=" in line)
    t = build(run)
    uptime = lambda name: open(os.path.join(raw, name)).read().strip() if os.path.exists(
        os.path.join(raw, name)) else "–"
    dirty = int(meta.get("dirty", "0"))
    out = ["## scripts/bench/all.sh, %s" % meta.get("date", "?"), "",
           "Commit `%s`%s, release build: %s; %s s per row (after 1 s warm-up), %s cores; measured in %s s." % (
               meta.get("commit", "?"),
               " with %d uncommitted tracked file(s)" % dirty if dirty else "",
               meta.get("build", "?"), meta.get("seconds", "?"), meta.get("cores", "?"), meta.get("runtime", "?")),
           "Machine load: before `%s`; after `%s`; scheduler autogroups: %s." % (
               uptime("uptime-before.txt"), uptime("uptime-after.txt"), meta.get("autogroup", "not recorded")),
           ""]
    out += table_markdown(t)
    out += ["",
            "CPU per op: user + system time of every process of the row (benchmark client and server, the "
            "PostgreSQL backends serving it; through the gateway: the four services, PostgreSQL and the bare "
            "process, the load generator apart) divided by the operations; it holds better than the rates when "
            "other work shares the cores. Every ratio compares two figures of this run. Not measured here: gRPC "
            "(`Benchmarks/grpc-comparison/run.sh`, its own package, too long a build), and whether handlers do "
            "CPU work on an event loop."]
    if run.failed:
        out += ["", "**Failed steps:** %s (their logs in `.data/bench-all/%s/`)." % (
            ", ".join(sorted(run.failed)), os.path.basename(raw.rstrip("/")))]
    out += ["", "Commands (from the repository root):", "", "```sh"]
    out += [line.rstrip("\n") for line in open(os.path.join(raw, "commands.txt"))]
    out += ["```"]
    text = "\n".join(out) + "\n"
    sys.stdout.write(text)
    with open(out_md, "w") as handle:
        handle.write(text)
    with open(out_tsv, "w", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t", lineterminator="\n")
        writer.writerow(TSV_FIELDS)
        for row in t.rows:
            writer.writerow([("" if row.get(k) is None else
                              ("%.3f" % row[k] if isinstance(row[k], float) else row[k])) for k in TSV_FIELDS])


def command_compare(paths):
    runs = []
    for path in paths:
        rows = read_tsv(path)
        runs.append((os.path.basename(path)[:-len(".tsv")] if path.endswith(".tsv") else path,
                     {row["key"]: row for row in rows}))
    keys, figures = [], {}
    for _, rows in runs:
        for key, row in rows.items():
            if key not in figures:
                keys.append(key)
                figures[key] = row["figure"]
    print("| figure | goal | %s | over all runs |" % " | ".join(name for name, _ in runs))
    print("|---|---|%s---:|" % ("---:|" * len(runs)))
    for key in keys:
        cells, goal, as_percent = [], "", True
        maxima, p99s, p999s, ratios = [], [], [], []
        for _, rows in runs:
            row = rows.get(key)
            if not row or not row["value"]:
                cells.append("–")
                continue
            goal = row["goal"] or goal
            met = " ✗" if row["met"] == "**no**" else (" ✓" if row["met"] == "yes" else "")
            if key.startswith("latency-"):
                maxima.append(float(row["value"]))
                if row["reference_value"]:
                    p99s.append(float(row["reference_value"]))
                if row["p999_us"]:
                    p999s.append(float(row["p999_us"]))
                cells.append("p99 %s, p99.9 %s, max %s" % (
                    micros(float(row["reference_value"])) if row["reference_value"] else "–",
                    micros(float(row["p999_us"])) if row["p999_us"] else "–", micros(float(row["value"]))))
            else:
                if row["ratio_value"]:
                    ratios.append(float(row["ratio_value"]))
                    as_percent = (row["ratio"] or "").endswith("%")
                cells.append((row["ratio"] or "–") + met)
        if key.startswith("latency-") and maxima:
            summary = "max %s" % micros(max(maxima))
            if p99s:
                worst = max(maxima) / statistics.median(p99s)
                summary += " = %s the median p99%s" % (times(worst), " ✓" if worst < 10 else " ✗")
            if p999s:
                summary += "; p99.9 up to %s" % micros(max(p999s))
        elif ratios:
            show = percent if as_percent else times
            summary = "median %s (%s–%s)" % (show(statistics.median(ratios)), show(min(ratios)), show(max(ratios)))
        else:
            summary = "–"
        print("| %s | %s | %s | %s |" % (figures[key], goal or "—", " | ".join(cells), summary))


def main(argv):
    if len(argv) == 5 and argv[1] == "table":
        command_table(argv[2], argv[3], argv[4])
    elif len(argv) >= 3 and argv[1] == "compare":
        command_compare(argv[2:])
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends it quietly
    sys.exit(main(sys.argv))
