package roomnotice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/hyapp/roomcell/actors/notice"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
	"github.com/hyapp/roomcell/room"
)

func kick(id string, createdMs int64, target string) persistence.Envelope {
	p, _ := json.Marshal(room.RoomUserKicked{TargetUserID: target, OperatorUserID: "owner", Reason: "spam", BanUntilMs: createdMs + 60_000})
	return persistence.Envelope{EventID: id, EventType: room.TypeRoomUserKicked, AppCode: "lalu", RoomID: "r1", RoomSeq: 5,
		CommandID: "c-" + id, CreatedAtMs: createdMs, Payload: p}
}

func TestFromEnvelopeKick(t *testing.T) {
	env := kick("lalu:r1:5:0", 1710000000000, "bob")
	d, ok := FromEnvelope(env)
	if !ok {
		t.Fatal("a kick is a notice")
	}
	if d.NoticeKey != (persistence.NoticeKey{SourceName: persistence.SourceRoomOutbox, AppCode: "lalu", SourceEventID: "lalu:r1:5:0", Channel: persistence.ChannelIMC2C}) ||
		d.UserID != "bob" || d.Ext != ExtRoomNotice || d.Status != "" || d.SourceCreatedAtMs != 1710000000000 {
		t.Fatalf("delivery %+v", d)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(d.Payload, &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	want := []string{"app_code", "ban_until_ms", "created_at_ms", "event_id", "event_type", "operator_user_id", "reason", "room_id", "target_user_id"}
	if !slices.Equal(keys, want) {
		t.Fatalf("room_notice fields %v, want %v", keys, want)
	}
	var k KickNotice
	_ = json.Unmarshal(d.Payload, &k)
	if k != (KickNotice{EventID: "lalu:r1:5:0", EventType: room.TypeRoomUserKicked, AppCode: "lalu", RoomID: "r1", TargetUserID: "bob",
		OperatorUserID: "owner", Reason: "spam", BanUntilMs: 1710000060000, CreatedAtMs: 1710000000000}) {
		t.Fatalf("payload %+v", k)
	}
}

func TestFromEnvelopeOthers(t *testing.T) {
	joined := kick("e", 1, "bob")
	joined.EventType = room.TypeRoomUserJoined
	if _, ok := FromEnvelope(joined); ok {
		t.Fatal("a join became a notice")
	}
	bad := kick("e", 1, "")
	d, ok := FromEnvelope(bad)
	if !ok || d.Status != persistence.NoticeFailed || d.LastError == "" {
		t.Fatalf("kick without target: %+v", d)
	}
	bad.Payload = json.RawMessage(`{"target_user_id":5}`)
	if d, _ := FromEnvelope(bad); d.Status != persistence.NoticeFailed || !json.Valid(d.Payload) {
		t.Fatalf("undecodable kick: %+v", d)
	}
}

func TestIngestEnvelope(t *testing.T) {
	store := memdb.NewNoticeStore()
	defer store.Close()
	ctx := context.Background()
	data, _ := json.Marshal(kick("k1", 100, "bob"))
	for i, want := range []int{1, 0} { // a redelivered message changes nothing
		n, err := IngestEnvelope(ctx, store, data, 1000)
		if err != nil || n != want {
			t.Fatalf("delivery %d: %d new rows, %v; want %d", i+1, n, err, want)
		}
	}
	d, err := store.Get(ctx, persistence.NoticeKey{SourceName: persistence.SourceRoomOutbox, AppCode: "lalu", SourceEventID: "k1", Channel: persistence.ChannelIMC2C})
	if err != nil || d.Ingress != persistence.IngressMQ || d.UserID != "bob" || d.Status != persistence.NoticeDelivering {
		t.Fatalf("row %+v %v", d, err)
	}
	joined, _ := json.Marshal(persistence.Envelope{EventID: "j", EventType: room.TypeRoomUserJoined, AppCode: "lalu", RoomID: "r1"})
	if n, err := IngestEnvelope(ctx, store, joined, 1000); n != 0 || err != nil {
		t.Fatalf("join: %d %v", n, err)
	}
	for _, bad := range []string{`nope`, `{"event_type":"RoomUserKicked"}`} {
		if _, err := IngestEnvelope(ctx, store, []byte(bad), 1000); !errors.Is(err, notice.ErrCorruptSource) {
			t.Fatalf("%s: %v", bad, err)
		}
	}
}

// fakeRooms is a room_outbox whose kicks become visible when the test
// says, whatever their created_at_ms.
type fakeRooms struct {
	mu   sync.Mutex
	rows []persistence.OutboxRow
}

func (f *fakeRooms) commit(envs ...persistence.Envelope) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range envs {
		f.rows = append(f.rows, persistence.OutboxRow{Envelope: e, Status: persistence.OutboxPending, CreatedAtMs: e.CreatedAtMs})
	}
}

func (f *fakeRooms) RoomOutboxAfter(_ context.Context, eventType string, afterMs int64, afterID string, limit int) ([]persistence.OutboxRow, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []persistence.OutboxRow
	for _, r := range f.rows {
		after := r.CreatedAtMs > afterMs || r.CreatedAtMs == afterMs && r.Envelope.EventID > afterID
		if r.Envelope.EventType == eventType && after {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b persistence.OutboxRow) int {
		if a.CreatedAtMs != b.CreatedAtMs {
			return int(a.CreatedAtMs - b.CreatedAtMs)
		}
		if a.Envelope.EventID < b.Envelope.EventID {
			return -1
		}
		return 1
	})
	return out[:min(limit, len(out))], nil
}

func scan(t *testing.T, s *Scanner, nowMs int64, limit int) ([]string, notice.ScanResult) {
	t.Helper()
	res, err := s.Scan(context.Background(), nowMs, limit)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range res.Deliveries {
		ids = append(ids, d.SourceEventID)
	}
	return ids, res
}

// A kick stamped before the scan position but committed after it is
// picked up by the next scan's reread, once; the persisted cursor stays
// settle behind.
func TestScannerPicksUpLateKicks(t *testing.T) {
	src := &fakeRooms{}
	s := NewScanner(src, WithSettle(10*time.Second))
	s.Reset(persistence.NoticeCursor{})
	src.commit(kick("k100", 100_000, "a"), kick("k300", 300_000, "b"))
	ids, res := scan(t, s, 300_500, 10)
	if !slices.Equal(ids, []string{"k100", "k300"}) || res.More {
		t.Fatalf("first scan %v", ids)
	}
	if want := (persistence.NoticeCursor{Num: 300_500 - 10_000}); res.Safe != want {
		t.Fatalf("safe %+v, want %+v (settle behind now)", res.Safe, want)
	}
	// k295 was stamped before k300 but commits only now.
	src.commit(kick("k295", 295_000, "c"), kick("k400", 400_000, "d"))
	ids, _ = scan(t, s, 301_000, 10)
	if !slices.Equal(ids, []string{"k400", "k295"}) {
		t.Fatalf("second scan %v, want the new kick and the late one", ids)
	}
	ids, _ = scan(t, s, 302_000, 10)
	if len(ids) != 0 {
		t.Fatalf("third scan handed out %v again", ids)
	}
	// Long after: the cursor catches up with the position.
	_, res = scan(t, s, 500_000, 10)
	if res.Safe != (persistence.NoticeCursor{Num: 400_000, Key: "k400"}) {
		t.Fatalf("safe %+v", res.Safe)
	}
}

// Pages of limit; a restart from the persisted cursor rereads the window
// (ingest ignores what it has).
func TestScannerPagesAndRestart(t *testing.T) {
	src := &fakeRooms{}
	s := NewScanner(src, WithSettle(time.Second))
	s.Reset(persistence.NoticeCursor{})
	for i := range 5 {
		src.commit(kick(fmt.Sprint("k", i), int64(1000+i), "u"))
	}
	ids, res := scan(t, s, 10_000, 2)
	if !slices.Equal(ids, []string{"k0", "k1"}) || !res.More {
		t.Fatalf("page 1 %v %+v", ids, res)
	}
	ids, _ = scan(t, s, 10_000, 2)
	if !slices.Equal(ids, []string{"k2", "k3"}) {
		t.Fatalf("page 2 %v", ids)
	}
	ids, res = scan(t, s, 10_000, 2)
	if !slices.Equal(ids, []string{"k4"}) || res.More || res.Safe != (persistence.NoticeCursor{Num: 1004, Key: "k4"}) {
		t.Fatalf("page 3 %v %+v", ids, res)
	}
	s.Reset(persistence.NoticeCursor{Num: 1002, Key: "k2"})
	ids, _ = scan(t, s, 10_000, 10)
	if !slices.Equal(ids, []string{"k3", "k4"}) {
		t.Fatalf("after restart %v", ids)
	}
}

// The scan reads the outbox by the one event type whose row causes a
// notice; FromEnvelope takes exactly the types the rows say.
func TestNoticeTypeIsTheRows(t *testing.T) {
	if noticeType != room.TypeRoomUserKicked {
		t.Fatalf("notice type %q", noticeType)
	}
	for _, typ := range room.EventTypes() {
		_, ok := FromEnvelope(persistence.Envelope{EventID: "e1", EventType: typ, AppCode: "a", RoomID: "r", Payload: []byte(`{"target_user_id":"u"}`)})
		if ok != room.Causes(typ, room.Notice) {
			t.Errorf("%s: FromEnvelope took it %v, its row says notice %v", typ, ok, room.Causes(typ, room.Notice))
		}
	}
}
