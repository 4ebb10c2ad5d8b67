package grpcapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
)

type noticeFixture struct {
	store  *memdb.NoticeStore
	client roomcellv1.NoticeAdminClient
	mu     sync.Mutex
	kicked []string
}

func (f *noticeFixture) kicks() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string{}, f.kicked...)
}

func noticeRow(source, app, id string) persistence.NoticeDelivery {
	return persistence.NoticeDelivery{
		NoticeKey: persistence.NoticeKey{SourceName: source, AppCode: app, SourceEventID: id, Channel: persistence.ChannelIMC2C},
		EventType: "WalletBalanceChanged", UserID: "u-" + id, Ext: "wallet_notice", Ingress: persistence.IngressPoll,
		Payload: json.RawMessage(`{"event_id":"` + id + `"}`), SourceCreatedAtMs: 100,
	}
}

// newNoticeFixture serves NoticeAdmin over memdb with rows: ok (delivered),
// again (retryable), dead (failed), twin (failed in two apps).
func newNoticeFixture(t *testing.T) *noticeFixture {
	t.Helper()
	ctx := context.Background()
	f := &noticeFixture{store: memdb.NewNoticeStore()}
	t.Cleanup(func() { f.store.Close() })
	src := persistence.SourceWalletOutbox
	rows := []persistence.NoticeDelivery{noticeRow(src, "lalu", "ok"), noticeRow(src, "lalu", "again"), noticeRow(src, "lalu", "dead"),
		noticeRow(persistence.SourceRoomOutbox, "lalu", "twin"), noticeRow(persistence.SourceRoomOutbox, "other", "twin")}
	if _, err := f.store.Ingest(ctx, rows, 1000); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{src, persistence.SourceRoomOutbox} {
		if _, err := f.store.Claim(ctx, s, "n1", 1000, 60_000, 10); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(f.store.MarkDelivered(ctx, []persistence.NoticeKey{rows[0].NoticeKey}, 1010))
	must(f.store.MarkRetryable(ctx, rows[1].NoticeKey, "n1", 1, "im: timeout", 9000, 1010))
	must(f.store.MarkFailed(ctx, rows[2].NoticeKey, "n1", 11, "im: 80001 content rejected", 1010))
	must(f.store.MarkFailed(ctx, rows[3].NoticeKey, "n1", 11, "im: down", 1010))
	must(f.store.MarkFailed(ctx, rows[4].NoticeKey, "n1", 11, "im: down", 1010))

	kick := func(source string) bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.kicked = append(f.kicked, source)
		return source == persistence.SourceWalletOutbox // this node runs only the wallet worker
	}
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	roomcellv1.RegisterNoticeAdminServer(srv, NewNoticeAdminServer(f.store, kick, slog.New(slog.DiscardHandler)))
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	f.client = roomcellv1.NewNoticeAdminClient(conn)
	return f
}

func TestNoticeAdminList(t *testing.T) {
	f := newNoticeFixture(t)
	ctx := context.Background()
	r, err := f.client.ListNotices(ctx, &roomcellv1.ListNoticesRequest{Status: "failed"})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.GetEntries()) != 3 {
		t.Fatalf("%d failed rows, want 3", len(r.GetEntries()))
	}
	for _, e := range r.GetEntries() {
		if e.GetStatus() != persistence.NoticeFailed || e.GetRetryCount() != 11 || e.GetLastError() == "" || e.GetPayloadJson() != "" {
			t.Fatalf("entry %+v", e)
		}
	}
	r, err = f.client.ListNotices(ctx, &roomcellv1.ListNoticesRequest{Status: "failed", SourceName: persistence.SourceWalletOutbox})
	if err != nil || len(r.GetEntries()) != 1 || r.GetEntries()[0].GetSourceEventId() != "dead" {
		t.Fatalf("failed wallet rows: %v %v", r.GetEntries(), err)
	}
	if r, err := f.client.ListNotices(ctx, &roomcellv1.ListNoticesRequest{}); err != nil || len(r.GetEntries()) != 5 {
		t.Fatalf("all rows: %d %v", len(r.GetEntries()), err)
	}
	if r, err := f.client.ListNotices(ctx, &roomcellv1.ListNoticesRequest{Limit: 2}); err != nil || len(r.GetEntries()) != 2 {
		t.Fatalf("limit 2: %d %v", len(r.GetEntries()), err)
	}
	_, err = f.client.ListNotices(ctx, &roomcellv1.ListNoticesRequest{Status: "lost"})
	wantCode(t, err, codes.InvalidArgument)
	_, err = f.client.ListNotices(ctx, &roomcellv1.ListNoticesRequest{Limit: -1})
	wantCode(t, err, codes.InvalidArgument)
}

func TestNoticeAdminGet(t *testing.T) {
	f := newNoticeFixture(t)
	ctx := context.Background()
	r, err := f.client.GetNotice(ctx, &roomcellv1.GetNoticeRequest{Key: &roomcellv1.NoticeKey{SourceEventId: "again"}})
	if err != nil {
		t.Fatal(err)
	}
	e := r.GetEntries()[0]
	if len(r.GetEntries()) != 1 || e.GetStatus() != persistence.NoticeRetryable || e.GetNextRetryAtMs() != 9000 || e.GetPayloadJson() != `{"event_id":"again"}` ||
		e.GetUserId() != "u-again" || e.GetExt() != "wallet_notice" || e.GetIngress() != persistence.IngressPoll {
		t.Fatalf("entry %+v", e)
	}
	if r, err := f.client.GetNotice(ctx, &roomcellv1.GetNoticeRequest{Key: &roomcellv1.NoticeKey{SourceEventId: "twin"}}); err != nil || len(r.GetEntries()) != 2 {
		t.Fatalf("twin: %v %v", r.GetEntries(), err)
	}
	if r, err := f.client.GetNotice(ctx, &roomcellv1.GetNoticeRequest{Key: &roomcellv1.NoticeKey{SourceEventId: "twin", AppCode: "other"}}); err != nil || len(r.GetEntries()) != 1 {
		t.Fatalf("twin of app other: %v %v", r.GetEntries(), err)
	}
	_, err = f.client.GetNotice(ctx, &roomcellv1.GetNoticeRequest{Key: &roomcellv1.NoticeKey{SourceEventId: "nope"}})
	wantCode(t, err, codes.NotFound)
	_, err = f.client.GetNotice(ctx, &roomcellv1.GetNoticeRequest{})
	wantCode(t, err, codes.InvalidArgument)
}

func TestNoticeAdminRequeue(t *testing.T) {
	f := newNoticeFixture(t)
	ctx := context.Background()
	r, err := f.client.RequeueNotice(ctx, &roomcellv1.RequeueNoticeRequest{Key: &roomcellv1.NoticeKey{SourceEventId: "dead"}})
	if err != nil {
		t.Fatal(err)
	}
	e := r.GetEntry()
	if e.GetStatus() != persistence.NoticeRetryable || e.GetRetryCount() != 0 || e.GetRequeueCount() != 1 || e.GetRequeuedAtMs() == 0 ||
		e.GetLastError() != "im: 80001 content rejected" || !r.GetWorkerNotified() {
		t.Fatalf("requeued %+v notified=%v", e, r.GetWorkerNotified())
	}
	stored, err := f.store.Get(ctx, noticeRow(persistence.SourceWalletOutbox, "lalu", "dead").NoticeKey)
	if err != nil || stored.Status != persistence.NoticeRetryable || stored.RequeueCount != 1 {
		t.Fatalf("stored %+v %v", stored, err)
	}
	if k := f.kicks(); len(k) != 1 || k[0] != persistence.SourceWalletOutbox {
		t.Fatalf("kicks %v", k)
	}
	// Not a dead letter any more.
	_, err = f.client.RequeueNotice(ctx, &roomcellv1.RequeueNoticeRequest{Key: &roomcellv1.NoticeKey{SourceEventId: "dead"}})
	wantCode(t, err, codes.FailedPrecondition)
	_, err = f.client.RequeueNotice(ctx, &roomcellv1.RequeueNoticeRequest{Key: &roomcellv1.NoticeKey{SourceEventId: "ok"}})
	wantCode(t, err, codes.FailedPrecondition)
	// Two apps' dead letters share the id: the operator must say which.
	_, err = f.client.RequeueNotice(ctx, &roomcellv1.RequeueNoticeRequest{Key: &roomcellv1.NoticeKey{SourceEventId: "twin"}})
	wantCode(t, err, codes.InvalidArgument)
	r, err = f.client.RequeueNotice(ctx, &roomcellv1.RequeueNoticeRequest{Key: &roomcellv1.NoticeKey{SourceEventId: "twin", AppCode: "other"}})
	if err != nil || r.GetEntry().GetAppCode() != "other" || r.GetWorkerNotified() {
		t.Fatalf("twin of app other: %+v %v (no room worker here: not notified)", r, err)
	}
	_, err = f.client.RequeueNotice(ctx, &roomcellv1.RequeueNoticeRequest{Key: &roomcellv1.NoticeKey{SourceEventId: "nope"}})
	wantCode(t, err, codes.NotFound)
}

func TestNoticeAdminStoreDown(t *testing.T) {
	f := newNoticeFixture(t)
	f.store.Close()
	_, err := f.client.ListNotices(context.Background(), &roomcellv1.ListNoticesRequest{})
	wantCode(t, err, codes.Unavailable)
}
