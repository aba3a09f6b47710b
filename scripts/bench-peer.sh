#!/usr/bin/env bash
# bench-peer.sh: molt's claim path against River (the Go job queue on
# PostgreSQL) on the same workload and machine, in alternating rounds.
#
#   scripts/bench-peer.sh            # or: make bench-peer
#   BENCH_PEER_N=5000 BENCH_PEER_ROUNDS=7 scripts/bench-peer.sh
#
# It installs PostgreSQL from Debian's packages when it is missing (as root,
# apt-get update first), starts a private cluster on 127.0.0.1 on a free port
# in a temporary directory with PostgreSQL's durable defaults (fsync on,
# synchronous_commit on), and stops and removes it at the end whatever
# happens. Each round runs molt (BenchmarkPeer on SQLite, internal/sqlite:
# the consumer and the executor, batches of up to 8 wake-ups claimed in one
# round trip) at synchronous=FULL (molt's default, durable like PostgreSQL's
# defaults) and at NORMAL (MOLT_SQLITE_SYNC=normal), River at its defaults
# (fetch cooldown 100 ms, poll 1 s) and River tuned (cooldown 1 ms, poll
# 50 ms), each on N no-op jobs with 16 workers (jobs/s)
# and 200 jobs created 5 ms apart (pickup latency, from the start of the
# insert to the start of the work). It prints the medians over the rounds and
# molt/River ratios (jobs/s: higher is better for molt above 1; latency: molt
# below 1 is better). River runs from its own module, bench/river.
set -euo pipefail

N=${BENCH_PEER_N:-2000}
ROUNDS=${BENCH_PEER_ROUNDS:-5}
GO=${GO:-go}
ROOT=$(cd "$(dirname "$0")/.." && pwd)

say() { printf 'bench-peer: %s\n' "$*" >&2; }

pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1; }

PG=$(pg_bin)
if [[ -z $PG || ! -x $PG/initdb ]]; then
	if [[ $(id -u) -ne 0 ]]; then
		say "PostgreSQL is not installed and this is not root: apt-get install postgresql first"
		exit 1
	fi
	say "installing PostgreSQL from Debian's packages"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
	PG=$(pg_bin)
fi

WORK=$(mktemp -d /tmp/bench-peer.XXXXXX)
# PostgreSQL refuses to run as root: run it as the package's postgres user.
as_pg() { "$@"; }
if [[ $(id -u) -eq 0 ]]; then
	id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
	chown postgres "$WORK"
	as_pg() { runuser -u postgres -- "$@"; }
fi
DATA=$WORK/data
cleanup() {
	if [[ -f $DATA/postmaster.pid ]]; then
		as_pg "$PG/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null 2>&1 || true
	fi
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
	local p
	for _ in $(seq 100); do
		p=$((20000 + RANDOM % 40000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return
		fi
	done
	say "no free port found"
	exit 1
}
PORT=$(free_port)

say "PostgreSQL $("$PG/postgres" --version | awk '{print $3}') cluster on 127.0.0.1:$PORT in $WORK"
as_pg "$PG/initdb" -D "$DATA" -A trust -U bench -E UTF8 >"$WORK/initdb.log" 2>&1 ||
	{ cat "$WORK/initdb.log" >&2; exit 1; }
as_pg "$PG/pg_ctl" -D "$DATA" -l "$WORK/postgres.log" -w \
	-o "-c listen_addresses=127.0.0.1 -p $PORT -k $WORK -c max_connections=100" start >/dev/null ||
	{ cat "$WORK/postgres.log" >&2; exit 1; }
DSN="postgres://bench@127.0.0.1:$PORT/postgres?sslmode=disable"

say "building River's bench (bench/river) and molt's (internal/sqlite)"
(cd "$ROOT/bench/river" && "$GO" build -o "$WORK/river-bench" .)
(cd "$ROOT" && "$GO" test -c -o "$WORK/sqlite.test" ./internal/sqlite)
say "river $(cd "$ROOT/bench/river" && "$GO" list -m -f '{{.Version}}' github.com/riverqueue/river)," \
	"$N jobs, 16 workers, $ROUNDS rounds"

# metric LINE UNIT: the value before UNIT in a Go benchmark result line.
metric() { awk -v u="$2" '{for (i = 2; i <= NF; i++) if ($i == u) {print $(i-1); exit}}' <<<"$1"; }

record() { # record NAME LINE
	echo "$2" >>"$WORK/$1.lines"
	printf '  %-14s %10s jobs/s  pickup p50 %7s ms  p90 %7s ms\n' "$1" \
		"$(metric "$2" jobs/s)" "$(metric "$2" pickup-p50-ms)" "$(metric "$2" pickup-p90-ms)" >&2
}

for r in $(seq "$ROUNDS"); do
	say "round $r of $ROUNDS"
	for sync in full normal; do
		line=$(cd "$WORK" && MOLT_SQLITE_SYNC=$sync ./sqlite.test -test.run '^$' -test.bench '^BenchmarkPeer$' \
			-test.benchtime "${N}x" 2>/dev/null | grep '^BenchmarkPeer')
		record "molt-$sync" "$line"
	done
	record river-default "$("$WORK/river-bench" -dsn "$DSN" -n "$N")"
	record river-tuned "$("$WORK/river-bench" -dsn "$DSN" -n "$N" -tuned)"
done

median() { # median NAME UNIT
	while read -r l; do metric "$l" "$2"; done <"$WORK/$1.lines" | sort -g |
		awk '{v[NR] = $1} END {if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2f", a / b; else print "-"}'; }

echo
echo "peer benchmark: $N no-op jobs, 16 workers, medians of $ROUNDS alternating rounds"
printf '%-16s %12s %14s %14s\n' "" "jobs/s" "pickup p50 ms" "pickup p90 ms"
for name in molt-full molt-normal river-default river-tuned; do
	printf '%-16s %12s %14s %14s\n' "$name" "$(median "$name" jobs/s)" \
		"$(median "$name" pickup-p50-ms)" "$(median "$name" pickup-p90-ms)"
done
echo
printf '%-30s %10s %14s %14s\n' "molt / River" "jobs/s" "pickup p50" "pickup p90"
for m in molt-full molt-normal; do
	for name in river-default river-tuned; do
		printf '%-30s %10s %14s %14s\n' "$m / $name" \
			"$(ratio "$(median "$m" jobs/s)" "$(median "$name" jobs/s)")" \
			"$(ratio "$(median "$m" pickup-p50-ms)" "$(median "$name" pickup-p50-ms)")" \
			"$(ratio "$(median "$m" pickup-p90-ms)" "$(median "$name" pickup-p90-ms)")"
	done
done
