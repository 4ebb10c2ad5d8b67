package roomgrain

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hyapp/roomcell/room"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/hyapp/roomcell/persistence"
)

// A room whose publisher is stuck overflows on every command: each
// overflowing event is counted in roomcell_room_publish_overflow_total,
// the log gets one line for the room (not one per command) reporting them
// all, and nothing is lost: once IM is back, one more command's catch-up
// sends every event in room order.
func TestPublishOverflowIsAMetricAndOneLogLine(t *testing.T) {
	f := newFixture(t)
	sink := &syncBuffer{}
	f.deps.Logger = slog.New(slog.NewJSONHandler(sink, nil))
	reg := prometheus.NewRegistry()
	m, err := NewPublishMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	f.deps.PublishMetrics = m
	f.deps.MaxPublishBacklog = 2
	pub := newOrderPublisher()
	gate := make(chan struct{})
	pub.gate[room.EventID("app", "r1", 2, 0)] = gate // the first join holds the publisher
	f.deps.Publisher = pub
	pid := f.activate("app/r1")
	f.mustDo(pid, rcCreate("c1", "owner"))
	f.mustDo(pid, rcJoin("c2", "u0"))
	select {
	case <-pub.entered:
	case <-time.After(3 * time.Second):
		t.Fatal("publisher did not start the first join")
	}
	const cmds = 150 // under one catch-up's claim: no relay runs here
	for i := range cmds {
		f.mustDo(pid, rcJoin(fmt.Sprintf("c%d", i+3), fmt.Sprintf("u%d", i+1)))
	}
	rows, err := f.store.ListOutbox(context.Background(), persistence.OutboxFilter{Limit: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	unleased := 0
	for _, r := range rows {
		if r.Status == persistence.OutboxPending && r.LockedBy == "" {
			unleased++
		}
	}
	got := counterValue(m.Overflow)
	if unleased < cmds-2 || got != float64(unleased) {
		t.Fatalf("overflow metric %v, rows left to the relay %d (of %d commands): want them equal and nearly all", got, unleased, cmds)
	}
	var lines []map[string]any
	for _, l := range sink.Lines() {
		if strings.Contains(l["msg"].(string), "backlog full") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("%d backlog-full lines for %d overflowing commands: want 1", len(lines), unleased)
	}

	close(gate)
	f.mustDo(pid, rcJoin("after", "late")) // its catch-up takes the relay's rows
	want, _ := roomEventIDs(t, f)
	pub.waitDelivered(t, want)
	waitFor(t, func() bool { _, p := roomEventIDs(t, f); return p == 0 })
	// Every event went through this publisher (no relay runs here):
	// seed 000's success counter says so under sender="publisher".
	if ok, failed := counterValue(m.Sends.Success), counterValue(m.Sends.Failure); ok != float64(len(want)) || failed != 0 {
		t.Fatalf("publisher success %v, failure %v; want %d and 0", ok, failed, len(want))
	}
}

// The rate limit of the overflow line: one per room per interval, each
// carrying the events held back since the previous one.
func TestOverflowLogCountsHeldEvents(t *testing.T) {
	var o overflowLog
	t0 := time.Unix(1000, 0)
	if n, ok := o.note(t0, 3); !ok || n != 3 {
		t.Fatalf("first overflow: %d %v, want a line for 3", n, ok)
	}
	for i := range 100 {
		if _, ok := o.note(t0.Add(time.Duration(i)*time.Millisecond), 2); ok {
			t.Fatalf("line %d within the interval", i)
		}
	}
	if n, ok := o.note(t0.Add(overflowLogEvery), 1); !ok || n != 201 {
		t.Fatalf("after the interval: %d %v, want a line for 201 events", n, ok)
	}
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	_ = c.Write(&m)
	return m.GetCounter().GetValue()
}
