#!/bin/bash
# mariadb-ratio.sh ROOMCELL_BIN LABEL: the MariaDB figure, one
# round. Drops and migrates its own databases (ratio_room, ratio_wallet,
# ratio_notice on 127.0.0.1:3306), starts ROOMCELL_BIN on configs/config.yaml
# with them (single node, group commit on, fake IM in process, directory
# REDIS=1: Redis on 6379 with its own key prefix, else the embedded one),
# creates 512 rooms, runs NJ (default 10,000) JoinRoom of unique users from C
# concurrent callers (default 64; BenchmarkAppend runs 512 appenders) with
# LOAD (ghz: ghz -c C; roomctl: roomctl bench --mode bigroom --members 0 -c C), then
# BenchmarkAppend/rooms=512/groupcommit=on -benchtime 3s, and prints joins/s,
# appends/s, their ratio, the server's CPU per join and mariadbd's CPU per
# join (/proc of the server listening on 3306; other clients of the same
# MariaDB count too). APPEND_TIME (default 3s) is BenchmarkAppend's
# -benchtime.
# Compare builds by interleaving rounds: A, B, A, B, ... (docs/benchmarks.md).
set -eu
. "$(dirname "$0")/bench-lib.sh"
BIN=$1 LABEL=$2
NJ=${NJ:-10000}
LOAD=${LOAD:-ghz}
C=${C:-64}
GHZ=${GHZ:-$(command -v ghz || echo ~/go/bin/ghz)}
ROOMCTL=${ROOMCTL:-go run ./cmd/roomctl}
APPEND_BENCH=${APPEND_BENCH:-/tmp/mysql-store.test}
[ -x "$APPEND_BENCH" ] || go test -c -o "$APPEND_BENCH" ./persistence/mysql
MYSQL="mariadb -uroot -h127.0.0.1"
for db in ratio_room ratio_wallet ratio_notice; do $MYSQL -e "DROP DATABASE IF EXISTS $db"; done
CFG=$(mktemp /tmp/mariadb-ratio-XXXX.yaml)
sed -e 's/"hyapp_room"/"ratio_room"/; s/"hyapp_wallet"/"ratio_wallet"/; s/"hyapp_notice"/"ratio_notice"/' \
	-e 's/^  pprof: false/  pprof: true/' configs/config.yaml >"$CFG"
if [ "${REDIS:-0}" = 1 ]; then
	sed -i -e '/^redis:/,/^room:/{s/^  enabled: false/  enabled: true/; s/key_prefix: "roomcell:"/key_prefix: "ratio:"/}' "$CFG"
	redis-cli --scan --pattern 'ratio:*' | xargs -r redis-cli del >/dev/null
fi
MYSQL_PASSWORD= "$BIN" --config "$CFG" --log-level warn >/tmp/mariadb-ratio-server.log 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null && wait $PID 2>/dev/null || true; rm -f $CFG' EXIT
wait_ready /tmp/mariadb-ratio-server.log
$ROOMCTL bench --rooms 512 --commands 1 >/dev/null
DBPID=$(ss -ltnpH 'sport = :3306' 2>/dev/null | sed -n 's/.*pid=\([0-9]*\).*/\1/p' | head -1)
dbcpu() { if [ -n "$DBPID" ]; then awk '{print $14+$15}' "/proc/$DBPID/stat"; else echo 0; fi; }
c1=$(cpu) d1=$(dbcpu)
RUN=$RANDOM
PROF=
if [ -n "${PROFILE:-}" ]; then
	(sleep 1; curl -s -o "$PROFILE" "127.0.0.1:13101/debug/pprof/profile?seconds=${PROFILE_SECONDS:-3}") &
	PROF=$!
fi
if [ "$LOAD" = ghz ]; then
	J=$("$GHZ" --insecure --call roomcell.v1.RoomService/JoinRoom -c "$C" -n "$NJ" \
		-d "{\"command_id\":\"c$RUN-{{.RequestNumber}}\",\"app_code\":\"bench\",\"room_id\":\"bench-{{randomInt 0 512}}\",\"user_id\":\"u$RUN-{{.RequestNumber}}\"}" \
		127.0.0.1:13001 | awk '/Requests\/sec/{print $2}')
else
	J=$($ROOMCTL --json bench --mode bigroom --members 0 --rooms 512 --concurrency "$C" --duration 120s --commands "$NJ" | sed -n 's/.*"commands_per_second": *\([0-9.]*\).*/\1/p')
fi
c2=$(cpu) d2=$(dbcpu)
[ -z "$PROF" ] || wait $PROF || true
[ -z "${HOLD:-}" ] || sleep "$HOLD"
kill $PID; wait $PID 2>/dev/null || true
A=$("$APPEND_BENCH" -test.run '^$' -test.bench 'BenchmarkAppend/rooms=512/groupcommit=on' -test.benchtime "${APPEND_TIME:-3s}" 2>/dev/null | awk '/cmds\/s/{for(i=1;i<=NF;i++) if($(i+1)=="cmds/s") print $i}' | head -1)
TCK=$(getconf CLK_TCK)
awk -v l="$LABEL" -v j="$J" -v a="$A" -v c1="$c1" -v c2="$c2" -v d1="$d1" -v d2="$d2" -v n="$NJ" -v t="$TCK" -v la="$(cut -d' ' -f1 /proc/loadavg)" 'BEGIN {
	printf "%-10s join %6.0f/s  append %6.0f/s  ratio %.3f  CPU/join %4.0f us  mariadbd CPU/join %4.0f us  load %s\n", l, j, a, j/a, (c2-c1)/t/n*1e6, (d2-d1)/t/n*1e6, la }'
