#!/usr/bin/env bash
# Manages a throwaway PostgreSQL 15 cluster for development and tests.
#
#   scripts/postgres.sh start DIR             install packages if missing, initdb if needed, start,
#                                             create database "auth"; last stdout line = conninfo
#   scripts/postgres.sh stop DIR [MODE]       stop it (MODE: fast (default), immediate, smart)
#   scripts/postgres.sh url DIR               print the conninfo of the running cluster
#   scripts/postgres.sh status DIR            exit 0 if running, 3 if not
#   scripts/postgres.sh destroy DIR           stop (immediate) and delete DIR
#   scripts/postgres.sh standby PRIMARY DIR   a streaming standby of the running cluster PRIMARY in
#                                             DIR (pg_basebackup), started; PRIMARY then commits
#                                             synchronously (waits for it); last line = conninfo
#   scripts/postgres.sh promote DIR           promote the standby in DIR to a primary
#   scripts/postgres.sh crash DIR             SIGKILL the server in DIR (a lost machine, for tests)
#
# Layout of DIR (git-ignored, e.g. .data/pg-test): data/ (PGDATA), run/ (unix socket),
# port (the TCP port, reused on the next start when it is still free), postgres.log. When run as
# root and the postgres user cannot reach DIR (a checkout under /root), these live in
# /var/tmp/auth-postgres/<hash of DIR> instead, linked from DIR/cluster.
#
# POSTGRES_EXTRA_OPTIONS, when set, is appended to the server's options at start (e.g.
# "-c shared_preload_libraries=pg_stat_statements" for scripts/bench/gateway-wrk.sh).
#
# The cluster is for tests only: trust authentication on its unix socket and 127.0.0.1, and
# fsync/synchronous_commit/full_page_writes off (a crash of the machine may lose or corrupt it,
# which is fine for throwaway data; a killed server still recovers). Never use it for real data.
#
# As root (CI, fresh Debian bookworm) the server runs as the "postgres" user, since initdb and
# postgres refuse to run as root; DIR is chown'ed to that user.
set -euo pipefail

PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
DATABASE=auth
SUPERUSER=postgres

die() { echo "postgres.sh: $*" >&2; exit 1; }
log() { echo "postgres.sh: $*" >&2; }

usage() {
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

ensure_packages() {
    local missing=()
    [[ -x "$PG_BIN/initdb" && -x "$PG_BIN/pg_ctl" ]] || missing+=(postgresql)
    local package
    for package in libpq-dev libssl-dev libprotobuf-c-dev protobuf-c-compiler; do
        local status
        status=$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null || true)
        [[ "$status" == "install ok installed" ]] || missing+=("$package")
    done
    ((${#missing[@]} == 0)) && return 0
    [[ $(id -u) == 0 ]] || die "missing packages (${missing[*]}); run as root or: sudo apt-get install -y ${missing[*]}"
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update >&2
    apt-get install -y --no-install-recommends postgresql libpq-dev libssl-dev libprotobuf-c-dev \
        protobuf-c-compiler >&2
    [[ -x "$PG_BIN/initdb" ]] || die "$PG_BIN/initdb still missing after installing postgresql"
}

# Runs a command as the cluster's owner: the postgres user when we are root, else ourselves.
as_owner() {
    if [[ $(id -u) == 0 ]]; then
        (cd / && runuser -u postgres -- "$@")
    else
        "$@"
    fi
}

# Sets DIR (the folder given) and BASE (where the cluster lives: DIR itself, unless we are root
# and the postgres user cannot reach DIR, e.g. a checkout under /root; then a folder under
# /var/tmp named after DIR's path, linked from DIR/cluster).
resolve_dir() {
    [[ -n "${1:-}" ]] || usage
    mkdir -p "$1"
    DIR=$(cd "$1" && pwd -P)
    BASE="$DIR"
    if [[ $(id -u) == 0 ]] && id postgres >/dev/null 2>&1 && ! as_owner test -x "$DIR"; then
        BASE="/var/tmp/auth-postgres/$(printf '%s' "$DIR" | sha256sum | cut -c1-16)"
        mkdir -p "$BASE"
        ln -sfn "$BASE" "$DIR/cluster"
    fi
    DATA="$BASE/data"
    RUN="$BASE/run"
    PORT_FILE="$BASE/port"
    LOG_FILE="$BASE/postgres.log"
}

# Serializes concurrent invocations on the same DIR (e.g. two test processes starting at once).
lock_dir() {
    exec 9>"$DIR/.lock"
    flock -w 120 9 || die "timed out waiting for the lock on $DIR"
}

conninfo() { echo "host=127.0.0.1 port=$(cat "$PORT_FILE") dbname=$DATABASE user=$SUPERUSER"; }

# True when the postmaster recorded in postmaster.pid is alive and really serves our data dir.
# A pid file left by a killed run (or by a machine restart, where the pid now belongs to some
# other process) does not count.
is_running() {
    [[ -f "$DATA/postmaster.pid" ]] || return 1
    local pid
    pid=$(head -n 1 "$DATA/postmaster.pid" 2>/dev/null || true)
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    [[ -r "/proc/$pid/cmdline" ]] || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$DATA"
}

remove_stale_pid() {
    if [[ -f "$DATA/postmaster.pid" ]] && ! is_running; then
        log "removing stale postmaster.pid (no server of this cluster is running)"
        rm -f "$DATA/postmaster.pid" "$RUN"/.s.PGSQL.*.lock "$RUN"/.s.PGSQL.*
    fi
}

port_in_use() {
    # A successful connect means something listens there.
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

pick_port() {
    local port
    if [[ -f "$PORT_FILE" ]]; then
        port=$(cat "$PORT_FILE")
        if [[ "$port" =~ ^[0-9]+$ ]] && ! port_in_use "$port"; then
            echo "$port"
            return
        fi
    fi
    local attempt
    for attempt in $(seq 1 50); do
        port=$((20000 + RANDOM % 40000))
        if ! port_in_use "$port"; then
            echo "$port"
            return
        fi
    done
    die "no free TCP port found on 127.0.0.1"
}

init_cluster() {
    [[ -f "$DATA/PG_VERSION" ]] && return 0
    log "initializing a new cluster in $DATA"
    rm -rf "$DATA"
    mkdir -p "$DATA" "$RUN"
    if [[ $(id -u) == 0 ]]; then chown -R postgres:postgres "$BASE"; fi
    as_owner test -w "$DATA" || die "the postgres user cannot write $DATA"
    as_owner "$PG_BIN/initdb" -D "$DATA" -U "$SUPERUSER" --auth=trust --encoding=UTF8 --locale=C.UTF-8 \
        --no-sync >&2
    # listen_addresses, port, the socket folder and max_connections come from pg_ctl -o at each
    # start (so a cluster made by an older version of this script gets them too). The test suite
    # opens a pool per test, many tests at once: it peaked at ~330 connections with every service.
    cat >>"$DATA/postgresql.conf" <<'EOF'

# --- throwaway test cluster (scripts/postgres.sh): speed over durability ---
fsync = off
synchronous_commit = off
full_page_writes = off
shared_buffers = 64MB
log_min_messages = warning
log_line_prefix = '%m [%p] %q%a '
EOF
}

# Closes every inherited descriptor above stderr, in the current (sub)shell. The server
# daemonizes and would otherwise keep them open for its whole life: a caller waiting for EOF on
# a pipe, or Foundation's Process (which watches a socketpair end inherited by the child to see
# it exit), would then wait forever. This includes our lock on DIR/.lock.
close_inherited_fds() {
    local fd
    for fd in /proc/$BASHPID/fd/*; do
        fd=${fd##*/}
        if [[ "$fd" =~ ^[0-9]+$ ]] && ((fd > 2)); then
            eval "exec $fd>&-" 2>/dev/null || true
        fi
    done
}

start_cluster() {
    local port attempt
    for attempt in 1 2 3 4 5; do
        port=$(pick_port)
        echo "$port" >"$PORT_FILE"
        if [[ $(id -u) == 0 ]]; then chown postgres:postgres "$PORT_FILE"; fi
        if (
            close_inherited_fds
            as_owner "$PG_BIN/pg_ctl" -D "$DATA" -l "$LOG_FILE" -w -t 60 \
                -o "-p $port -k '$RUN' -c listen_addresses=127.0.0.1 -c max_connections=1000 ${POSTGRES_EXTRA_OPTIONS:-}" \
                start >&2 </dev/null
        ); then
            return 0
        fi
        if is_running; then
            return 0
        fi
        log "start on port $port failed (attempt $attempt); last log lines:"
        tail -n 5 "$LOG_FILE" >&2 || true
        remove_stale_pid
        rm -f "$PORT_FILE"
    done
    die "could not start PostgreSQL in $DATA; see $LOG_FILE"
}

wait_ready() {
    local port i
    port=$(cat "$PORT_FILE")
    for i in $(seq 1 100); do
        if "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$port" -U "$SUPERUSER" -d postgres; then
            return 0
        fi
        sleep 0.1
    done
    die "PostgreSQL on port $port did not become ready; see $LOG_FILE"
}

create_database() {
    local port exists
    port=$(cat "$PORT_FILE")
    exists=$("$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$port" -U "$SUPERUSER" -d postgres -tAc \
        "SELECT 1 FROM pg_database WHERE datname = '$DATABASE'")
    if [[ "$exists" != 1 ]]; then
        "$PG_BIN/createdb" -h 127.0.0.1 -p "$port" -U "$SUPERUSER" "$DATABASE" >&2
    fi
}

cmd_start() {
    ensure_packages
    resolve_dir "${1:-}"
    lock_dir
    init_cluster
    if ! is_running; then
        remove_stale_pid
        start_cluster
    fi
    wait_ready
    create_database
    conninfo
}

cmd_stop() {
    resolve_dir "${1:-}"
    local mode=${2:-fast}
    case "$mode" in fast | immediate | smart) ;; *) die "unknown stop mode: $mode" ;; esac
    lock_dir
    if is_running; then
        as_owner "$PG_BIN/pg_ctl" -D "$DATA" -m "$mode" -w -t 60 stop >&2
    else
        remove_stale_pid
        log "not running"
    fi
}

cmd_url() {
    resolve_dir "${1:-}"
    is_running || die "no cluster running in $DIR (scripts/postgres.sh start $1)"
    conninfo
}

cmd_status() {
    resolve_dir "${1:-}"
    if is_running; then
        echo "running: $(conninfo)"
    else
        echo "not running"
        exit 3
    fi
}

cmd_destroy() {
    [[ -n "${1:-}" ]] || usage
    [[ -d "$1" ]] || return 0
    resolve_dir "$1"
    if is_running; then
        as_owner "$PG_BIN/pg_ctl" -D "$DATA" -m immediate -w -t 60 stop >&2 || true
    fi
    rm -rf "$BASE" "$DIR"
}

# A streaming standby of PRIMARY (running) in DIR, for the failover check (issue 23 §3): a base
# backup with its recovery settings (-R), started on a port of its own; then PRIMARY's commits
# wait for it (synchronous_standby_names = '*', synchronous_commit on), so a commit the primary
# acknowledged is on the standby too. Durability matters here: start PRIMARY with
# POSTGRES_EXTRA_OPTIONS="-c fsync=on -c synchronous_commit=on -c full_page_writes=on"; the
# standby gets the same options.
cmd_standby() {
    [[ -n "${1:-}" && -n "${2:-}" ]] || usage
    ensure_packages
    resolve_dir "$1"
    is_running || die "the primary in $1 is not running"
    local primary_port primary_data
    primary_port=$(cat "$PORT_FILE")
    primary_data="$DATA"
    resolve_dir "$2"
    lock_dir
    if [[ ! -f "$DATA/PG_VERSION" ]]; then
        rm -rf "$DATA"
        mkdir -p "$DATA" "$RUN"
        if [[ $(id -u) == 0 ]]; then chown -R postgres:postgres "$BASE"; fi
        chmod 700 "$DATA"
        as_owner "$PG_BIN/pg_basebackup" -h 127.0.0.1 -p "$primary_port" -U "$SUPERUSER" -D "$DATA" -R \
            -X stream --no-sync --checkpoint=fast >&2
    fi
    if ! is_running; then
        remove_stale_pid
        start_cluster
    fi
    wait_ready
    local port
    port=$(cat "$PORT_FILE")
    # The primary waits for this standby from now on.
    "$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$primary_port" -U "$SUPERUSER" -d postgres \
        -c "ALTER SYSTEM SET synchronous_standby_names = '*'" -c "SELECT pg_reload_conf()" >&2
    local i
    for i in $(seq 1 100); do
        [[ $("$PG_BIN/psql" -X -h 127.0.0.1 -p "$primary_port" -U "$SUPERUSER" -d postgres -tAc \
            "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'") == 1 ]] && break
        sleep 0.1
    done
    log "standby of port $primary_port running on port $port (synchronous)"
    : "$primary_data"
    conninfo
}

cmd_promote() {
    resolve_dir "${1:-}"
    is_running || die "no cluster running in $DIR"
    as_owner "$PG_BIN/pg_ctl" -D "$DATA" -w -t 60 promote >&2
}

cmd_crash() {
    resolve_dir "${1:-}"
    is_running || die "no cluster running in $DIR"
    local pid children
    pid=$(head -n 1 "$DATA/postmaster.pid")
    # The postmaster and every process it started at once, as a lost machine would.
    children=$(pgrep -P "$pid" | tr '\n' ' ' || true)
    # shellcheck disable=SC2086
    kill -KILL "$pid" $children 2>/dev/null || true
    log "killed the server of $DIR (pid $pid and its processes)"
}

case "${1:-}" in
start) cmd_start "${2:-}" ;;
crash) cmd_crash "${2:-}" ;;
standby) cmd_standby "${2:-}" "${3:-}" ;;
promote) cmd_promote "${2:-}" ;;
stop) cmd_stop "${2:-}" "${3:-fast}" ;;
url) cmd_url "${2:-}" ;;
status) cmd_status "${2:-}" ;;
destroy) cmd_destroy "${2:-}" ;;
*) usage ;;
esac
