# shellcheck shell=bash
# One benchmark run at a time: a second run would destroy the first one's cluster under it.
#
# hold_bench_lock FILE WHAT: takes FILE's lock on descriptor 8 for the rest of the calling
# script (the kernel releases it when the script ends), or exits with status 2 saying that WHAT
# holds it. Start long-lived children (PostgreSQL, the services) with `8>&-`, so that one left
# behind by a killed script does not keep the lock.
hold_bench_lock() {
    local file=$1 what=$2
    mkdir -p "$(dirname "$file")"
    exec 8>"$file"
    flock -n 8 || {
        echo "$(basename "$0"): $what holds $file; wait for it to end" >&2
        exit 2
    }
}
