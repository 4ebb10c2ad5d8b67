#!/bin/bash
# join-ratio.sh ROOMCELL_BIN LABEL [ENV=VALUE...]: the dev-mode
# figure, one round. Starts ROOMCELL_BIN --dev (ports 13001/13101 must be
# free), creates 100 rooms, runs 4,000 grpc.health.v1.Health/Check and then
# NJ (default 12,000) JoinRoom of unique users with ghz -c 32, and prints
# both rates, their ratio, the server's CPU per request (utime+stime from
# /proc) and bytes allocated per join (go_memstats_alloc_bytes_total).
# Compare builds by interleaving rounds: A, B, A, B, ... (docs/benchmarks.md).
# Needs ghz (go install github.com/bojand/ghz/cmd/ghz@latest) and roomctl
# (ROOMCTL, default: go run ./cmd/roomctl).
set -eu
. "$(dirname "$0")/bench-lib.sh"
BIN=$1 LABEL=$2
shift 2
NJ=${NJ:-12000}
GHZ=${GHZ:-$(command -v ghz || echo ~/go/bin/ghz)}
ROOMCTL=${ROOMCTL:-go run ./cmd/roomctl}
env "$@" "$BIN" --dev --log-level warn >/tmp/join-ratio-server.log 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null && wait $PID 2>/dev/null || true' EXIT
wait_ready /tmp/join-ratio-server.log
$ROOMCTL bench --rooms 100 --commands 1 >/dev/null
alloc() { metric go_memstats_alloc_bytes_total; }
c0=$(cpu)
H=$("$GHZ" --insecure --call grpc.health.v1.Health/Check -c 32 -n 4000 127.0.0.1:13001 | awk '/Requests\/sec/{print $2}')
c1=$(cpu) a1=$(alloc)
RUN=$RANDOM
J=$("$GHZ" --insecure --call roomcell.v1.RoomService/JoinRoom -c 32 -n "$NJ" \
	-d "{\"command_id\":\"c$RUN-{{.RequestNumber}}\",\"app_code\":\"bench\",\"room_id\":\"bench-{{randomInt 0 100}}\",\"user_id\":\"u$RUN-{{.RequestNumber}}\"}" \
	127.0.0.1:13001 | awk '/Requests\/sec/{print $2}')
c2=$(cpu) a2=$(alloc)
TCK=$(getconf CLK_TCK)
awk -v l="$LABEL" -v h="$H" -v j="$J" -v c0="$c0" -v c1="$c1" -v c2="$c2" -v a1="$a1" -v a2="$a2" -v n="$NJ" -v t="$TCK" -v la="$(cut -d' ' -f1 /proc/loadavg)" 'BEGIN {
	printf "%-10s check %7.0f rps  join %6.0f rps  ratio %.3f  CPU/check %4.0f us  CPU/join %4.0f us  alloc/join %.1f KB  load %s\n",
		l, h, j, j/h, (c1-c0)/t/4000*1e6, (c2-c1)/t/n*1e6, (a2-a1)/n/1024, la }'
