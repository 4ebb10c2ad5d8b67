#!/bin/bash
# watermill-ratio.sh: the relay's drain beside Watermill's SQL forwarder in
# its fastest ordered configuration, on the same MariaDB in the same run.
# Each pair runs, in this order:
#   A  roomcell: BenchmarkRelayDrainMariaDB (actors/relay): 100,000 pending
#      rows in 1,000 rooms drained by the whole relay actor (claim, envelope
#      checks, send, published mark, batch sizes as configured by default)
#      into a sink that accepts every event at once;
#   B  Watermill: 100,000 messages for 1,000 room topics published through
#      forwarder.Publisher into one forwarder topic on watermill-sql's
#      queue schema (MySQLQueueSchema, MySQLQueueOffsetsAdapter with
#      DeleteOnAck, one subscriber, no consumer group: one table read in
#      offset order, so one subscriber keeps order as the relay keeps each
#      room's), then drained by forwarder.Forwarder (SubscribeBatchSize 500,
#      poll 50 ms, as the relay's batch_size and poll_interval) into a
#      no-op publisher. The queue schema is Watermill's fastest SQL
#      configuration; its offsets schema (DefaultMySQLSchema) is slower.
# Seeding is not timed on either side.
# With RELAY=1 each pair also runs C: BenchmarkRelayBacklogMariaDB
# events=100000/rooms=1000/relays=1/claim=grows (the relay through the
# Tencent IM client into the fake IM over loopback HTTP, not a no-op sink).
# With RELAY_BASE=<git revision> (or RELAY_BASE_TEST=<a test binary of actors/relay>)
# each pair first runs A0: A with that build's relay (before/after in the
# same pairs: A0, A, B).
# Prints rows/s of each, A÷B (and A0÷B, C÷B) per pair, the medians and
# the load average (on a shared machine the load moves both sides; compare
# ratios within a pair).
#
# Watermill is never part of roomcell's module: the forwarder program is
# written into a scratch module (WM_DIR, default /tmp/roomcell-watermill)
# and Watermill fetched there with go get at run time.
#
#	PAIRS=3 deploy/local/watermill-ratio.sh
#
# Needs MariaDB on 127.0.0.1:3306 as root without a password (MYSQL_DSN for
# the Watermill side; roomcell's side uses its test defaults,
# ROOMCELL_TEST_MYSQL_DSN to point it elsewhere). Drops and creates the
# database watermill_ratio. mariadbd's CPU counts every client of the
# server: for a clean figure run both sides against a MariaDB of your own
# (MYSQL_DSN, ROOMCELL_TEST_MYSQL_DSN and ROOMCELL_BENCH_DB_PID, its pid).
set -eu
cd "$(dirname "$0")/../.."
PAIRS=${PAIRS:-3}
WM_DIR=${WM_DIR:-/tmp/roomcell-watermill}
WM_VERSION=${WM_VERSION:-v1.5.1}
WM_SQL_VERSION=${WM_SQL_VERSION:-v4.1.2}
MYSQL_DSN=${MYSQL_DSN:-root@tcp(127.0.0.1:3306)/}
RC_TEST=${RC_TEST:-/tmp/watermill-ratio-relay.test}

mkdir -p "$WM_DIR"
cat >"$WM_DIR/main.go" <<'GO'
// Drains a backlog through Watermill's SQL forwarder (queue schema,
// delete on ack, one subscriber) into a no-op publisher.
package main

import (
	"context"
	stdsql "database/sql"
	"flag"
	"fmt"
	"log"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/components/forwarder"
	"github.com/ThreeDotsLabs/watermill/message"
	_ "github.com/go-sql-driver/mysql"
)

type noop struct {
	n    atomic.Int64
	want int64
	done chan struct{}
}

func (p *noop) Publish(topic string, msgs ...*message.Message) error {
	if p.n.Add(int64(len(msgs))) == p.want {
		close(p.done)
	}
	return nil
}
func (p *noop) Close() error { return nil }

func main() {
	dsn := flag.String("dsn", "root@tcp(127.0.0.1:3306)/", "server DSN without a database")
	dbName := flag.String("db", "watermill_ratio", "database to drop and create")
	rows := flag.Int("rows", 100_000, "backlog messages")
	rooms := flag.Int("rooms", 1000, "rooms (one destination topic each)")
	batch := flag.Int("batch", 500, "SubscribeBatchSize")
	flag.Parse()
	ctx := context.Background()

	admin, err := stdsql.Open("mysql", *dsn)
	must(err)
	_, err = admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+*dbName)
	must(err)
	_, err = admin.ExecContext(ctx, "CREATE DATABASE "+*dbName)
	must(err)
	admin.Close()
	db, err := stdsql.Open("mysql", *dsn+*dbName+"?parseTime=true")
	must(err)
	db.SetMaxOpenConns(8)
	logger := watermill.NopLogger{}
	schema := wsql.MySQLQueueSchema{SubscribeBatchSize: *batch}
	offsets := wsql.MySQLQueueOffsetsAdapter{DeleteOnAck: true}

	sqlPub, err := wsql.NewPublisher(wsql.BeginnerFromStdSQL(db), wsql.PublisherConfig{SchemaAdapter: schema, AutoInitializeSchema: true}, logger)
	must(err)
	fwdPub := forwarder.NewPublisher(sqlPub, forwarder.PublisherConfig{})
	// 100 messages per publish (one multi-row INSERT), rooms interleaved as
	// in roomcell's backlog benchmarks.
	const perPublish = 100
	t0 := time.Now()
	for n := 0; n < *rows; n += perPublish {
		msgs := make([]*message.Message, perPublish)
		for i := range msgs {
			msgs[i] = message.NewMessage(watermill.NewUUID(), []byte(fmt.Sprintf(`{"user_id":"u%d","joined_at_ms":%d}`, n+i, n)))
		}
		must(fwdPub.Publish(fmt.Sprint("r", (n/perPublish)%*rooms), msgs...))
	}
	seed := time.Since(t0)

	sink := &noop{want: int64(*rows), done: make(chan struct{})}
	sub, err := wsql.NewSubscriber(wsql.BeginnerFromStdSQL(db), wsql.SubscriberConfig{PollInterval: 50 * time.Millisecond,
		SchemaAdapter: schema, OffsetsAdapter: offsets, InitializeSchema: true}, logger)
	must(err)
	fwd, err := forwarder.NewForwarder(sub, sink, logger, forwarder.Config{})
	must(err)
	start := time.Now()
	go func() { _ = fwd.Run(ctx) }()
	select {
	case <-sink.done:
	case <-time.After(10 * time.Minute):
		log.Fatalf("drained %d of %d in 10 minutes", sink.n.Load(), *rows)
	}
	el := time.Since(start)
	_ = fwd.Close()
	fmt.Printf("seed %.1f s, drain %.2f s, %.0f rows/s\n", seed.Seconds(), el.Seconds(), float64(*rows)/el.Seconds())
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
GO
(
	cd "$WM_DIR"
	[ -f go.mod ] || go mod init watermillratio >/dev/null 2>&1
	go get "github.com/ThreeDotsLabs/watermill@$WM_VERSION" "github.com/ThreeDotsLabs/watermill-sql/v4@$WM_SQL_VERSION" github.com/go-sql-driver/mysql >/dev/null 2>&1
	go mod tidy >/dev/null 2>&1
	go build -o wmbench .
)
go test -c -o "$RC_TEST" ./actors/relay
if [ -n "${RELAY_BASE:-}" ] && [ -z "${RELAY_BASE_TEST:-}" ]; then
	RELAY_BASE_TEST=/tmp/watermill-ratio-base.test
	rm -rf /tmp/watermill-ratio-base && mkdir -p /tmp/watermill-ratio-base
	git archive "$RELAY_BASE" | tar -x -C /tmp/watermill-ratio-base
	(cd /tmp/watermill-ratio-base && go test -c -o "$RELAY_BASE_TEST" ./actors/relay)
fi

# mariadbd's CPU per drained row on the relay side (db-µs/row), read from
# /proc by the benchmark: the server listening on 3306, all its work over
# the drain (other clients of the same server count too).
export ROOMCELL_BENCH_DB_PID=${ROOMCELL_BENCH_DB_PID:-$(ss -ltnpH 'sport = :3306' 2>/dev/null | sed -n 's/.*pid=\([0-9]*\).*/\1/p' | head -1)}
metric_of() { awk -v u="$1" '{for (i = 2; i <= NF; i++) if ($i == u) print $(i-1)}' | head -1; }
median() { sort -n | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
A_ALL= B_ALL= C_ALL= R_ALL= CR_ALL= D_ALL= Z_ALL= ZR_ALL= ZD_ALL=
for p in $(seq "$PAIRS"); do
	Z=- ZR=- ZD=-
	if [ -n "${RELAY_BASE_TEST:-}" ]; then
		Z=$(cd actors/relay && "$RELAY_BASE_TEST" -test.run '^$' -test.bench 'RelayDrainMariaDB' -test.benchtime 1x 2>&1 | tee /tmp/watermill-ratio-a0.log | metric_of rows/s)
		ZD=$(metric_of db-µs/row </tmp/watermill-ratio-a0.log)
		[ -n "$Z" ] || { echo "pair $p: the base relay printed no rate (see /tmp/watermill-ratio-a0.log)" >&2; exit 1; }
	fi
	A=$(cd actors/relay && "$RC_TEST" -test.run '^$' -test.bench 'RelayDrainMariaDB' -test.benchtime 1x 2>&1 | tee /tmp/watermill-ratio-a.log | metric_of rows/s)
	D=$(metric_of db-µs/row </tmp/watermill-ratio-a.log)
	D_ALL="$D_ALL ${D:-0}"
	B=$("$WM_DIR/wmbench" -dsn "$MYSQL_DSN" | tee /tmp/watermill-ratio-b.log | metric_of rows/s)
	C=- CR=-
	if [ "${RELAY:-0}" = 1 ]; then
		C=$(cd actors/relay && "$RC_TEST" -test.run '^$' -test.bench 'RelayBacklogMariaDB/events=100000/rooms=1000/relays=1/claim=grows' -test.benchtime 1x 2>&1 | metric_of events/s)
		CR=$(awk -v c="$C" -v b="$B" 'BEGIN {printf "%.2f", c/b}')
		C_ALL="$C_ALL $C" CR_ALL="$CR_ALL $CR"
	fi
	[ -n "$A" ] && [ -n "$B" ] || { echo "pair $p: a side printed no rate (see /tmp/watermill-ratio-a.log, -b.log)" >&2; exit 1; }
	R=$(awk -v a="$A" -v b="$B" 'BEGIN {printf "%.2f", a/b}')
	A_ALL="$A_ALL $A" B_ALL="$B_ALL $B" R_ALL="$R_ALL $R"
	if [ "$Z" != - ]; then
		ZR=$(awk -v a="$Z" -v b="$B" 'BEGIN {printf "%.2f", a/b}')
		Z_ALL="$Z_ALL $Z" ZR_ALL="$ZR_ALL $ZR" ZD_ALL="$ZD_ALL ${ZD:-0}"
		printf 'base %d  relay drain %6.0f rows/s (mariadbd %s µs/row)  ratio %s\n' "$p" "$Z" "${ZD:--}" "$ZR"
	fi
	printf 'pair %d  relay drain (no-op sink) %6.0f rows/s (mariadbd %s µs/row)  watermill queue-schema forwarder %6.0f rows/s  ratio %s  relay(fake IM) %s events/s, ÷B %s  load %s\n' \
		"$p" "$A" "${D:--}" "$B" "$R" "$C" "$CR" "$(cut -d' ' -f1 /proc/loadavg)"
done
printf 'median  relay drain %s rows/s (mariadbd %s µs/row)  watermill queue schema %s rows/s  ratio %s' \
	"$(echo $A_ALL | tr ' ' '\n' | median)" "$(echo $D_ALL | tr ' ' '\n' | median)" "$(echo $B_ALL | tr ' ' '\n' | median)" "$(echo $R_ALL | tr ' ' '\n' | median)"
[ -z "$C_ALL" ] || printf '  relay(fake IM) %s events/s, ÷B %s' "$(echo $C_ALL | tr ' ' '\n' | median)" "$(echo $CR_ALL | tr ' ' '\n' | median)"
[ -z "$Z_ALL" ] || printf '  base relay %s rows/s (mariadbd %s µs/row), ratio %s' "$(echo $Z_ALL | tr ' ' '\n' | median)" "$(echo $ZD_ALL | tr ' ' '\n' | median)" "$(echo $ZR_ALL | tr ' ' '\n' | median)"
printf '  (uptime: %s)\n' "$(uptime | sed 's/.*load/load/')"
