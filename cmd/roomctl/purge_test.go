package main

import (
	"context"
	"errors"
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
	store = purgeTestStore(t, 3)
	svc := purgeTestService(t, store)
	return servePurgeAdmin(t, grpcapi.NewPurgeAdminServer(svc, "node-a", true, slog.New(slog.DiscardHandler))), store
}

func purgeTestService(t *testing.T, purgers ...persistence.Purger) *purge.Service {
	t.Helper()
	svc, err := purge.NewService(purge.Deps{Purgers: purgers, Config: configs.WithDefaults(configs.RetentionConfig{}), NodeID: "node-a",
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

func servePurgeAdmin(t *testing.T, s *grpcapi.PurgeAdminServer) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	roomcellv1.RegisterPurgeAdminServer(srv, s)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// purgeTestStore is a memdb room store with published rows older than the
// retention, and one pending one.
func purgeTestStore(t *testing.T, published int64) *memdb.Store {
	t.Helper()
	store := memdb.New()
	old := time.Now().Add(-100 * time.Hour).UnixMilli()
	key := persistence.RoomKey{AppCode: "lalu", RoomID: "r1"}
	for seq := int64(1); seq <= published+1; seq++ {
		id := "ev-" + strings.Repeat("x", int(seq))
		c := persistence.CommandRecord{AppCode: key.AppCode, RoomID: key.RoomID, Seq: seq, CommandID: id, CommandType: "JoinRoom",
			Reply: []byte("r"), CreatedAtMs: old + seq, Events: []persistence.Envelope{{EventID: id, EventType: "RoomUserJoined",
				AppCode: key.AppCode, RoomID: key.RoomID, RoomSeq: seq, CreatedAtMs: old + seq, Payload: []byte(`{}`)}}}
		if err := store.Append(t.Context(), persistence.Append{Command: c}); err != nil {
			t.Fatal(err)
		}
		if seq <= published {
			if err := store.MarkOutboxPublished(t.Context(), id, old+seq); err != nil {
				t.Fatal(err)
			}
		}
	}
	return store
}

// downPurgeSource is the retention service of a room database that does
// not answer: its tables are listed, with the error.
type downPurgeSource struct{}

func (downPurgeSource) Status(context.Context, bool) ([]purge.TableReport, error) {
	return []purge.TableReport{{Table: persistence.PurgeRoomOutbox, Held: true, Purgeable: -1},
			{Table: persistence.PurgeCommandLog, Held: true, Purgeable: -1}, {Table: persistence.PurgeWalletOutbox, Purgeable: -1}},
		errors.New("room_outbox: mysql: connection refused")
}

// With several room databases purge status lists every database's room
// tables, each line with its database, and the wallet and notice tables
// once; a database that does not answer keeps its lines, marked, and the
// others' counts are right.
func TestRoomctlPurgeStatusEveryRoomDatabase(t *testing.T) {
	first, second := purgeTestStore(t, 3), purgeTestStore(t, 2)
	wallet := memdb.NewWalletStore()
	a := purgeTestService(t, first, wallet)
	s := grpcapi.NewPurgeAdminServer(a, "node-a", true, slog.New(slog.DiscardHandler)).WithRoomDBs([]grpcapi.PurgeDB{
		{Key: "default", Source: a}, {Key: "b", Source: purgeTestService(t, second)}, {Key: "c", Source: downPurgeSource{}}})
	addr := servePurgeAdmin(t, s)
	code, out, errOut := outboxCtl(t, addr, "purge", "--dry-run")
	if code != 0 {
		t.Fatalf("dry run exit %d: %s", code, errOut)
	}
	lines := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 1 {
			if _, dup := lines[f[0]+" "+f[1]]; dup {
				t.Fatalf("line %q twice:\n%s", f[0]+" "+f[1], out)
			}
			lines[f[0]+" "+f[1]] = l
		}
	}
	last := func(l string) string { f := strings.Fields(l); return f[len(f)-1] }
	if l := lines["default room_outbox"]; l == "" || last(l) != "3" {
		t.Fatalf("default's room_outbox line %q, want 3 to delete:\n%s", l, out)
	}
	if l := lines["b room_outbox"]; l == "" || last(l) != "2" {
		t.Fatalf("b's room_outbox line %q, want 2 to delete:\n%s", l, out)
	}
	if l := lines["c room_outbox"]; !strings.Contains(l, "status incomplete") || !strings.Contains(l, "connection refused") {
		t.Fatalf("c's room_outbox line %q, want it marked incomplete:\n%s", l, out)
	}
	for _, want := range []string{"ROOM DB", "default room_command_log", "b room_command_log", "c room_command_log", "- wallet_outbox", "- notice_delivery_events"} {
		if _, ok := lines[want]; !ok && !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "c wallet_outbox") || strings.Contains(out, "b wallet_outbox") {
		t.Fatalf("the wallet table is listed per room database:\n%s", out)
	}
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
