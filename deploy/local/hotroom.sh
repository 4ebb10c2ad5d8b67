#!/bin/bash
# hotroom.sh ROOMCELL_BIN LABEL [SECONDS]: the hot-room figures, one
# round. Starts ROOMCELL_BIN --dev (ports 13001/13101 must be free; IM at
# Tencent's default 40 messages/s per group, the fake IM in process), runs
# roomctl bench --mode hotroom --concurrency 32 for SECONDS (default 10),
# then reads the fake IM's /debug/messages every second until the count of
# distinct event ids holds for 5 s, and prints: commands accepted, events
# delivered to IM during the load (per second), the drain after it (events
# per second until the fake IM accepted the last one, by its own clock;
# also as the poll saw it) and whether every accepted event
# arrived (the room's own creation events are counted too). Needs roomctl
# (ROOMCTL, default: go run ./cmd/roomctl) and jq.
set -eu
. "$(dirname "$0")/bench-lib.sh"
BIN=$1 LABEL=$2 SECS=${3:-10}
ROOMCTL=${ROOMCTL:-go run ./cmd/roomctl}
"$BIN" --dev --log-level warn >/tmp/hotroom-server.log 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null && wait $PID 2>/dev/null || true' EXIT
wait_ready /tmp/hotroom-server.log
# The fake IM listens on a free loopback port of the node's own: the one
# of its listeners that answers /debug/messages.
IM=
for port in $(ss -ltnpH "( sport != :13001 and sport != :13101 )" | grep "pid=$PID," | awk '{print $4}' | sed 's/.*://'); do
	body=$(curl -sf "127.0.0.1:$port/debug/messages" 2>/dev/null) || continue
	if jq -e '.messages | type == "array"' <<<"$body" >/dev/null 2>&1; then IM=127.0.0.1:$port; break; fi
done
[ -n "$IM" ] || { echo "no fake IM found among the node's listeners" >&2; exit 1; }
delivered() { curl -sS "$IM/debug/messages" | jq '[.messages[] | (.event_ids // [])[]] | unique | length'; }
t0=$(date +%s.%N)
C=$($ROOMCTL --json bench --mode hotroom --concurrency 32 --duration "${SECS}s" | jq .commands)
t1=$(date +%s.%N)
during=$(delivered)
last=$during tlast=$t1 same=0
while [ $same -lt 5 ]; do
	sleep 1
	n=$(delivered)
	if [ "$n" = "$last" ]; then same=$((same + 1)); else last=$n tlast=$(date +%s.%N) same=0; fi
done
# The drain ends when the fake IM accepted the last message carrying
# events (its own "at"): the poll that sees the count stop comes up to a
# second later, plus a read of every message so far, ~6% of a 16 s drain.
lastat=$(curl -sS "$IM/debug/messages" | jq -r '[.messages[] | select((.event_ids // []) | length > 0)] | last | .at')
tend=$(date -d "$lastat" +%s.%N)
awk -v l="$LABEL" -v c="$C" -v d="$during" -v n="$last" -v t0="$t0" -v t1="$t1" -v tl="$tlast" -v te="$tend" 'BEGIN {
	drain = (te > t1) ? (n - d) / (te - t1) : 0
	polled = (tl > t1) ? (n - d) / (tl - t1) : 0
	printf "%-10s accepted %d commands (%.0f/s)  IM during the load %.0f events/s  drain %.0f events/s over %.1f s (by the poll: %.0f over %.1f s)  delivered %d of %d accepted (+ creation events)\n",
		l, c, c / (t1 - t0), d / (t1 - t0), drain, te - t1, polled, tl - t1, n, c }'
