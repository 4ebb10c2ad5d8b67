package grpcapi

import (
	"context"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/persistence"
)

// A bulk requeue or skip changes the rows its selector picks and no
// other; a dry run counts them and changes nothing; a selector the store
// could not honour, or an unbounded skip, is refused before the store.
func TestOutboxAdminBulk(t *testing.T) {
	f := newOutboxFixture(t, true)
	ctx := context.Background()
	if err := f.store.ParkOutbox(ctx, "ev-fail", "im: 503 Service Unavailable", 4000); err != nil {
		t.Fatal(err)
	}
	status := func(id string) persistence.OutboxRow {
		t.Helper()
		r, err := f.store.GetOutbox(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	for name, sel := range map[string]*roomcellv1.OutboxSelector{
		"published status": {Status: persistence.OutboxPublished},
		"room without app": {RoomId: "r1"},
		"empty time range": {CreatedFromMs: 2000, CreatedToMs: 1000},
		"negative limit":   {Limit: -1},
	} {
		_, err := f.client.BulkRequeueOutbox(ctx, &roomcellv1.BulkRequeueOutboxRequest{Selector: sel})
		if err == nil {
			t.Fatalf("%s: accepted", name)
		}
		wantCode(t, err, codes.InvalidArgument)
	}

	dry, err := f.client.BulkRequeueOutbox(ctx, &roomcellv1.BulkRequeueOutboxRequest{DryRun: true})
	if err != nil || dry.GetCount() != 1 || !dry.GetDryRun() {
		t.Fatalf("dry run: %v %v; want count 1 (the parked row)", dry, err)
	}
	if r := status("ev-fail"); r.Status != persistence.OutboxParked || len(f.kicks()) != 0 {
		t.Fatalf("a dry run changed something: %+v, kicks %v", r, f.kicks())
	}
	got, err := f.client.BulkRequeueOutbox(ctx, &roomcellv1.BulkRequeueOutboxRequest{
		Selector: &roomcellv1.OutboxSelector{AppCode: "app", RoomId: "r1", ErrorContains: "SERVICE UNAVAILABLE"}})
	if err != nil || got.GetCount() != 1 || got.GetDryRun() || !got.GetRelayNotified() {
		t.Fatalf("bulk requeue: %v %v", got, err)
	}
	if r := status("ev-fail"); r.Status != persistence.OutboxPending || len(f.kicks()) != 1 {
		t.Fatalf("after the bulk requeue: %+v, kicks %v", r, f.kicks())
	}
	if again, err := f.client.BulkRequeueOutbox(ctx, &roomcellv1.BulkRequeueOutboxRequest{}); err != nil || again.GetCount() != 0 || again.GetRelayNotified() {
		t.Fatalf("a repeated bulk requeue: %v %v; want nothing and no kick", again, err)
	}

	_, err = f.client.BulkSkipOutbox(ctx, &roomcellv1.BulkSkipOutboxRequest{Reason: "outage", Operator: "ops:alice"})
	wantCode(t, err, codes.InvalidArgument)
	_, err = f.client.BulkSkipOutbox(ctx, &roomcellv1.BulkSkipOutboxRequest{Selector: &roomcellv1.OutboxSelector{AppCode: "app"}})
	wantCode(t, err, codes.InvalidArgument)
	sel := &roomcellv1.OutboxSelector{AppCode: "app", RoomId: "r1"}
	dry, err = f.client.BulkSkipOutbox(ctx, &roomcellv1.BulkSkipOutboxRequest{Selector: sel, DryRun: true, Reason: "room closed", Operator: "ops:alice"})
	if err != nil || dry.GetCount() != 2 {
		t.Fatalf("skip dry run: %v %v; want 2 (ev-new, ev-fail)", dry, err)
	}
	if r := status("ev-new"); r.Status != persistence.OutboxPending {
		t.Fatalf("a skip dry run changed a row: %+v", r)
	}
	got, err = f.client.BulkSkipOutbox(ctx, &roomcellv1.BulkSkipOutboxRequest{Selector: sel, Reason: "room closed", Operator: "ops:alice"})
	if err != nil || got.GetCount() != 2 {
		t.Fatalf("bulk skip: %v %v", got, err)
	}
	for _, id := range []string{"ev-new", "ev-fail"} {
		if r := status(id); r.Status != persistence.OutboxSkipped || r.ResolvedBy != "ops:alice" || r.Resolution != "room closed" {
			t.Fatalf("skipped %s: %+v", id, r)
		}
	}
	if r := status("ev-ok"); r.Status != persistence.OutboxPublished {
		t.Fatalf("a bulk skip touched a published row: %+v", r)
	}
}

// A bulk requeue of dead letters takes back the failed rows its selector
// picks, kicks the workers of their sources and says whether one was
// here; a dry run counts and changes nothing.
func TestNoticeAdminBulkRequeue(t *testing.T) {
	f := newNoticeFixture(t)
	ctx := context.Background()
	_, err := f.client.BulkRequeueNotices(ctx, &roomcellv1.BulkRequeueNoticesRequest{
		Selector: &roomcellv1.NoticeSelector{CreatedFromMs: 5, CreatedToMs: 5}})
	wantCode(t, err, codes.InvalidArgument)

	dry, err := f.client.BulkRequeueNotices(ctx, &roomcellv1.BulkRequeueNoticesRequest{DryRun: true})
	if err != nil || dry.GetCount() != 3 || !dry.GetDryRun() || len(f.kicks()) != 0 {
		t.Fatalf("dry run: %v %v, kicks %v; want 3 and no kick", dry, err, f.kicks())
	}
	got, err := f.client.BulkRequeueNotices(ctx, &roomcellv1.BulkRequeueNoticesRequest{Selector: &roomcellv1.NoticeSelector{
		SourceName: persistence.SourceRoomOutbox, AppCode: "lalu", ErrorContains: "DOWN"}})
	if err != nil || got.GetCount() != 1 || got.GetWorkerNotified() {
		t.Fatalf("narrow bulk requeue: %v %v; want 1, no room worker here", got, err)
	}
	if k := f.kicks(); !slices.Equal(k, []string{persistence.SourceRoomOutbox}) {
		t.Fatalf("kicks %v", k)
	}
	key := noticeRow(persistence.SourceRoomOutbox, "lalu", "twin").NoticeKey
	if d, err := f.store.Get(ctx, key); err != nil || d.Status != persistence.NoticeRetryable || d.RequeueCount != 1 {
		t.Fatalf("requeued row: %+v %v", d, err)
	}
	if d, _ := f.store.Get(ctx, noticeRow(persistence.SourceRoomOutbox, "other", "twin").NoticeKey); d.Status != persistence.NoticeFailed {
		t.Fatalf("a row of another app was requeued: %+v", d)
	}
	got, err = f.client.BulkRequeueNotices(ctx, &roomcellv1.BulkRequeueNoticesRequest{})
	if err != nil || got.GetCount() != 2 || !got.GetWorkerNotified() {
		t.Fatalf("bulk requeue of the rest: %v %v", got, err)
	}
	if again, err := f.client.BulkRequeueNotices(ctx, &roomcellv1.BulkRequeueNoticesRequest{}); err != nil || again.GetCount() != 0 {
		t.Fatalf("repeat: %v %v", again, err)
	}
	if n := len(f.kicks()); n != 3 {
		t.Fatalf("kicks %v: want one for the narrow run, two for the wide one, none for the empty one", f.kicks())
	}
}

// A bulk skip gives up the dead letters its selector picks (no longer
// failed, never requeued); it needs a selector, a reason and an operator;
// its dry run counts and changes nothing.
func TestNoticeAdminBulkSkip(t *testing.T) {
	f := newNoticeFixture(t)
	ctx := context.Background()
	sel := &roomcellv1.NoticeSelector{AppCode: "other"}
	_, err := f.client.BulkSkipNotices(ctx, &roomcellv1.BulkSkipNoticesRequest{Reason: "x", Operator: "ops"})
	wantCode(t, err, codes.InvalidArgument)
	_, err = f.client.BulkSkipNotices(ctx, &roomcellv1.BulkSkipNoticesRequest{Selector: sel})
	wantCode(t, err, codes.InvalidArgument)
	dry, err := f.client.BulkSkipNotices(ctx, &roomcellv1.BulkSkipNoticesRequest{Selector: sel, DryRun: true, Reason: "app retired", Operator: "ops:alice"})
	if err != nil || dry.GetCount() != 1 || !dry.GetDryRun() {
		t.Fatalf("dry run: %v %v", dry, err)
	}
	key := noticeRow(persistence.SourceRoomOutbox, "other", "twin").NoticeKey
	if d, _ := f.store.Get(ctx, key); d.Status != persistence.NoticeFailed {
		t.Fatalf("a dry run changed the row: %+v", d)
	}
	got, err := f.client.BulkSkipNotices(ctx, &roomcellv1.BulkSkipNoticesRequest{Selector: sel, Reason: "app retired", Operator: "ops:alice"})
	if err != nil || got.GetCount() != 1 {
		t.Fatalf("bulk skip: %v %v", got, err)
	}
	if d, _ := f.store.Get(ctx, key); d.Status != persistence.NoticeSkipped || d.LastError != "skipped by ops:alice: app retired (was: im: down)" {
		t.Fatalf("skipped row: %+v", d)
	}
	if d, _ := f.store.Get(ctx, noticeRow(persistence.SourceRoomOutbox, "lalu", "twin").NoticeKey); d.Status != persistence.NoticeFailed {
		t.Fatalf("a row of another app was skipped: %+v", d)
	}
	list, err := f.client.ListNotices(ctx, &roomcellv1.ListNoticesRequest{Status: persistence.NoticeSkipped})
	if err != nil || len(list.GetEntries()) != 1 {
		t.Fatalf("list skipped: %v %v", list, err)
	}
	if len(f.kicks()) != 0 {
		t.Fatalf("a skip kicked a worker: %v", f.kicks())
	}
}
