package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/grpcapi"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
)

// startNoticeTestServer serves the real NoticeAdmin over memdb with a
// delivered wallet notice and a dead room notice; kicked records the
// worker hook's calls.
func startNoticeTestServer(t *testing.T) (addr string, store *memdb.NoticeStore, kicked chan string) {
	t.Helper()
	ctx := context.Background()
	store = memdb.NewNoticeStore()
	t.Cleanup(func() { store.Close() })
	now := time.Now()
	rows := []persistence.NoticeDelivery{
		{NoticeKey: persistence.NoticeKey{SourceName: persistence.SourceWalletOutbox, AppCode: "lalu", SourceEventID: "tx_1:WalletBalanceChanged:u1:COIN", Channel: persistence.ChannelIMC2C},
			EventType: "WalletBalanceChanged", UserID: "u1", Ext: "wallet_notice", Ingress: persistence.IngressPoll,
			Payload: json.RawMessage(`{"event_id":"tx_1:WalletBalanceChanged:u1:COIN","balance_version":18}`), SourceCreatedAtMs: now.Add(-3 * time.Minute).UnixMilli()},
		{NoticeKey: persistence.NoticeKey{SourceName: persistence.SourceRoomOutbox, AppCode: "lalu", SourceEventID: "lalu:r1:9:0", Channel: persistence.ChannelIMC2C},
			EventType: "RoomUserKicked", UserID: "bob", Ext: "room_notice", Ingress: persistence.IngressMQ,
			Payload: json.RawMessage(`{"event_id":"lalu:r1:9:0","target_user_id":"bob"}`), SourceCreatedAtMs: now.Add(-10 * time.Minute).UnixMilli()},
	}
	if _, err := store.Ingest(ctx, rows, now.UnixMilli()); err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{persistence.SourceWalletOutbox, persistence.SourceRoomOutbox} {
		if _, err := store.Claim(ctx, src, "notice-a/1", now.UnixMilli(), 60_000, 10); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.MarkDelivered(ctx, []persistence.NoticeKey{rows[0].NoticeKey}, now.UnixMilli()); err != nil {
		t.Fatal(err)
	}
	if err := store.MarkFailed(ctx, rows[1].NoticeKey, "notice-a/1", 11, "tencent im openim/sendmsg: code 90012 (account_missing)", now.UnixMilli()); err != nil {
		t.Fatal(err)
	}
	kicked = make(chan string, 10)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	roomcellv1.RegisterNoticeAdminServer(srv, grpcapi.NewNoticeAdminServer(store,
		func(src string) bool { kicked <- src; return true }, slog.New(slog.DiscardHandler)))
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String(), store, kicked
}

func TestRoomctlNoticeListShowRequeue(t *testing.T) {
	addr, store, kicked := startNoticeTestServer(t)
	code, out, errOut := outboxCtl(t, addr, "notice", "list", "--status", "failed")
	if code != 0 {
		t.Fatalf("list: exit %d: %s", code, errOut)
	}
	for _, want := range []string{"SOURCE_EVENT_ID", "LAST_ERROR", "lalu:r1:9:0", "room_outbox", "bob", "room_notice", "failed", "11", "10m0s", "account_missing"} {
		if !strings.Contains(out, want) {
			t.Fatalf("list output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "tx_1") {
		t.Fatalf("the delivered notice is listed as failed:\n%s", out)
	}

	code, out, errOut = outboxCtl(t, addr, "notice", "show", "tx_1:WalletBalanceChanged:u1:COIN")
	if code != 0 {
		t.Fatalf("show: exit %d: %s", code, errOut)
	}
	for _, want := range []string{"status:", "delivered", "wallet_outbox (app lalu, channel im_c2c, via poll)", "user u1, ext wallet_notice", `"balance_version": 18`} {
		if !strings.Contains(out, want) {
			t.Fatalf("show output lacks %q:\n%s", want, out)
		}
	}

	code, out, errOut = outboxCtl(t, addr, "notice", "requeue", "lalu:r1:9:0")
	if code != 0 || !strings.Contains(out, "requeued (requeue #1): retryable") || !strings.Contains(out, "sending it now") {
		t.Fatalf("requeue: exit %d\n%s%s", code, out, errOut)
	}
	if src := <-kicked; src != persistence.SourceRoomOutbox {
		t.Fatalf("kicked %s", src)
	}
	d, err := store.Get(context.Background(), persistence.NoticeKey{SourceName: persistence.SourceRoomOutbox, AppCode: "lalu", SourceEventID: "lalu:r1:9:0", Channel: persistence.ChannelIMC2C})
	if err != nil || d.Status != persistence.NoticeRetryable || d.RequeueCount != 1 || d.RetryCount != 0 {
		t.Fatalf("row after requeue %+v %v", d, err)
	}
	code, _, errOut = outboxCtl(t, addr, "notice", "requeue", "lalu:r1:9:0")
	if code != 1 || !strings.Contains(errOut, "FailedPrecondition") {
		t.Fatalf("second requeue: exit %d: %s", code, errOut)
	}
	code, out, _ = outboxCtl(t, addr, "--json", "notice", "list", "--status", "all")
	if code != 0 || !strings.Contains(out, `"source_event_id"`) || !strings.Contains(out, `"requeue_count":1`) {
		t.Fatalf("json list: exit %d\n%s", code, out)
	}
	code, _, errOut = outboxCtl(t, addr, "notice", "show")
	if code != 2 || !strings.Contains(errOut, "exactly one argument") {
		t.Fatalf("show without id: exit %d: %s", code, errOut)
	}
}
