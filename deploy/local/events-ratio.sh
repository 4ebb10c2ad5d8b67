#!/bin/bash
# events-ratio.sh ROOMCELL_BIN LABEL: the ListRoomEvents figure over
# gRPC, one round. Starts ROOMCELL_BIN --dev on GRPC (default
# 127.0.0.1:23471) and HTTP (127.0.0.1:23472), writes 1,000 commands to one
# room (roomctl bench --mode hotroom), then runs N (default 20,000)
# GetRoom and ListRoomEvents of its events after seq 900 (100 events) with
# ghz -c 32, and prints both rates, their ratio and the server's CPU per
# call (utime+stime from /proc). Compare builds by interleaving rounds.
# Needs ghz (go install github.com/bojand/ghz/cmd/ghz@latest) and roomctl
# (ROOMCTL, default: go run ./cmd/roomctl). ghz runs on the same machine:
# its decoding of the 100-event replies takes CPU from the server.
# PIN=1 runs the server on CPU 1 and ghz on CPU 0 with --cpus 1, so each
# has one core of its own (a 2-core machine).
set -eu
BIN=$1 LABEL=$2
N=${N:-20000}
GRPC=${GRPC:-127.0.0.1:23471} HTTP=${HTTP:-127.0.0.1:23472}
GHZ=${GHZ:-$(command -v ghz || echo ~/go/bin/ghz)}
ROOMCTL=${ROOMCTL:-go run ./cmd/roomctl}
SRVPIN=() GHZPIN=()
if [ "${PIN:-0}" = 1 ]; then
	SRVPIN=(taskset -c 1) GHZPIN=(taskset -c 0 "$GHZ" --cpus 1)
else
	GHZPIN=("$GHZ")
fi
"${SRVPIN[@]}" "$BIN" --dev --grpc-addr "$GRPC" --http-addr "$HTTP" --log-level warn >/tmp/events-ratio-server.log 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null && wait $PID 2>/dev/null || true' EXIT
for _ in $(seq 150); do curl -sf "$HTTP/readyz" >/dev/null && break; sleep 0.2; done
kill -0 "$PID" 2>/dev/null || { echo "server did not start: /tmp/events-ratio-server.log" >&2; exit 1; }
$ROOMCTL --addr "$GRPC" bench --mode hotroom --rooms 1 --commands 1000 --concurrency 4 --room-prefix ev- >/dev/null
cpu() { awk '{print $14+$15}' "/proc/$PID/stat"; }
c0=$(cpu)
G=$("${GHZPIN[@]}" --insecure --call roomcell.v1.RoomService/GetRoom -c 32 -n "$N" -d '{"app_code":"bench","room_id":"ev-0"}' "$GRPC" | awk '/Requests\/sec/{print $2}')
c1=$(cpu)
L=$("${GHZPIN[@]}" --insecure --call roomcell.v1.RoomService/ListRoomEvents -c 32 -n "$N" \
	-d '{"app_code":"bench","room_id":"ev-0","after_room_seq":900,"limit":100}' "$GRPC" | awk '/Requests\/sec/{print $2}')
c2=$(cpu)
awk -v l="$LABEL" -v g="$G" -v e="$L" -v c0="$c0" -v c1="$c1" -v c2="$c2" -v n="$N" -v t="$(getconf CLK_TCK)" -v la="$(cut -d' ' -f1 /proc/loadavg)" 'BEGIN {
	printf "%-10s GetRoom %7.0f rps  ListRoomEvents(100) %7.0f rps  ratio %.3f  CPU/GetRoom %4.0f us  CPU/ListRoomEvents %4.0f us  load %s\n",
		l, g, e, e/g, (c1-c0)/t/n*1e6, (c2-c1)/t/n*1e6, la }'
