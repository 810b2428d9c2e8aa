#!/usr/bin/env python3
"""The figures behind the capacity estimate in docs/deployment.md.

Runs the services as production does (release builds, each replica its own process, all of them
through a PgBouncer in transaction mode in front of PostgreSQL 15; migrations and LISTEN over
the direct URL), drives each RPC call of a sign-in and a refresh with `authctl bench`, and
reports calls/s, latency and the CPU each call cost per component: the service processes,
the PostgreSQL server (postmaster and all its children), PgBouncer, and authctl itself.
CPU comes from /proc (utime + stime), so it holds when other work shares the cores; calls/s by
wall clock does not.

Usage (from the repository root; Debian's pgbouncer and PostgreSQL installed, e.g. by
scripts/test.sh):

    scripts/bench/replicas-capacity.py [--seconds 10] [--concurrency 16] [--replicas 1] [--pool-size 20]

It starts its own cluster in .data/pg-bench (scripts/postgres.sh), a database of its own
(dropped at the end), a PgBouncer on a free loopback port, and stops everything it started.
"""
import argparse
import base64
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TICK = os.sysconf("SC_CLK_TCK")
TEST_EMAIL, TEST_CODE = "capacity-review@example.com", "123456"


def cpu_seconds(pids):
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total / TICK


def children(pid):
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def psql(url, sql):
    return subprocess.run(["psql", url, "-Atqc", sql], check=True, capture_output=True, text=True).stdout.strip()


def wait_for(path, pattern, process, seconds=120):
    deadline = time.time() + seconds
    while time.time() < deadline:
        with open(path, errors="replace") as f:
            match = re.search(pattern, f.read())
        if match:
            return match
        if process.poll() is not None:
            break
        time.sleep(0.1)
    sys.exit(f"{path} never matched /{pattern}/:\n" + open(path, errors="replace").read()[-3000:])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--pool-size", type=int, default=20, help="PgBouncer server connections")
    parser.add_argument("--bin", default=os.path.join(ROOT, ".build/release"))
    args = parser.parse_args()

    base = subprocess.run(
        [os.path.join(ROOT, "scripts/postgres.sh"), "start", os.path.join(ROOT, ".data/pg-bench")],
        check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    settings = dict(pair.split("=", 1) for pair in base.split())
    database = "capacity_" + uuid.uuid4().hex[:12]
    psql(base, f"CREATE DATABASE {database}")
    direct = base.replace("dbname=auth", f"dbname={database}")
    # The services send no SET behind a transaction pooler (docs/database.md).
    psql(direct, f"ALTER DATABASE {database} SET statement_timeout = '5s'")
    data_directory = psql(direct, "SHOW data_directory")
    with open(os.path.join(data_directory, "postmaster.pid")) as f:
        postmaster = int(f.readline())

    work = tempfile.mkdtemp(prefix="auth-capacity-")
    os.chmod(work, 0o755)
    processes = []
    try:
        port = free_port()
        with open(f"{work}/userlist.txt", "w") as f:
            f.write(f'"{settings["user"]}" ""\n')
        with open(f"{work}/pgbouncer.ini", "w") as f:
            f.write(f"""[databases]
{database} = host={settings["host"]} port={settings["port"]} dbname={database}
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {work}/userlist.txt
pool_mode = transaction
default_pool_size = {args.pool_size}
max_db_connections = {args.pool_size}
reserve_pool_size = 0
max_client_conn = 1000
server_reset_query =
ignore_startup_parameters = extra_float_digits
""")
        log = open(f"{work}/pgbouncer.log", "w")
        bouncer = subprocess.Popen(
            ["/usr/sbin/pgbouncer"] + (["-u", "nobody"] if os.getuid() == 0 else []) + [f"{work}/pgbouncer.ini"],
            stdout=log, stderr=subprocess.STDOUT)
        processes.append(bouncer)
        wait_for(f"{work}/pgbouncer.log", "process up", bouncer)
        pooled = f"host=127.0.0.1 port={port} dbname={database} user={settings['user']}"

        secret = base64.b64encode(os.urandom(32)).decode()
        common = {
            "AUTH_RPC_SECRET": secret, "AUTH_DATABASE_URL": pooled, "AUTH_DB_POOLER": "transaction",
            "AUTH_DATABASE_DIRECT_URL": direct, "AUTH_LOG_LEVEL": "info",
        }
        extra = {
            "identity": {"AUTH_IDENTITY_PORT": "0"},
            "otp-dispatch": {
                "AUTH_OTP_PORT": "0", "AUTH_OTP_SECRET": base64.b64encode(os.urandom(32)).decode(),
                "AUTH_OTP_STARTS_PER_IP_PER_HOUR": "1000000", "AUTH_OTP_EMAIL_PROVIDER": "log",
                "AUTH_OTP_TEST_DESTINATIONS": f"{TEST_EMAIL}={TEST_CODE}",
            },
            "session": {"AUTH_SESSION_PORT": "0", "AUTH_MASTER_KEY": base64.b64encode(os.urandom(32)).decode()},
        }
        service_pids, addresses = {}, {}
        for service in extra:
            ports = []
            for replica in range(args.replicas):
                path = f"{work}/{service}-{replica}.log"
                environment = {k: v for k, v in os.environ.items() if not k.startswith("AUTH_")}
                environment.update(common)
                environment.update(extra[service])
                process = subprocess.Popen([os.path.join(args.bin, service)], env=environment,
                                           stdout=open(path, "w"), stderr=subprocess.STDOUT)
                processes.append(process)
                service_pids.setdefault(service, []).append(process.pid)
                ports.append(wait_for(path, r"port=(\d+)[^\n]*RPC server listening", process).group(1))
            addresses[service] = ",".join(f"127.0.0.1:{p}" for p in ports)

        def bench(service, method, template, options, measure=True):
            command = [os.path.join(args.bin, "authctl"), "bench", addresses[service], method, template,
                       "--caller", "gateway", "--json", "--concurrency", str(args.concurrency)] + options
            database_pids = [postmaster] + children(postmaster)
            before = (cpu_seconds(service_pids[service]), cpu_seconds(database_pids), cpu_seconds([bouncer.pid]),
                      os.times().children_user + os.times().children_system)
            result = subprocess.run(command, capture_output=True, text=True,
                                    env=dict(os.environ, AUTH_RPC_SECRET=secret))
            after = (cpu_seconds(service_pids[service]), cpu_seconds(database_pids), cpu_seconds([bouncer.pid]),
                     os.times().children_user + os.times().children_system)
            if result.returncode != 0:
                sys.exit(f"authctl bench failed:\n{result.stdout}\n{result.stderr}")
            report = json.loads(result.stdout)
            not_ok = [s for s in report["statuses"] if s["code"] != "OK"]
            if not_ok:
                sys.exit(f"{method}: not every call was OK: {report['statuses']}")
            if measure:
                calls = report["calls"]
                cost = [(a - b) / calls * 1e6 for a, b in zip(after, before)]
                latency = report["latency_us"]
                ms = lambda us: f"{us / 1000:.2f} ms"
                print(f"| {method.split('/')[-1]} | {args.concurrency} | {report['calls_per_second']:,.0f} | "
                      f"{ms(latency['p50'])} | {ms(latency['p99'])} | {cost[0]:.0f} µs | {cost[1]:.0f} µs | "
                      f"{cost[2]:.0f} µs | {cost[3]:.0f} µs | {sum(cost[:3]):.0f} µs |", flush=True)
            return report

        print(f"{args.replicas} replica(s) per service, PgBouncer pool {args.pool_size}, "
              f"{args.concurrency} in flight, {args.seconds:g} s per row (after 1 s warm-up)\n")
        print("| call | in flight | calls/s | p50 | p99 | CPU/call: service | PostgreSQL | PgBouncer | authctl | server side |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        run = ["--duration", str(args.seconds), "--warmup", "1"]
        bench("otp-dispatch", "auth.otp.v1.OTP/Start",
              '{"destination": "{{email}}", "purpose": "PURPOSE_LOGIN", "client_ip": "{{ipv4}}"}', run)
        # Check needs codes: verifications of the fixed test destination, started first (unmeasured).
        started = f"{work}/started.jsonl"
        total = max(1000, int(args.seconds * 1500))
        bench("otp-dispatch", "auth.otp.v1.OTP/Start",
              f'{{"destination": "{TEST_EMAIL}", "purpose": "PURPOSE_LOGIN", "client_ip": "{{{{ipv4}}}}"}}',
              ["--total", str(total), "--warmup", "0", "--record", started], measure=False)
        bench("otp-dispatch", "auth.otp.v1.OTP/Check",
              f'{{"verification_id": "{{{{input.verification_id}}}}", "code": "{TEST_CODE}", "client_ip": "{{{{ipv4}}}}"}}',
              ["--inputs", started, "--total", str(total), "--warmup", "0"])
        bench("identity", "auth.identity.v1.Identity/FindOrCreateByContact",
              '{"email": "{{email}}", "client_ip": "{{ipv4}}"}', run)
        issued = f"{work}/issued.jsonl"
        bench("session", "auth.session.v1.Session/Issue",
              '{"user_id": "{{uuid}}", "amr": ["otp_email"], "client_ip": "{{ipv4}}"}', run + ["--record", issued])
        with open(issued) as f:
            sessions = sum(1 for _ in f)
        bench("session", "auth.session.v1.Session/Refresh",
              '{"refresh_token": "{{input.tokens.refresh_token}}", "client_ip": "{{ipv4}}"}',
              ["--inputs", issued, "--total", str(sessions), "--warmup", "0"])
    finally:
        for process in reversed(processes):
            process.terminate()
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
        psql(base, f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
        subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
