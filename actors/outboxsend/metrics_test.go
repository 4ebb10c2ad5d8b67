package outboxsend

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The relay and the publisher of one process share the families and are
// told apart by the sender label; both series exist at zero before the
// first send.
func TestSendersShareFamiliesByLabel(t *testing.T) {
	reg := prometheus.NewRegistry()
	relay, err := For(reg, Relay)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := For(reg, Publisher)
	if err != nil {
		t.Fatalf("second sender on the same registry: %v", err)
	}
	want := `
# HELP room_outbox_publish_success_total room_outbox rows marked published, by sender: relay (the outbox relay) or publisher (the room's own publisher).
# TYPE room_outbox_publish_success_total counter
room_outbox_publish_success_total{sender="publisher"} 0
room_outbox_publish_success_total{sender="relay"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "room_outbox_publish_success_total"); err != nil {
		t.Fatal(err)
	}
	relay.Success.Inc()
	pub.Success.Add(3)
	pub.Failure.Inc()
	pub.Latency.Observe(12)
	want = `
# HELP room_outbox_publish_success_total room_outbox rows marked published, by sender: relay (the outbox relay) or publisher (the room's own publisher).
# TYPE room_outbox_publish_success_total counter
room_outbox_publish_success_total{sender="publisher"} 3
room_outbox_publish_success_total{sender="relay"} 1
# HELP room_outbox_publish_failure_total Publish attempts of room_outbox rows that failed (the row stays pending), by sender.
# TYPE room_outbox_publish_failure_total counter
room_outbox_publish_failure_total{sender="publisher"} 1
room_outbox_publish_failure_total{sender="relay"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "room_outbox_publish_success_total", "room_outbox_publish_failure_total"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(reg, "room_outbox_publish_latency_ms"); n != 2 {
		t.Fatalf("latency series %d, want 2", n)
	}
	// A family of the same name but another shape is an error, not a reuse.
	bad := prometheus.NewRegistry()
	bad.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "room_outbox_publish_success_total", Help: "x"}))
	if _, err := For(bad, Relay); err == nil {
		t.Fatal("a clashing family was accepted")
	}
}
