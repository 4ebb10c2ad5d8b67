package grpcapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
)

type outboxFixture struct {
	store  *memdb.Store
	client roomcellv1.OutboxAdminClient
	mu     sync.Mutex
	kicked []string
}

func (f *outboxFixture) kicks() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string{}, f.kicked...)
}

// newOutboxFixture serves OutboxAdmin over memdb with rows:
// ev-ok (published), ev-new (pending, never tried),
// ev-fail (pending, failed twice); both pending rows are leased to node-a.
func newOutboxFixture(t *testing.T, withRelay bool) *outboxFixture {
	t.Helper()
	ctx := context.Background()
	f := &outboxFixture{store: memdb.New()}
	t.Cleanup(func() { f.store.Close() })
	for i, id := range []string{"ev-ok", "ev-new", "ev-fail"} {
		env := persistence.Envelope{EventID: id, EventType: "RoomUserJoined", AppCode: "app", RoomID: "r1",
			RoomSeq: int64(i + 1), CommandID: "c-" + id, CreatedAtMs: 1000 + int64(i), Payload: json.RawMessage(`{"user_id":"u1"}`)}
		err := f.store.Append(ctx, persistence.Append{Command: persistence.CommandRecord{AppCode: "app", RoomID: "r1",
			Seq: int64(i + 1), CommandID: "c-" + id, CommandType: "JoinRoom", Events: []persistence.Envelope{env}, CreatedAtMs: env.CreatedAtMs}})
		if err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(f.store.MarkOutboxPublished(ctx, "ev-ok", 2000))
	must(f.store.MarkOutboxFailed(ctx, "ev-fail", "im: timeout", 2000, 2000))
	must(f.store.MarkOutboxFailed(ctx, "ev-fail", "im: 503", 3000, 3000))
	if _, err := f.store.ClaimPendingOutbox(ctx, "node-a/1", time.Now().UnixMilli(), time.Hour.Milliseconds(), 10); err != nil {
		t.Fatal(err)
	}

	var kick func(string) bool
	if withRelay {
		kick = func(id string) bool {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.kicked = append(f.kicked, id)
			return true
		}
	}
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	roomcellv1.RegisterOutboxAdminServer(srv, NewOutboxAdminServer(f.store, kick, slog.New(slog.DiscardHandler)))
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	f.client = roomcellv1.NewOutboxAdminClient(conn)
	return f
}

func outboxIDs(es []*roomcellv1.OutboxEntry) string {
	ids := make([]string, len(es))
	for i, e := range es {
		ids[i] = e.GetEventId()
	}
	return strings.Join(ids, ",")
}

func wantCode(t *testing.T, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("error %v, want code %s", err, code)
	}
}

func TestOutboxAdminList(t *testing.T) {
	f := newOutboxFixture(t, true)
	ctx := context.Background()
	cases := []struct {
		status string
		limit  int32
		want   string
	}{
		{"", 0, "ev-ok,ev-new,ev-fail"},
		{"all", 2, "ev-ok,ev-new"},
		{"pending", 0, "ev-new,ev-fail"},
		{"published", 0, "ev-ok"},
		{"failed", 0, "ev-fail"},
		{"failed", 5000, "ev-fail"}, // the limit is capped, not refused
	}
	for _, c := range cases {
		r, err := f.client.ListOutbox(ctx, &roomcellv1.ListOutboxRequest{Status: c.status, Limit: c.limit})
		if err != nil {
			t.Fatalf("status %q: %v", c.status, err)
		}
		if got := outboxIDs(r.GetEntries()); got != c.want {
			t.Fatalf("status %q limit %d: %s, want %s", c.status, c.limit, got, c.want)
		}
		if r.GetPendingTotal() != 2 || r.GetOldestPendingCreatedAtMs() != 1001 || r.GetTruncated() {
			t.Fatalf("status %q: stats %d/%d truncated %v, want 2 pending, oldest 1001", c.status,
				r.GetPendingTotal(), r.GetOldestPendingCreatedAtMs(), r.GetTruncated())
		}
	}
	r, _ := f.client.ListOutbox(ctx, &roomcellv1.ListOutboxRequest{Status: "failed"})
	e := r.GetEntries()[0]
	if e.GetRetryCount() != 2 || e.GetLastError() != "im: 503" || e.GetLockedBy() != "node-a/1" || e.GetStatus() != "pending" {
		t.Fatalf("failed entry %+v, want retry_count 2, last_error, lease shown", e)
	}
	_, err := f.client.ListOutbox(ctx, &roomcellv1.ListOutboxRequest{Status: "dead"})
	wantCode(t, err, codes.InvalidArgument)
	_, err = f.client.ListOutbox(ctx, &roomcellv1.ListOutboxRequest{Limit: -1})
	wantCode(t, err, codes.InvalidArgument)
}

func TestOutboxAdminGet(t *testing.T) {
	f := newOutboxFixture(t, true)
	ctx := context.Background()
	r, err := f.client.GetOutbox(ctx, &roomcellv1.GetOutboxRequest{EventId: "ev-fail"})
	if err != nil {
		t.Fatal(err)
	}
	var env persistence.Envelope
	if err := json.Unmarshal([]byte(r.GetEnvelopeJson()), &env); err != nil {
		t.Fatalf("envelope_json %q: %v", r.GetEnvelopeJson(), err)
	}
	if env.EventID != "ev-fail" || env.RoomSeq != 3 || string(env.Payload) != `{"user_id":"u1"}` || r.GetEntry().GetRetryCount() != 2 {
		t.Fatalf("got %+v / %+v", env, r.GetEntry())
	}
	_, err = f.client.GetOutbox(ctx, &roomcellv1.GetOutboxRequest{EventId: "ev-nope"})
	wantCode(t, err, codes.NotFound)
	_, err = f.client.GetOutbox(ctx, &roomcellv1.GetOutboxRequest{})
	wantCode(t, err, codes.InvalidArgument)
	_, err = f.client.GetOutbox(ctx, &roomcellv1.GetOutboxRequest{EventId: strings.Repeat("x", 129)})
	wantCode(t, err, codes.InvalidArgument)
}

// Requeue (RetryOutbox): a pending row becomes due at once but keeps the
// live lease of the sender holding it (one sender per room); a parked row
// goes back to pending and is claimed again; published rows are refused.
func TestOutboxAdminRetry(t *testing.T) {
	f := newOutboxFixture(t, true)
	ctx := context.Background()
	before := time.Now().UnixMilli()
	r, err := f.client.RetryOutbox(ctx, &roomcellv1.RetryOutboxRequest{EventId: "ev-fail"})
	if err != nil {
		t.Fatal(err)
	}
	e := r.GetEntry()
	if !r.GetRelayNotified() || e.GetLockedBy() != "node-a/1" || e.GetRetryCount() != 2 || e.GetStatus() != "pending" || e.GetNextRetryAtMs() < before {
		t.Fatalf("retry reply %+v, want due now, lease kept, retry_count kept, relay notified", r)
	}
	if k := f.kicks(); len(k) != 1 || k[0] != "ev-fail" {
		t.Fatalf("relay kicked with %v, want [ev-fail]", k)
	}
	rows, err := f.store.ClaimPendingOutbox(ctx, "node-b/1", time.Now().UnixMilli(), 1000, 10)
	if err != nil || len(rows) != 0 {
		t.Fatalf("claim while node-a holds the room: %v %v, want nothing", outboxIDs(entries(rows)), err)
	}

	// A parked row comes back through requeue.
	for _, id := range []string{"ev-new", "ev-fail"} {
		if err := f.store.ReleaseOutbox(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.store.ParkOutbox(ctx, "ev-fail", "corrupt envelope", time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	list, err := f.client.ListOutbox(ctx, &roomcellv1.ListOutboxRequest{Status: "parked"})
	if err != nil || outboxIDs(list.GetEntries()) != "ev-fail" {
		t.Fatalf("list --status parked: %v %v", list, err)
	}
	if r, err = f.client.RetryOutbox(ctx, &roomcellv1.RetryOutboxRequest{EventId: "ev-fail"}); err != nil || r.GetEntry().GetStatus() != "pending" {
		t.Fatalf("requeue of a parked row: %+v %v", r, err)
	}
	rows, err = f.store.ClaimPendingOutbox(ctx, "node-b/1", time.Now().UnixMilli(), 1000, 10)
	if err != nil || outboxIDs(entries(rows)) != "ev-new,ev-fail" {
		t.Fatalf("claim after requeue: %v %v, want the room in order", outboxIDs(entries(rows)), err)
	}

	_, err = f.client.RetryOutbox(ctx, &roomcellv1.RetryOutboxRequest{EventId: "ev-ok"})
	wantCode(t, err, codes.FailedPrecondition)
	_, err = f.client.RetryOutbox(ctx, &roomcellv1.RetryOutboxRequest{EventId: "ev-nope"})
	wantCode(t, err, codes.NotFound)
	if k := f.kicks(); len(k) != 2 {
		t.Fatalf("refused retries kicked the relay: %v", k)
	}

	noRelay := newOutboxFixture(t, false)
	r, err = noRelay.client.RetryOutbox(ctx, &roomcellv1.RetryOutboxRequest{EventId: "ev-fail"})
	if err != nil || r.GetRelayNotified() {
		t.Fatalf("retry without a relay: %+v %v, want relay_notified false", r, err)
	}
}

// Skip records who, when and why; it needs both; published rows and
// skipped ones cannot be requeued.
func TestOutboxAdminSkip(t *testing.T) {
	f := newOutboxFixture(t, true)
	ctx := context.Background()
	for _, req := range []*roomcellv1.SkipOutboxRequest{
		{EventId: "ev-fail", Reason: "", Operator: "alice"},
		{EventId: "ev-fail", Reason: "lost", Operator: " "},
		{EventId: "", Reason: "lost", Operator: "alice"},
		{EventId: "ev-fail", Reason: strings.Repeat("x", 600), Operator: "alice"},
	} {
		_, err := f.client.SkipOutbox(ctx, req)
		wantCode(t, err, codes.InvalidArgument)
	}
	if row, _ := f.store.GetOutbox(ctx, "ev-fail"); row.Status != "pending" {
		t.Fatalf("a refused skip changed the row: %+v", row)
	}
	before := time.Now().UnixMilli()
	r, err := f.client.SkipOutbox(ctx, &roomcellv1.SkipOutboxRequest{EventId: "ev-fail", Reason: "room re-synced by hand", Operator: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	e := r.GetEntry()
	if e.GetStatus() != "skipped" || e.GetResolvedBy() != "alice" || e.GetResolution() != "room re-synced by hand" || e.GetResolvedAtMs() < before {
		t.Fatalf("skip reply %+v", e)
	}
	_, err = f.client.RetryOutbox(ctx, &roomcellv1.RetryOutboxRequest{EventId: "ev-fail"})
	wantCode(t, err, codes.FailedPrecondition)
	_, err = f.client.SkipOutbox(ctx, &roomcellv1.SkipOutboxRequest{EventId: "ev-ok", Reason: "x", Operator: "alice"})
	wantCode(t, err, codes.FailedPrecondition)
	_, err = f.client.SkipOutbox(ctx, &roomcellv1.SkipOutboxRequest{EventId: "ev-nope", Reason: "x", Operator: "alice"})
	wantCode(t, err, codes.NotFound)
}

func TestOutboxAdminStoreDown(t *testing.T) {
	f := newOutboxFixture(t, true)
	f.store.Close()
	_, err := f.client.ListOutbox(context.Background(), &roomcellv1.ListOutboxRequest{})
	wantCode(t, err, codes.Unavailable)
	if strings.Contains(status.Convert(err).Message(), "memdb") {
		t.Fatalf("store detail leaked to the caller: %v", err)
	}
}

func entries(rows []persistence.OutboxRow) []*roomcellv1.OutboxEntry {
	out := make([]*roomcellv1.OutboxEntry, len(rows))
	for i, r := range rows {
		out[i] = outboxEntry(r)
	}
	return out
}
