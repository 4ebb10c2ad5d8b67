package main

import (
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/hyapp/roomcell/actors/purge"
	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/grpcapi"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
)

// A real PurgeAdmin over a memdb room store with three published rows
// older than the retention and one pending one.
func startPurgeTestServer(t *testing.T) (addr string, store *memdb.Store) {
	t.Helper()
	store = memdb.New()
	old := time.Now().Add(-100 * time.Hour).UnixMilli()
	key := persistence.RoomKey{AppCode: "lalu", RoomID: "r1"}
	for seq := int64(1); seq <= 4; seq++ {
		id := "ev-" + strings.Repeat("x", int(seq))
		c := persistence.CommandRecord{AppCode: key.AppCode, RoomID: key.RoomID, Seq: seq, CommandID: id, CommandType: "JoinRoom",
			Reply: []byte("r"), CreatedAtMs: old + seq, Events: []persistence.Envelope{{EventID: id, EventType: "RoomUserJoined",
				AppCode: key.AppCode, RoomID: key.RoomID, RoomSeq: seq, CreatedAtMs: old + seq, Payload: []byte(`{}`)}}}
		if err := store.Append(t.Context(), persistence.Append{Command: c}); err != nil {
			t.Fatal(err)
		}
		if seq < 4 {
			if err := store.MarkOutboxPublished(t.Context(), id, old+seq); err != nil {
				t.Fatal(err)
			}
		}
	}
	svc, err := purge.NewService(purge.Deps{Purgers: []persistence.Purger{store}, Config: configs.WithDefaults(configs.RetentionConfig{}), NodeID: "node-a",
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	roomcellv1.RegisterPurgeAdminServer(srv, grpcapi.NewPurgeAdminServer(svc, "node-a", true, slog.New(slog.DiscardHandler)))
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String(), store
}

func TestRoomctlPurgeStatusAndDryRun(t *testing.T) {
	addr, store := startPurgeTestServer(t)
	code, out, errOut := outboxCtl(t, addr, "purge", "status")
	if code != 0 {
		t.Fatalf("status exit %d: %s", code, errOut)
	}
	for _, want := range []string{"node node-a  purge worker on", "room_outbox", "72h0m0s", "wallet_outbox", "not held on this node"} {
		if !strings.Contains(out, want) {
			t.Fatalf("status output lacks %q:\n%s", want, out)
		}
	}
	code, out, errOut = outboxCtl(t, addr, "purge", "--dry-run")
	if code != 0 {
		t.Fatalf("dry run exit %d: %s", code, errOut)
	}
	lines := strings.Split(out, "\n")
	var outboxLine string
	for _, l := range lines {
		if strings.HasPrefix(l, "room_outbox") {
			outboxLine = l
		}
	}
	// 3 published rows are past 72h; the pending one never goes.
	if f := strings.Fields(outboxLine); len(f) == 0 || f[len(f)-1] != "3" {
		t.Fatalf("dry run room_outbox line %q, want 3 rows to delete:\n%s", outboxLine, out)
	}
	// The dry run deleted nothing.
	for _, id := range []string{"ev-x", "ev-xx", "ev-xxx", "ev-xxxx"} {
		if _, err := store.GetOutbox(t.Context(), id); err != nil {
			t.Fatalf("dry run deleted %s: %v", id, err)
		}
	}
	code, out, _ = outboxCtl(t, addr, "--json", "purge", "--dry-run")
	if code != 0 || !strings.Contains(out, `"purgeable":"3"`) {
		t.Fatalf("json dry run: exit %d %s", code, out)
	}
	if code, _, errOut = outboxCtl(t, addr, "purge"); code == 0 || !strings.Contains(errOut, "--dry-run") {
		t.Fatalf("purge without --dry-run: exit %d %q", code, errOut)
	}
}
