package roomgrain

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hyapp/roomcell/room"

	"github.com/hyapp/roomcell/internal/logtest"
	"github.com/hyapp/roomcell/persistence"
)

// syncBuffer is a log sink the logging goroutines write while the test reads.
type syncBuffer = logtest.Buffer

// secretFailing fails every publish after the room's creation with an
// error that quotes a Tencent URL with its UserSig, as a transport error
// would. (A failed creation would hold the join back behind it.)
type secretFailing struct{}

func (secretFailing) PublishRoomEvent(_ context.Context, env persistence.Envelope) error {
	if env.RoomSeq < 2 {
		return nil
	}
	return errors.New(`Post "https://console.tim.qq.com/v4/group_open_http_svc/send_group_system_notification?usersig=TOPSECRET&identifier=admin": connection refused`)
}

// Seed 000, Observability: a failed sync publish logs the seed's eight
// fields (worker, node_id, event_id, event_type, room_id, retry_count,
// status, error) like the relay does, with the secret-free error text.
func TestSyncPublishFailureLogsSeedFields(t *testing.T) {
	f := newFixture(t)
	sink := &syncBuffer{}
	// The node's logger carries node_id, as cmd/roomcell makes it.
	f.deps.Logger = slog.New(slog.NewJSONHandler(sink, &slog.HandlerOptions{Level: slog.LevelDebug})).With("node_id", "node-9")
	f.deps.Publisher = secretFailing{}
	f.deps.NodeID = "node-9"
	pid := f.activate("app/r1")
	f.mustDo(pid, rcCreate("c1", "owner"))
	r := f.mustDo(pid, rcJoin("c2", "bob"))
	joinID := r.EventIds[0]

	var line map[string]any
	deadline := time.Now().Add(5 * time.Second)
	for line == nil && time.Now().Before(deadline) {
		for _, l := range sink.Lines() {
			if l["event_id"] == joinID && strings.Contains(l["msg"].(string), "sync publish failed") {
				line = l
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if line == nil {
		t.Fatalf("no sync publish failure line for %s in %v", joinID, sink.Lines())
	}
	want := map[string]any{
		"worker": "room_outbox", "node_id": "node-9", "event_id": joinID, "event_type": room.TypeRoomUserJoined,
		"room_id": "r1", "retry_count": float64(0), "status": persistence.OutboxPending,
	}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("field %s = %v, want %v (line %v)", k, line[k], v, line)
		}
	}
	text, _ := line["error"].(string)
	if text == "" || strings.Contains(text, "TOPSECRET") || strings.Contains(text, "usersig") {
		t.Fatalf("error field %q: want the secret-free error text", text)
	}
	for _, l := range sink.Lines() {
		if b, _ := json.Marshal(l); strings.Contains(string(b), "TOPSECRET") {
			t.Fatalf("a log line carries the UserSig: %s", b)
		}
	}
}
