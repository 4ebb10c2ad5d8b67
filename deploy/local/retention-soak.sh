#!/usr/bin/env bash
# The retention soak: two --dev nodes under `roomctl bench` side by side for
# DURATION (default 10m), one with short retention settings and one with
# retention off, sampling each node's heap and table sizes from /metrics
# every SAMPLE seconds. Prints one line per sample and leaves the raw
# samples in $OUT (default /tmp/retention-soak). Run it once by hand
# (`make retention-soak`); it is not part of `make test`.
set -euo pipefail
DURATION=${DURATION:-10m}
SAMPLE=${SAMPLE:-30}
OUT=${OUT:-/tmp/retention-soak}
CONC=${CONC:-4}
mkdir -p "$OUT"
cd "$(dirname "$0")/../.."
go build -o "$OUT/roomcell" ./cmd/roomcell
go build -o "$OUT/roomctl" ./cmd/roomctl

cat >"$OUT/on.yaml" <<'YAML'
log: {level: warn}
room: {snapshot_every: 20}
retention:
  outbox_published: "1m"
  command_log: "1m"
  wallet_outbox: "1m"
  notices_delivered: "1m"
  interval: "10s"
YAML
cat >"$OUT/off.yaml" <<'YAML'
log: {level: warn}
room: {snapshot_every: 20}
retention: {enabled: false}
YAML

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

start() { # name grpc http
  "$OUT/roomcell" --dev --config "$OUT/$1.yaml" --grpc-addr "127.0.0.1:$2" --http-addr "127.0.0.1:$3" >"$OUT/$1.log" 2>&1 &
  pids+=($!)
}
start on 19301 19401
start off 19302 19402
for port in 19401 19402; do
  for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.2; done
done
"$OUT/roomctl" --addr 127.0.0.1:19301 bench --duration "$DURATION" --concurrency "$CONC" --rooms 100 >"$OUT/bench-on.txt" 2>&1 &
pids+=($!)
"$OUT/roomctl" --addr 127.0.0.1:19302 bench --duration "$DURATION" --concurrency "$CONC" --rooms 100 >"$OUT/bench-off.txt" 2>&1 &
pids+=($!)

metric() { # port name [label]
  { curl -sf "http://127.0.0.1:$1/metrics" || true; } | awk -v m="$2" -v l="${3:-}" '$1 ~ "^"m && (l == "" || index($1, l)) && !done {print $2; done=1}'
}
# live_mb: the heap live at the last GC, next_gc / (1 + GOGC/100) at the
# default GOGC=100 (heap_inuse also holds garbage not yet collected).
echo "t_s node heap_inuse_mb live_mb outbox_rows log_rows purged_outbox purged_log" | tee "$OUT/samples.txt"
start_s=$(date +%s)
end_s=$((start_s + $(echo "$DURATION" | sed 's/m$/*60/;s/s$//' | bc) + 5))
while [ "$(date +%s)" -lt "$end_s" ]; do
  sleep "$SAMPLE"
  t=$(( $(date +%s) - start_s ))
  for n in on:19401 off:19402; do
    port=${n#*:}
    heap=$(metric "$port" go_memstats_heap_inuse_bytes)
    next=$(metric "$port" go_memstats_next_gc_bytes)
    line="$t ${n%%:*} $(awk -v h="${heap:-0}" -v g="${next:-0}" 'BEGIN {printf "%.1f %.1f", h/1048576, g/2/1048576}')"
    line="$line $(metric "$port" roomcell_retention_table_rows_estimate room_outbox) $(metric "$port" roomcell_retention_table_rows_estimate room_command_log)"
    line="$line $(metric "$port" roomcell_retention_rows_purged_total room_outbox) $(metric "$port" roomcell_retention_rows_purged_total room_command_log)"
    echo "$line" | tee -a "$OUT/samples.txt"
  done
done
wait "${pids[2]}" "${pids[3]}" || true
tail -n 3 "$OUT/bench-on.txt" "$OUT/bench-off.txt"
