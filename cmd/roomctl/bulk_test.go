package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/hyapp/roomcell/persistence"
)

// roomctl outbox bulk-skip and bulk-requeue: a dry run counts, the run
// changes what the filters pick, and filters the server would refuse are
// refused here naming the flag.
func TestRoomctlOutboxBulk(t *testing.T) {
	addr, _ := startOutboxTestServer(t)
	code, out, errOut := outboxCtl(t, addr, "outbox", "bulk-skip", "--app", "app", "--room", "r1", "--error", "503", "--reason", "IM outage", "--operator", "ops:alice", "--dry-run")
	if code != 0 || !strings.Contains(out, "1 rows would be skipped (dry run") {
		t.Fatalf("dry run: exit %d, out %q, err %q", code, out, errOut)
	}
	code, out, errOut = outboxCtl(t, addr, "outbox", "bulk-skip", "--app", "app", "--room", "r1", "--error", "503", "--reason", "IM outage", "--operator", "ops:alice")
	if code != 0 || !strings.Contains(out, "1 rows skipped by ops:alice") {
		t.Fatalf("bulk skip: exit %d, out %q, err %q", code, out, errOut)
	}
	code, out, _ = outboxCtl(t, addr, "outbox", "show", "ev-fail")
	if code != 0 || !strings.Contains(out, "skipped") || !strings.Contains(out, "IM outage") {
		t.Fatalf("the skipped row:\n%s", out)
	}
	code, out, errOut = outboxCtl(t, addr, "--json", "outbox", "bulk-requeue", "--status", "parked")
	var reply struct{ Count string }
	if code != 0 || json.Unmarshal([]byte(out), &reply) != nil || reply.Count != "0" && reply.Count != "" {
		t.Fatalf("--json bulk requeue of no parked row: exit %d, out %q, err %q", code, out, errOut)
	}
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"outbox", "bulk-requeue", "--room", "r1"}, "--room needs --app"},
		{[]string{"outbox", "bulk-requeue", "--since", "yesterday"}, "--since"},
		{[]string{"outbox", "bulk-requeue", "--since", "1h", "--until", "2h"}, "--until"},
		{[]string{"outbox", "bulk-requeue", "--status", "published"}, "--status"},
		{[]string{"outbox", "bulk-skip", "--reason", "x"}, "needs a filter"},
		{[]string{"notice", "bulk-requeue", "--limit", "-1"}, "--limit"},
	} {
		code, _, errOut := outboxCtl(t, addr, tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.flag) {
			t.Errorf("%v: exit %d, stderr %q; want 2 naming %s", tc.args, code, errOut, tc.flag)
		}
	}
}

// roomctl notice bulk-requeue takes back the dead letters the filters
// pick and kicks their worker.
func TestRoomctlNoticeBulkRequeue(t *testing.T) {
	addr, store, kicked := startNoticeTestServer(t)
	code, out, errOut := outboxCtl(t, addr, "notice", "bulk-requeue", "--error", "account_missing", "--since", "1h", "--dry-run")
	if code != 0 || !strings.Contains(out, "1 dead letters would be requeued") {
		t.Fatalf("dry run: exit %d, out %q, err %q", code, out, errOut)
	}
	code, out, errOut = outboxCtl(t, addr, "notice", "bulk-requeue", "--source", "wallet_outbox")
	if code != 0 || !strings.Contains(out, "0 dead letters requeued") {
		t.Fatalf("wallet source: exit %d, out %q, err %q", code, out, errOut)
	}
	code, out, errOut = outboxCtl(t, addr, "notice", "bulk-requeue", "--user", "bob", "--error", "90012")
	if code != 0 || !strings.Contains(out, "1 dead letters requeued; the notice worker is sending them now") {
		t.Fatalf("bulk requeue: exit %d, out %q, err %q", code, out, errOut)
	}
	rows, err := store.FindBySourceEvent(context.Background(), "lalu:r1:9:0")
	if err != nil || len(rows) != 1 || rows[0].Status != persistence.NoticeRetryable || rows[0].RequeueCount != 1 {
		t.Fatalf("requeued row: %+v %v", rows, err)
	}
	if len(kicked) == 0 {
		t.Fatal("no worker was kicked")
	}
}

// roomctl --version prints the build's version (dev without -ldflags).
func TestRoomctlVersion(t *testing.T) {
	code, out, errOut := outboxCtl(t, "127.0.0.1:1", "--version")
	if code != 0 || !strings.HasPrefix(out, "roomctl dev") || errOut != "" {
		t.Fatalf("--version: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// roomctl notice bulk-skip gives up the dead letters the filters pick and
// refuses to run without a filter.
func TestRoomctlNoticeBulkSkip(t *testing.T) {
	addr, store, _ := startNoticeTestServer(t)
	if code, _, errOut := outboxCtl(t, addr, "notice", "bulk-skip", "--reason", "x"); code != 2 || !strings.Contains(errOut, "needs a filter") {
		t.Fatalf("unfiltered: exit %d, stderr %q", code, errOut)
	}
	code, out, errOut := outboxCtl(t, addr, "notice", "bulk-skip", "--user", "bob", "--reason", "account deleted", "--operator", "ops:alice", "--dry-run")
	if code != 0 || !strings.Contains(out, "1 dead letters would be skipped") {
		t.Fatalf("dry run: exit %d, out %q, err %q", code, out, errOut)
	}
	code, out, errOut = outboxCtl(t, addr, "notice", "bulk-skip", "--user", "bob", "--reason", "account deleted", "--operator", "ops:alice")
	if code != 0 || !strings.Contains(out, "1 dead letters skipped by ops:alice") {
		t.Fatalf("bulk skip: exit %d, out %q, err %q", code, out, errOut)
	}
	rows, err := store.FindBySourceEvent(context.Background(), "lalu:r1:9:0")
	if err != nil || len(rows) != 1 || rows[0].Status != persistence.NoticeSkipped || !strings.HasPrefix(rows[0].LastError, "skipped by ops:alice: account deleted") {
		t.Fatalf("skipped row: %+v %v", rows, err)
	}
}
