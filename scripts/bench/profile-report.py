#!/usr/bin/env python3
"""Top entries of a `perf record -g` profile, per process (docs/benchmarks.md, "Profile").

Usage: profile-report.py PERF_DATA PROCESSES [TOP]

PROCESSES is a file of "pid<TAB>name" lines (the processes to report; samples of other
processes are counted apart). For each process: its share of the samples, the share spent in
the kernel, and its TOP (15) entries by inclusive share (the share of its samples whose stack
holds the function anywhere: what the function and everything it called cost), beside their
self share. Swift symbols are demangled with `swift demangle --simplified`; a PostgreSQL
backend's samples all count for the name given to the postmaster (its children are looked up
in PROCESSES by their parent, see gateway-wrk.sh).
"""
import collections
import re
import subprocess
import sys

# Frames nearly every sample passes through (thread entry points, the event loops' and the
# executors' run loops, thunks, the system-call entry): listed, they would fill the table. The
# kernel's share is its own column instead.
PLUMBING = re.compile(
    r"^(partial apply for |specialized )*("
    r"thunk for |reabstraction thunk|closure #\d+ in (closure #\d+ in )*static ThreadOpsPosix|"
    r"(closure #\d+ in )*static MultiThreadedEventLoopGroup\.setupThreadAndEventLoop|"
    r"SelectableEventLoop\.(run\(\)|_blockingWaitForWork|handleEvent)|closure #\d+ in (closure #\d+ in )*SelectableEventLoop\.run|"
    r"Selector\.whenReady0|(closure #\d+ in )*NIOThreadPool\.(_start|runIfActive)|Result<>\.init\(catching:\)|"
    r"_dispatch_|swift_job_run|swift::runJob|start_thread|clone3?$|__libc_start|_start$|main$|"
    r"PostmasterMain|PostgresMain|ServerLoop|BackendStartup|BackendRun|ExitPostmaster|"
    r"entry_SYSCALL|do_syscall_64|\[unknown\])"
)


def samples(perf_data):
    """Yields (pid, [(symbol, dso), ...] innermost first) for every sample."""
    script = subprocess.Popen(
        ["perf", "script", "-i", perf_data, "-F", "pid,ip,sym,dso", "--no-inline"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        errors="replace",
    )
    pid, stack = None, []
    for line in script.stdout:
        line = line.rstrip("\n")
        if not line.strip():
            if pid is not None:
                yield pid, stack
            pid, stack = None, []
        elif pid is None:
            pid = int(line.split()[0])
        else:
            parts = line.strip().split(None, 1)
            rest = parts[1] if len(parts) > 1 else "[unknown]"
            dso = ""
            if rest.endswith(")") and " (" in rest:
                rest, dso = rest.rsplit(" (", 1)
                dso = dso[:-1]
            stack.append((rest.split("+0x")[0], dso))
    if pid is not None:
        yield pid, stack
    script.wait()


def demangled(symbols):
    names = sorted(symbols)
    try:
        output = subprocess.run(
            ["swift", "demangle", "--simplified", "--compact"],
            input="\n".join(names) + "\n",
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split("\n")
    except (OSError, subprocess.CalledProcessError):
        return {name: name for name in names}
    return {name: (output[i] if i < len(output) and output[i] else name) for i, name in enumerate(names)}


def short(symbol, width=110):
    symbol = symbol.replace(" (in ", " (").split(" + 0x")[0]
    return symbol if len(symbol) <= width else symbol[: width - 1] + "…"


def main():
    perf_data, processes_file = sys.argv[1], sys.argv[2]
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 15
    name_of = {}
    for line in open(processes_file):
        if line.strip():
            pid, name = line.rstrip("\n").split("\t", 1)
            name_of[int(pid)] = name
    total = collections.Counter()
    kernel = collections.Counter()
    inclusive = collections.defaultdict(collections.Counter)
    self_time = collections.defaultdict(collections.Counter)
    others = 0
    for pid, stack in samples(perf_data):
        name = name_of.get(pid)
        if name is None:
            others += 1
            continue
        total[name] += 1
        if not stack:
            continue
        symbols = [symbol for symbol, _ in stack]
        if stack[0][1].startswith("[kernel"):
            kernel[name] += 1
        self_time[name][symbols[0]] += 1
        for symbol in set(symbols):
            inclusive[name][symbol] += 1
    everything = sum(total.values())
    if everything == 0:
        print("no samples of the given processes")
        return 1
    names = demangled({symbol for name in total for symbol in inclusive[name]})
    print("| process | share of the samples | of which in the kernel | samples |")
    print("|---|---:|---:|---:|")
    for name, count in total.most_common():
        print("| %s | %.1f %% | %.0f %% | %d |" % (name, 100 * count / everything, 100 * kernel[name] / count, count))
    print("\n(%d samples of the named processes; %d of others left out. Below, each process's top entries" % (everything, others))
    print("by inclusive share, leaving out the frames nearly every sample passes through: thread entry")
    print("points, the event loops' and executors' run loops, thunks, the system-call entry.)")
    for name, count in total.most_common():
        print("\n#### %s (%d samples)\n" % (name, count))
        print("| # | function | inclusive | self |")
        print("|---:|---|---:|---:|")
        entries = [
            (symbol, hits)
            for symbol, hits in inclusive[name].most_common()
            if not PLUMBING.match(names.get(symbol, symbol))
        ][:top]
        for rank, (symbol, hits) in enumerate(entries, 1):
            label = short(names.get(symbol, symbol)).replace("|", "\\|")
            print(
                "| %d | `%s` | %.1f %% | %.1f %% |"
                % (rank, label, 100 * hits / count, 100 * self_time[name][symbol] / count)
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
