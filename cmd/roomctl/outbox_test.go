package main

import (
	"bytes"
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

// startOutboxTestServer serves the real OutboxAdmin over memdb with
// ev-ok (published), ev-fail (pending, failed twice, leased) and ev-new
// (pending); kicked records the relay hook's calls.
func startOutboxTestServer(t *testing.T) (addr string, kicked chan string) {
	t.Helper()
	ctx := context.Background()
	store := memdb.New()
	t.Cleanup(func() { store.Close() })
	for i, id := range []string{"ev-ok", "ev-fail", "ev-new"} {
		env := persistence.Envelope{EventID: id, EventType: "RoomGiftSent", AppCode: "app", RoomID: "r1", RoomSeq: int64(i + 1),
			CommandID: "c-" + id, CreatedAtMs: time.Now().Add(-5 * time.Minute).UnixMilli(), Payload: json.RawMessage(`{"gift_id":"rose"}`)}
		if err := store.Append(ctx, persistence.Append{Command: persistence.CommandRecord{AppCode: "app", RoomID: "r1", Seq: int64(i + 1),
			CommandID: "c-" + id, CommandType: "SendGift", Events: []persistence.Envelope{env}}}); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now().UnixMilli()
	if err := store.MarkOutboxPublished(ctx, "ev-ok", now); err != nil {
		t.Fatal(err)
	}
	for _, msg := range []string{"im: timeout", "im: 503 service unavailable"} {
		if err := store.MarkOutboxFailed(ctx, "ev-fail", msg, now, now); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := store.ClaimPendingOutbox(ctx, "node-a/77", now, time.Hour.Milliseconds(), 1); err != nil {
		t.Fatal(err)
	}
	kicked = make(chan string, 10)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	roomcellv1.RegisterOutboxAdminServer(srv, grpcapi.NewOutboxAdminServer(store,
		func(id string) bool { kicked <- id; return true }, slog.New(slog.DiscardHandler)))
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String(), kicked
}

func outboxCtl(t *testing.T, addr string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(append([]string{"--addr", addr, "--token", "", "--timeout", "5s"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func TestRoomctlOutboxList(t *testing.T) {
	addr, _ := startOutboxTestServer(t)
	code, out, errOut := outboxCtl(t, addr, "outbox", "list")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"pending 2  oldest 5m0s old", "EVENT_ID", "LAST_ERROR", "ev-fail", "ev-new",
		"im: 503 service unavailable", "node-a/77", "app/r1"} {
		if !strings.Contains(out, want) {
			t.Fatalf("list output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "ev-ok") {
		t.Fatalf("default list shows a published row:\n%s", out)
	}
	var failLine string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "ev-fail") {
			failLine = l
		}
	}
	if f := strings.Fields(failLine); len(f) < 5 || f[3] != "pending" || f[4] != "2" {
		t.Fatalf("ev-fail line %q, want status pending and 2 retries", failLine)
	}

	code, out, _ = outboxCtl(t, addr, "--json", "outbox", "list", "--status", "failed")
	var reply struct {
		Entries []struct {
			EventID    string `json:"event_id"`
			RetryCount int    `json:"retry_count"`
			LastError  string `json:"last_error"`
		} `json:"entries"`
		PendingTotal string `json:"pending_total"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &reply) != nil {
		t.Fatalf("--json list: exit %d, output %q", code, out)
	}
	if len(reply.Entries) != 1 || reply.Entries[0].EventID != "ev-fail" || reply.Entries[0].RetryCount != 2 || reply.PendingTotal != "2" {
		t.Fatalf("--json failed list = %+v", reply)
	}

	code, _, errOut = outboxCtl(t, addr, "outbox", "list", "--status", "lost")
	if code != 1 || !strings.Contains(errOut, "InvalidArgument") {
		t.Fatalf("bad status: exit %d, stderr %q", code, errOut)
	}
}

func TestRoomctlOutboxShow(t *testing.T) {
	addr, _ := startOutboxTestServer(t)
	code, out, errOut := outboxCtl(t, addr, "outbox", "show", "ev-fail")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"event_type:", "RoomGiftSent", "retry_count:", "last_error:", "im: 503", "node-a/77 (for",
		"envelope:", `"event_id": "ev-fail"`, `"gift_id": "rose"`} {
		if !strings.Contains(out, want) {
			t.Fatalf("show output lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = outboxCtl(t, addr, "--json", "outbox", "show", "ev-ok")
	var reply struct {
		Entry        struct{ Status string } `json:"entry"`
		EnvelopeJSON string                  `json:"envelope_json"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &reply) != nil || reply.Entry.Status != "published" || !strings.Contains(reply.EnvelopeJSON, "ev-ok") {
		t.Fatalf("--json show: exit %d %+v", code, reply)
	}
	if code, _, errOut := outboxCtl(t, addr, "outbox", "show", "ev-missing"); code != 1 || !strings.Contains(errOut, "NotFound") {
		t.Fatalf("unknown event: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := outboxCtl(t, addr, "outbox", "show"); code != 2 || !strings.Contains(errOut, "event_id") {
		t.Fatalf("no argument: exit %d, stderr %q", code, errOut)
	}
}

func TestRoomctlOutboxRetry(t *testing.T) {
	addr, kicked := startOutboxTestServer(t)
	for _, verb := range []string{"retry", "requeue"} {
		code, out, errOut := outboxCtl(t, addr, "outbox", verb, "ev-fail")
		if code != 0 || !strings.Contains(out, "ev-fail requeued; the relay is publishing it now") {
			t.Fatalf("%s: exit %d, stdout %q, stderr %q", verb, code, out, errOut)
		}
		select {
		case id := <-kicked:
			if id != "ev-fail" {
				t.Fatalf("relay asked for %q", id)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the relay was not asked to run")
		}
	}
	if code, _, errOut := outboxCtl(t, addr, "outbox", "retry", "ev-ok"); code != 1 || !strings.Contains(errOut, "FailedPrecondition") {
		t.Fatalf("retry of a published row: exit %d, stderr %q", code, errOut)
	}
}

// outbox skip needs --reason, records the operator, and the row then
// lists as skipped and refuses a requeue.
func TestRoomctlOutboxSkip(t *testing.T) {
	addr, _ := startOutboxTestServer(t)
	if code, _, errOut := outboxCtl(t, addr, "outbox", "skip", "ev-new"); code == 0 || !strings.Contains(errOut, "--reason") {
		t.Fatalf("skip without a reason: exit %d, stderr %q", code, errOut)
	}
	code, out, errOut := outboxCtl(t, addr, "outbox", "skip", "ev-new", "--reason", "duplicate of ev-fail", "--operator", "bob")
	if code != 0 || !strings.Contains(out, "ev-new skipped by bob") {
		t.Fatalf("skip: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	_, out, _ = outboxCtl(t, addr, "outbox", "list", "--status", "skipped")
	if !strings.Contains(out, "ev-new") || strings.Contains(out, "ev-fail") {
		t.Fatalf("list --status skipped:\n%s", out)
	}
	_, out, _ = outboxCtl(t, addr, "outbox", "show", "ev-new")
	if !strings.Contains(out, "by bob") || !strings.Contains(out, "duplicate of ev-fail") {
		t.Fatalf("show of a skipped row lacks who/why:\n%s", out)
	}
	if code, _, errOut := outboxCtl(t, addr, "outbox", "requeue", "ev-new"); code != 1 || !strings.Contains(errOut, "FailedPrecondition") {
		t.Fatalf("requeue of a skipped row: exit %d, stderr %q", code, errOut)
	}
}
