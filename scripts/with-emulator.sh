#!/usr/bin/env bash
# with-emulator.sh CMD [ARGS...] — run CMD with an AWS emulator reachable through
# AWS_ENDPOINT_URL.
#
# If AWS_ENDPOINT_URL is already set (a running LocalStack, say), CMD runs against it.
# Otherwise a private kumo (.tools/bin/kumo, installed by `make tools`) is started on a
# free 127.0.0.1 port, in memory only, and always stopped when CMD ends. Either way CMD
# also gets AWS_REGION, static test credentials (unless set) and MOLT_RIE (the Lambda
# Runtime Interface Emulator used by internal/functest). Exits with CMD's status.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
kumo_bin=${KUMO_BIN:-$root/.tools/bin/kumo}
rie_bin=$root/.tools/bin/aws-lambda-rie

if [[ $# -eq 0 ]]; then
	echo "usage: $0 CMD [ARGS...]" >&2
	exit 2
fi

# port_open PORT: true when something accepts TCP connections on 127.0.0.1:PORT.
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# kumo_healthy PORT: true when kumo answers GET /health with 200.
kumo_healthy() {
	local line
	exec 3<>"/dev/tcp/127.0.0.1/$1" || return 1
	printf 'GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
	IFS= read -r -t 2 line <&3 || line=
	exec 3<&- 3>&-
	[[ $line == HTTP/1.?" 200"* ]]
}

kumo_pid=
kumo_log=
cleanup() {
	if [[ -n $kumo_pid ]] && kill -0 "$kumo_pid" 2>/dev/null; then
		kill -TERM "$kumo_pid" 2>/dev/null || true
		wait "$kumo_pid" 2>/dev/null || true
	fi
	[[ -n $kumo_log ]] && rm -f "$kumo_log"
	return 0
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

started=$SECONDS
where=
if [[ -n ${AWS_ENDPOINT_URL:-} ]]; then
	where="existing endpoint $AWS_ENDPOINT_URL"
else
	if [[ ! -x $kumo_bin ]]; then
		echo "with-emulator: $kumo_bin is missing; run 'make tools'" >&2
		exit 1
	fi
	kumo_log=$(mktemp "${TMPDIR:-/tmp}/kumo.XXXXXX")
	port=
	# A port seen free can be taken before kumo binds it: then kumo exits and we try
	# another one.
	for attempt in 1 2 3 4 5; do
		candidate=$((20000 + RANDOM % 40000))
		port_open "$candidate" && continue
		env -u KUMO_DATA_DIR KUMO_HOST=127.0.0.1 KUMO_PORT="$candidate" KUMO_LOG_LEVEL="${KUMO_LOG_LEVEL:-warn}" \
			"$kumo_bin" >"$kumo_log" 2>&1 &
		kumo_pid=$!
		for _ in $(seq 1 300); do # up to ~30 s
			if ! kill -0 "$kumo_pid" 2>/dev/null; then
				break
			fi
			if kumo_healthy "$candidate" 2>/dev/null; then
				port=$candidate
				break 2
			fi
			sleep 0.1
		done
		if kill -0 "$kumo_pid" 2>/dev/null; then
			echo "with-emulator: kumo did not answer on 127.0.0.1:$candidate within 30s" >&2
			cat "$kumo_log" >&2
			exit 1
		fi
		wait "$kumo_pid" 2>/dev/null || true
		kumo_pid=
	done
	if [[ -z $port ]]; then
		echo "with-emulator: could not start kumo (last log follows)" >&2
		cat "$kumo_log" >&2
		exit 1
	fi
	export AWS_ENDPOINT_URL="http://127.0.0.1:$port"
	where="kumo on 127.0.0.1:$port (pid $kumo_pid)"
fi

export AWS_REGION=${AWS_REGION:-us-east-1}
export AWS_ACCESS_KEY_ID=${AWS_ACCESS_KEY_ID:-test}
export AWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY:-test}
if [[ -z ${MOLT_RIE:-} && -x $rie_bin ]]; then
	export MOLT_RIE=$rie_bin
fi

rc=0
"$@" || rc=$?
echo "with-emulator: '$*' exited $rc after $((SECONDS - started))s against $where" >&2
exit "$rc"
