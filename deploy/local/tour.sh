#!/usr/bin/env bash
# Runs the README's five-minute tour as written (the lines between
# <!-- tour:begin --> and <!-- tour:end -->) against a fresh --dev node on
# free loopback ports, one line at a time, and fails on the first line that
# does not do what the README says. A line whose comment says "fails: TEXT"
# must exit non-zero with TEXT on stderr; every other line must exit 0.
#
#   deploy/local/tour.sh                 # short form (make tour): benches run briefly
#   TOUR_PAUSE=5m deploy/local/tour.sh   # long form: waits 5 minutes after the joins,
#                                        # as a person reading along might
#   TOUR_FULL=1                          # the bench lines exactly as written (minutes)
#   TOUR_MYSQL=1                         # also the MySQL section against 127.0.0.1:3306,
#                                        # on databases of its own (dropped after)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
README=$ROOT/README.md
PAUSE=${TOUR_PAUSE:-0}
WORK=$(mktemp -d /tmp/roomcell-tour.XXXXXX)
NODE_PID=""
cleanup() {
  if [ -n "$NODE_PID" ]; then kill "$NODE_PID" 2>/dev/null || true; wait "$NODE_PID" 2>/dev/null || true; fi
  if [ "${KEEP:-0}" = 0 ]; then rm -rf "$WORK"; else echo "tour: kept $WORK"; fi
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

block() { # block NAME: the sh lines of README between <!-- NAME:begin --> and <!-- NAME:end -->
  awk -v b="<!-- $1:begin" -v e="<!-- $1:end -->" '
    index($0, b) == 1 { on = 1; next }
    index($0, e) == 1 { on = 0 }
    on && !/^```/ { print }' "$README"
}

go build -o "$WORK/roomcell" ./cmd/roomcell

start_node() { # start_node ARGS...: a node on fresh ports, waits for /readyz
  GRPC=127.0.0.1:$(free_port); HTTP=127.0.0.1:$(free_port)
  "$WORK/roomcell" "$@" --grpc-addr "$GRPC" --http-addr "$HTTP" >"$WORK/node.log" 2>&1 &
  NODE_PID=$!
  for _ in $(seq 1 150); do
    if curl -sf "http://$HTTP/readyz" >/dev/null; then return 0; fi
    if ! kill -0 "$NODE_PID" 2>/dev/null; then break; fi
    sleep 0.2
  done
  echo "tour: node did not become ready; its log:" >&2; cat "$WORK/node.log" >&2; return 1
}

stop_node() {
  kill "$NODE_PID"; wait "$NODE_PID" 2>/dev/null || true; NODE_PID=""
}

# run_lines: each README line in bash from the checkout, with bin/roomctl
# built into the scratch directory and the README's addresses swapped for
# the node's.
run_lines() {
  local n=0 line cmd want out
  while IFS= read -r line; do
    n=$((n + 1))
    [ -z "${line// }" ] && continue
    cmd=$line
    cmd=${cmd//bin\/roomctl/$WORK\/bin\/roomctl}
    cmd=${cmd//127.0.0.1:13101/$HTTP}
    want=""
    if [[ $line == *"# fails: "* ]]; then want=${line##*# fails: }; fi
    if [ "${TOUR_FULL:-0}" = 0 ] && [[ $line == *" bench "* ]]; then
      cmd=${cmd%%#*}" --duration 1s --members 100"
    fi
    echo "tour> $line"
    set +e
    out=$(cd "$ROOT" && ROOMCELL_ADDR=$GRPC bash -c "R=; $PRELUDE
$cmd" 2>"$WORK/stderr")
    local rc=$?
    set -e
    [ -n "$out" ] && printf '%s\n' "$out" | sed 's/^/     /' | head -n 12
    if [ -n "$want" ]; then
      if [ $rc = 0 ] || ! grep -qF "$want" "$WORK/stderr"; then
        echo "tour: line $n should fail with \"$want\"; exit $rc, stderr:" >&2; cat "$WORK/stderr" >&2; return 1
      fi
      sed 's/^/     /' "$WORK/stderr"
    elif [ $rc != 0 ]; then
      echo "tour: line $n failed (exit $rc): $line" >&2; cat "$WORK/stderr" >&2; return 1
    fi
    # R="..." assignments carry to the next lines.
    if [[ $line =~ ^[A-Z_]+= ]]; then PRELUDE="$PRELUDE
${cmd%%#*}"; fi
    # The long form's pause: after the joins, before anything else uses them.
    if [ "$PAUSE" != 0 ] && [[ $line == *"mic take"* ]]; then
      echo "tour: pausing $PAUSE (TOUR_PAUSE), members send no heartbeat meanwhile"
      sleep "$PAUSE"
    fi
  done
}

mkdir -p "$WORK/bin"
PRELUDE=""
start_node --dev
echo "tour: dev node at $GRPC (http $HTTP)"
block tour >"$WORK/tour.sh"
[ -s "$WORK/tour.sh" ] || { echo "tour: no tour block in README" >&2; exit 1; }
run_lines <"$WORK/tour.sh"
stop_node
echo "tour: the dev tour ran as written"

if [ "${TOUR_MYSQL:-0}" = 1 ]; then
  suffix=$(date +%s)_$$
  export ROOMCELL_ROOM_DATABASE=tour_room_$suffix ROOMCELL_WALLET_DATABASE=tour_wallet_$suffix ROOMCELL_NOTICE_DATABASE=tour_notice_$suffix
  drop() { mysql -h 127.0.0.1 -u root -e "DROP DATABASE IF EXISTS $ROOMCELL_ROOM_DATABASE; DROP DATABASE IF EXISTS $ROOMCELL_WALLET_DATABASE; DROP DATABASE IF EXISTS $ROOMCELL_NOTICE_DATABASE" || true; }
  trap 'drop; cleanup' EXIT
  export MYSQL_PASSWORD=${MYSQL_PASSWORD:-}
  block tour-mysql >"$WORK/mysql.sh"
  # The export and migrate lines run as written; the server line is this
  # script's node.
  grep -F 'export ROOMCELL_' "$WORK/mysql.sh" >"$WORK/env.sh"
  . "$WORK/env.sh"
  grep -F 'migrate' "$WORK/mysql.sh" >"$WORK/migrate.sh"
  PRELUDE=""
  GRPC=unused HTTP=unused
  run_lines <"$WORK/migrate.sh"
  start_node --config "$ROOT/configs/config.yaml"
  echo "tour: MySQL node at $GRPC on $ROOMCELL_ROOM_DATABASE"
  PRELUDE=""
  # The file runs no notice role (the README says so); the outage lines are --dev's.
  grep -v 'notice list\|fake-im/outage\|carol\|outbox list  \|sleep \|outbox show' "$WORK/tour.sh" >"$WORK/tour-mysql.sh"
  run_lines <"$WORK/tour-mysql.sh"
  stop_node
  echo "tour: the MySQL section ran as written"
fi
