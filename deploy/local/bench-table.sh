#!/bin/bash
# bench-table.sh: the command path's figures (docs/benchmarks.md, "The
# table in one run") in one run: ROUNDS rounds (default 3), each measuring
# every figure once, the ratios computed within the round, then the median
# of each figure over the rounds beside its target. Rounds interleave the
# figures (dev, MariaDB, relay, watch, dev, ...), so a change in the
# machine's load moves one round, not one figure.
#
#   dev     a --dev node (ports 13001/13101): ghz -c 32 for DURATION each on
#           grpc.health.v1.Health/Check, JoinRoom of unique users into 100
#           rooms (created by roomctl bench first), GetRoom of one room.
#           GetRoom reads a room the joins before it filled (a first page
#           of 100 members). Rates and the node's CPU per call
#           (utime+stime from /proc/<pid>/stat before and after each ghz
#           run); in dev mode the node's CPU includes the in-process fake
#           IM. BASE=another server (a built binary, or a git revision
#           such as a commit or main~3, built into WORK from `git archive`)
#           runs its dev figures in the same rounds, just before BIN's
#           (base, then this build, each round): a before/after comparison
#           interleaved on one machine's load, with both columns in the
#           table.
#   mariadb mariadb-ratio.sh with ghz -c DB_C (512) and DB_NJ (40,000) joins:
#           end-to-end joins/s ÷ BenchmarkAppend rooms=512, the node's and
#           mariadbd's CPU per durable join (other clients of the same
#           MariaDB count in mariadbd's figure: run it on a quiet machine).
#   relay   watermill-ratio.sh, one pair: the relay's drain into a no-op
#           sink ÷ Watermill's queue-schema forwarder, same MariaDB.
#   watch   WATCH_BENCH (default grpcapi BenchmarkHotRoomGRPCWatchers) with
#           WATCHERS (1,000) watchers: the write rate with them ÷ without,
#           server CPU per stream message.
#
# PIN=1 (the default on two or more CPUs) runs the dev node on CPU 1 and
# ghz on CPU 0 with --cpus 1 (taskset), so each has a core of its own;
# PIN=0 lets both float. The load average is printed at the start, after
# every round and at the end: on a shared machine compare ratios, not rates.
#
# SHORT=1 checks the script quickly (DURATION 2s, DB_NJ 2,000, APPEND_TIME
# 1s, WATCHERS 100, one round); its figures are not the table's.
# FIGURES="dev mariadb relay watch" picks the sections (default all).
# BIN (default: built into WORK from this tree) is the server; roomctl,
# the watch benchmark's test binary and ghz (GHZ, else PATH, else
# ~/go/bin/ghz; go install github.com/bojand/ghz/cmd/ghz@v0.121.0) are
# needed too. Needs MariaDB on 127.0.0.1:3306 (deploy/local/services.sh)
# for mariadb and relay.
#
#	deploy/local/bench-table.sh            # or: make bench-table
#	SHORT=1 deploy/local/bench-table.sh    # check it runs
#	BASE=/tmp/roomcell-main FIGURES=dev deploy/local/bench-table.sh   # before/after, interleaved
#	BASE=1915b46 FIGURES=dev deploy/local/bench-table.sh              # the same, BASE built from that commit
set -eu
cd "$(dirname "$0")/../.."
. deploy/local/bench-lib.sh
WORK=${WORK:-/tmp/bench-table}
mkdir -p "$WORK"
if [ "${SHORT:-0}" = 1 ]; then
	: "${ROUNDS:=1}" "${DURATION:=2s}" "${DB_NJ:=2000}" "${APPEND_TIME:=1s}" "${WATCHERS:=100}"
fi
ROUNDS=${ROUNDS:-3} DURATION=${DURATION:-10s}
DB_C=${DB_C:-512} DB_NJ=${DB_NJ:-40000} APPEND_TIME=${APPEND_TIME:-3s}
WATCHERS=${WATCHERS:-1000}
WATCH_BENCH=${WATCH_BENCH:-./grpcapi BenchmarkHotRoomGRPCWatchers}
FIGURES=${FIGURES:-dev mariadb relay watch}
GHZ=${GHZ:-$(command -v ghz || echo ~/go/bin/ghz)}
[ -x "$GHZ" ] || { echo "ghz not found (GHZ=$GHZ): go install github.com/bojand/ghz/cmd/ghz@v0.121.0" >&2; exit 1; }
if [ -z "${PIN:-}" ]; then
	if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then PIN=1; else PIN=0; fi
fi
SRVPIN=() GHZRUN=("$GHZ")
[ "$PIN" = 1 ] && SRVPIN=(taskset -c 1) GHZRUN=(taskset -c 0 "$GHZ" --cpus 1)

has() { case " $FIGURES " in *" $1 "*) return 0 ;; esac; return 1; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
# val KEY LINE: the number after "KEY" in a line of key value pairs.
val() { awk -v k="$1" '{for (i = 1; i < NF; i++) if ($i == k) {print $(i+1); exit}}' <<<"$2"; }
# metric_of UNIT: the value printed before UNIT on a go test -bench line.
metric_of() { awk -v u="$1" '{for (i = 2; i <= NF; i++) if ($i == u) print $(i-1)}' | head -1; }
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{v[NR]=$1} END {if (NR == 0) print "-"; else print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
# rec NAME VALUE: one round's value of a figure, for the medians.
declare -A ALL
rec() { ALL[$1]="${ALL[$1]:-} $2"; }
med() { echo "${ALL[$1]:-}" | median; }

echo "building into $WORK" >&2
BIN=${BIN:-}
if [ -z "$BIN" ]; then go build -o "$WORK/roomcell" ./cmd/roomcell; BIN=$WORK/roomcell; fi
BASE_NAME=${BASE:-}
if [ -n "${BASE:-}" ] && [ ! -x "$BASE" ]; then
	# A revision: its tree exported and built (no worktree left behind).
	rev=$(git rev-parse --verify --quiet "$BASE^{commit}") || { echo "BASE=$BASE is neither an executable nor a git revision" >&2; exit 1; }
	BASE_NAME="$BASE ($(git rev-parse --short "$rev"))"
	rm -rf "$WORK/base-src" && mkdir -p "$WORK/base-src"
	git archive "$rev" | tar -x -C "$WORK/base-src"
	(cd "$WORK/base-src" && go build -o "$WORK/roomcell-base" ./cmd/roomcell)
	rm -rf "$WORK/base-src"
	BASE=$WORK/roomcell-base
fi
go build -o "$WORK/roomctl" ./cmd/roomctl
ROOMCTL=$WORK/roomctl
export ROOMCTL GHZ
WPKG=${WATCH_BENCH% *} WNAME=${WATCH_BENCH#* }
has watch && go test -c -o "$WORK/watch.test" "$WPKG"
has mariadb && go test -c -o "$WORK/mysql-store.test" ./persistence/mysql
TCK=$(getconf CLK_TCK)
echo "bench-table: $(date -u +%FT%TZ)  $(git rev-parse --short HEAD)  rounds $ROUNDS  ghz -z $DURATION  pin $PIN  load at start: $(load)"

# ghz_run CALL DATA: runs ghz for DURATION and prints "rps ok", ok being
# the calls answered OK (the figures divide the server's CPU by them).
ghz_run() {
	local out
	out=$("${GHZRUN[@]}" --insecure --call "$1" -c 32 -z "$DURATION" ${2:+-d "$2"} 127.0.0.1:13001)
	awk '/Requests\/sec/{r=$2} /\[OK\]/{ok=$2} END {printf "%s %d\n", r, ok}' <<<"$out"
}

# dev_round [SERVER PREFIX]: the dev figures of SERVER (default BIN),
# recorded under PREFIX (BASE's: base_).
dev_round() {
	local bin=${1:-$BIN} pre=${2:-}
	"${SRVPIN[@]}" "$bin" --dev --log-level warn >"$WORK/dev-server.log" 2>&1 &
	PID=$!
	wait_ready "$WORK/dev-server.log"
	"$ROOMCTL" bench --rooms 100 --commands 1 >/dev/null
	local run=$RANDOM c0 c1 c2 c3 h j g
	c0=$(cpu)
	h=$(ghz_run grpc.health.v1.Health/Check)
	c1=$(cpu)
	j=$(ghz_run roomcell.v1.RoomService/JoinRoom \
		"{\"command_id\":\"c$run-{{.RequestNumber}}\",\"app_code\":\"bench\",\"room_id\":\"bench-{{randomInt 0 100}}\",\"user_id\":\"u$run-{{.RequestNumber}}\"}")
	c2=$(cpu)
	g=$(ghz_run roomcell.v1.RoomService/GetRoom '{"app_code":"bench","room_id":"bench-0"}')
	c3=$(cpu)
	kill "$PID"; wait "$PID" 2>/dev/null || true
	PID=
	read -r hr hn <<<"$h"; read -r jr jn <<<"$j"; read -r gr gn <<<"$g"
	[ "${hn:-0}" -gt 0 ] && [ "${jn:-0}" -gt 0 ] && [ "${gn:-0}" -gt 0 ] || { echo "dev: a ghz run had no OK answers (health $h, join $j, get $g)" >&2; exit 1; }
	local line
	line=$(awk -v hr="$hr" -v hn="$hn" -v jr="$jr" -v jn="$jn" -v gr="$gr" -v gn="$gn" -v c0="$c0" -v c1="$c1" -v c2="$c2" -v c3="$c3" -v t="$TCK" 'BEGIN {
		hc = (c1-c0)/t/hn*1e6; jc = (c2-c1)/t/jn*1e6; gc = (c3-c2)/t/gn*1e6
		printf "health_rps %.0f join_rps %.0f get_rps %.0f health_us %.1f join_us %.1f get_us %.1f join_rps_ratio %.3f join_cpu_ratio %.2f get_rps_ratio %.3f get_cpu_ratio %.2f\n",
			hr, jr, gr, hc, jc, gc, jr/hr, jc/hc, gr/hr, gc/hc }')
	for k in health_rps join_rps get_rps health_us join_us get_us join_rps_ratio join_cpu_ratio get_rps_ratio get_cpu_ratio; do rec "$pre$k" "$(val $k "$line")"; done
	echo "  ${pre:+base }dev  $line"
}

mariadb_round() {
	local line
	line=$(LOAD=ghz C="$DB_C" NJ="$DB_NJ" APPEND_TIME="$APPEND_TIME" APPEND_BENCH="$WORK/mysql-store.test" \
		deploy/local/mariadb-ratio.sh "$BIN" r)
	# "r join J/s append A/s ratio R CPU/join C us mariadbd CPU/join D us load L"
	local j a r c d
	j=$(val join "$line") a=$(val append "$line") r=$(val ratio "$line")
	c=$(awk '{for (i = 1; i < NF; i++) if ($i == "CPU/join" && $(i-1) != "mariadbd") {print $(i+1); exit}}' <<<"$line")
	d=$(awk '{for (i = 2; i < NF; i++) if ($i == "CPU/join" && $(i-1) == "mariadbd") {print $(i+1); exit}}' <<<"$line")
	rec db_join "${j%/s}"; rec db_append "${a%/s}"; rec db_ratio "$r"; rec db_us "$c"; rec db_mariadbd_us "$d"
	echo "  mariadb  join ${j%/s}/s  append ${a%/s}/s  ratio $r  server CPU/join $c us  mariadbd CPU/join $d us"
}

relay_round() {
	local line
	line=$(PAIRS=1 RC_TEST="$WORK/relay.test" deploy/local/watermill-ratio.sh | grep '^pair 1 ')
	# "pair 1  relay drain (no-op sink) A rows/s (mariadbd D µs/row)  watermill queue-schema forwarder B rows/s  ratio R ..."
	local a b r
	a=$(awk '{for (i = 1; i < NF; i++) if ($i == "sink)") {print $(i+1); exit}}' <<<"$line")
	b=$(awk '{for (i = 1; i < NF; i++) if ($i == "forwarder") {print $(i+1); exit}}' <<<"$line")
	r=$(val ratio "$line")
	rec relay_rows "$a"; rec wm_rows "$b"; rec relay_ratio "$r"
	echo "  relay    drain $a rows/s  watermill queue schema $b rows/s  ratio $r"
}

watch_round() {
	local out r m a w e c
	out=$(cd "$WPKG" && ROOMCELL_HOT_WATCHERS="$WATCHERS" "$WORK/watch.test" -test.run '^$' -test.bench "^$WNAME\$" -test.benchtime 1x 2>&1) ||
		{ echo "$out" >&2; echo "watch: $WATCH_BENCH failed" >&2; exit 1; }
	r=$(metric_of rate-watched/alone <<<"$out") m=$(metric_of server-ns/message <<<"$out")
	a=$(metric_of written/s-alone <<<"$out") w=$(metric_of written/s-watched <<<"$out")
	e=$(metric_of server-ns/event-delivered <<<"$out") c=$(metric_of cuts <<<"$out")
	[ -n "$r" ] && [ -n "$m" ] || { echo "$out" >&2; echo "watch: $WATCH_BENCH printed no rate-watched/alone or server-ns/message" >&2; exit 1; }
	rec watch_ratio "$r"; rec watch_ns "$m"; rec watch_ev_ns "${e:--}"; rec watch_cuts "${c:--}"
	echo "  watch    $WATCHERS watchers: written ${a}/s alone, ${w}/s watched, ratio $r  server CPU/message $m ns, /event delivered ${e:--} ns, cuts ${c:--}"
}

PID=
trap '[ -z "$PID" ] || { kill $PID 2>/dev/null && wait $PID 2>/dev/null; } || true' EXIT
for round in $(seq "$ROUNDS"); do
	echo "round $round  load $(load)"
	if has dev; then
		[ -z "${BASE:-}" ] || dev_round "$BASE" base_
		dev_round
	fi
	has mariadb && mariadb_round
	has relay && relay_round
	has watch && watch_round
done
echo "load at end: $(load)"
echo
echo "Medians of $ROUNDS round(s), ratios within each round ($(git rev-parse --short HEAD), ghz -z $DURATION, pin $PIN):"
echo
# header: the table's header, once, before its first row.
headed=
header() { [ -n "$headed" ] || { echo "| figure | median | target |"; echo "| --- | ---: | ---: |"; headed=1; }; }
if has dev; then
	# base PREFIX: BASE's median of a dev figure as a table cell, when BASE is set.
	base() { [ -z "${BASE:-}" ] || echo " $1 |"; }
	if [ -n "${BASE:-}" ]; then
		echo "| dev figure (BASE $BASE_NAME) | base median | this build | target |"
		echo "| --- | ---: | ---: | ---: |"
	else
		header
	fi
	echo "| dev JoinRoom rps ÷ Health rps (ghz c=32, $DURATION) |$(base "$(med base_join_rps_ratio) ($(med base_join_rps) ÷ $(med base_health_rps))") $(med join_rps_ratio) ($(med join_rps) ÷ $(med health_rps)) | ≥ 0.5 |"
	echo "| dev server CPU per JoinRoom ÷ per Health |$(base "$(med base_join_cpu_ratio) ($(med base_join_us) µs vs $(med base_health_us))") $(med join_cpu_ratio) ($(med join_us) µs vs $(med health_us)) | ≤ 3 |"
	echo "| dev GetRoom rps ÷ Health rps |$(base "$(med base_get_rps_ratio) ($(med base_get_rps) rps)") $(med get_rps_ratio) ($(med get_rps) rps) | ≥ 0.8 |"
	echo "| dev server CPU per GetRoom ÷ per Health |$(base "$(med base_get_cpu_ratio) ($(med base_get_us) µs)") $(med get_cpu_ratio) ($(med get_us) µs) | ≤ 1.3 |"
	[ -z "${BASE:-}" ] || echo
fi
if has mariadb; then
	header
	echo "| MariaDB e2e JoinRoom (ghz c=$DB_C, $DB_NJ) ÷ BenchmarkAppend rooms=512 | $(med db_ratio) ($(med db_join) ÷ $(med db_append)/s) | ≥ 0.5 |"
	echo "| server CPU per durable JoinRoom | $(med db_us) µs | – |"
	echo "| mariadbd CPU per durable JoinRoom | $(med db_mariadbd_us) µs | ≤ 81 µs (0.6 × 135) |"
fi
if has relay; then
	header
	echo "| relay drain ÷ Watermill queue schema, 100k rows in 1,000 rooms | $(med relay_ratio) ($(med relay_rows) ÷ $(med wm_rows) rows/s) | ≥ 1.0 |"
fi
if has watch; then
	header
	echo "| server CPU per watch stream message, $WATCHERS watchers | $(med watch_ns) ns | ≤ 1,000 ns |"
	echo "| server CPU per event delivered to a watcher (the same run) | $(med watch_ev_ns) ns | – |"
	echo "| watchers cut (and resumed) in the same run | $(med watch_cuts) | – |"
	echo "| hot room's write rate with $WATCHERS watchers ÷ without | $(med watch_ratio) | ≥ 0.5 |"
fi
