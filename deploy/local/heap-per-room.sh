#!/bin/bash
# heap-per-room.sh ROOMCELL_BIN LABEL [ROOMS]: the heap per active
# one-member room on a --dev node, one round. Starts ROOMCELL_BIN --dev
# (ports 13001/13101 must be free) with /debug/pprof on and the IM client's
# API quota raised to 100,000/s (creating rooms is otherwise held to
# Tencent's 200 calls/s), creates ROOMS (default 20,000) rooms with roomctl
# bench (CreateRoom leaves the owner as the one member), waits until the
# outbox is drained, and prints, per room: heap in use after a forced GC
# (go_memstats_heap_inuse_bytes, before vs after: spans holding any live
# object), allocated (go_memstats_heap_alloc_bytes: the live objects,
# exact), live bytes from the heap
# profile (saved as /tmp/heap-per-room-LABEL.pprof, less the one taken before
# the rooms, -before.pprof), the same without the
# in-process fake IM and its client, and the goroutine count before and
# after. Needs roomctl (ROOMCTL, default: go run ./cmd/roomctl).
set -eu
. "$(dirname "$0")/bench-lib.sh"
BIN=$1 LABEL=$2 ROOMS=${3:-20000}
ROOMCTL=${ROOMCTL:-go run ./cmd/roomctl}
CFG=$(mktemp /tmp/heap-per-room-XXXX.yaml)
printf 'http:\n  pprof: true\ntencent_im:\n  rate_per_second: 100000\nlog:\n  level: warn\n' >"$CFG"
# One heap sample per 4 KB allocated (the default, 512 KB, leaves per-room
# figures off by hundreds of bytes from one run to the next).
GODEBUG=memprofilerate=4096 "$BIN" --dev --config "$CFG" >/tmp/heap-per-room-server.log 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null && wait $PID 2>/dev/null || true; rm -f $CFG' EXIT
wait_ready /tmp/heap-per-room-server.log
gc() { curl -s -o /dev/null '127.0.0.1:13101/debug/pprof/heap?gc=1'; sleep 0.5; curl -s -o /dev/null '127.0.0.1:13101/debug/pprof/heap?gc=1'; }
gc
h0=$(metric go_memstats_heap_inuse_bytes) a0=$(metric go_memstats_heap_alloc_bytes) g0=$(metric go_goroutines)
curl -s -o "/tmp/heap-per-room-$LABEL-before.pprof" '127.0.0.1:13101/debug/pprof/heap?gc=1'
$ROOMCTL --timeout 30m bench --rooms "$ROOMS" --commands 1 --concurrency 32 >/dev/null
# Wait for the outbox to drain (the relay's pending gauge, updated each poll).
for _ in $(seq 600); do
	p=$(metric room_outbox_pending_total)
	[ "${p:-1}" = 0 ] && break
	sleep 1
done
# Idle room-dispatcher goroutines end 10 s after their last turn.
sleep 12
gc
h1=$(metric go_memstats_heap_inuse_bytes) a1=$(metric go_memstats_heap_alloc_bytes) g1=$(metric go_goroutines)
curl -s -o "/tmp/heap-per-room-$LABEL.pprof" '127.0.0.1:13101/debug/pprof/heap?gc=1'
# Live bytes are the profile's after less before (-diff_base): what the
# rooms added, not the node's own start-up heap; -nodefraction=0 sums
# every node (pprof leaves out those under 0.5% by default).
diff="-diff_base=/tmp/heap-per-room-$LABEL-before.pprof"
live=$(go tool pprof -unit=MB -sample_index=inuse_space "$diff" -nodefraction=0 -top -nodecount=100000 "/tmp/heap-per-room-$LABEL.pprof" 2>/dev/null | sed -n 's/.*accounting for \([0-9.-]*\)MB.*/\1/p' | head -1)
# The in-process fake IM (a test double: its 5-minute dedupe window and
# capped message and call logs) and the Tencent client's per-group state.
nofake=$(go tool pprof -unit=MB -sample_index=inuse_space "$diff" -ignore='imfake|tencentim' -nodefraction=0 -top -nodecount=100000 "/tmp/heap-per-room-$LABEL.pprof" 2>/dev/null | sed -n 's/.*accounting for \([0-9.]*\)MB.*/\1/p' | head -1)
awk -v l="$LABEL" -v n="$ROOMS" -v h0="$h0" -v h1="$h1" -v a0="$a0" -v a1="$a1" -v g0="$g0" -v g1="$g1" -v live="$live" -v nofake="$nofake" -v p="${p:-?}" 'BEGIN {
	printf "%-10s rooms %d  per room: heap in use %6.0f B, allocated %5.0f B, live (profile) %5.0f B, without the fake IM %5.0f B  goroutines %d -> %d  pending %s\n",
		l, n, (h1-h0)/n, (a1-a0)/n, live*1048576/n, nofake*1048576/n, g0, g1, p }'
