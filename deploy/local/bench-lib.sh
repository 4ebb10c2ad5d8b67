# bench-lib.sh: what the measurement scripts (join-ratio.sh,
# mariadb-ratio.sh, heap-per-room.sh) share; sourced, not run. Each starts
# a node on 127.0.0.1:13001/13101 and sets PID to it.

# wait_ready LOG waits up to 30 s for the node to be ready, and exits
# naming LOG when it died instead.
wait_ready() {
	for _ in $(seq 150); do curl -sf 127.0.0.1:13101/readyz >/dev/null && break; sleep 0.2; done
	kill -0 "$PID" 2>/dev/null || { echo "server did not start: $1" >&2; exit 1; }
}

# cpu prints the node's CPU so far (utime+stime, in clock ticks).
cpu() { awk '{print $14+$15}' "/proc/$PID/stat"; }

# metric NAME prints the node's metric NAME (an unlabelled one) as an integer.
metric() { curl -s 127.0.0.1:13101/metrics | awk -v m="$1" '$1==m{printf "%.0f", $2}'; }
