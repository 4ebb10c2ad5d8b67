package roomgrain

import (
	"errors"
	"fmt"
	"testing"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/room"
)

func rcListBans() *v1.RoomCommand {
	return wrap(&v1.ListBansRequest{AppCode: "app", RoomId: "r1", PageSize: 100})
}

// A batch ban at its limit bans every target with the reason and the
// operator ListBans shows, live and after the room is activated again
// from its log; over the limit, or with one target it may not ban, the
// call is refused and nothing is written.
func TestBatchBanLimitsAndListBans(t *testing.T) {
	f := newFixture(t)
	pid := f.activate("app/r1")
	f.mustDo(pid, rcCreate("c1", "owner"))
	f.mustDo(pid, rcJoin("j1", "alice"))
	var targets []string
	for i := range room.MaxBanTargets {
		targets = append(targets, fmt.Sprintf("t%02d", i))
	}
	targets[0] = "alice" // a member among them is taken out

	logged := f.logLen()
	refused := []*v1.BanUserRequest{
		{CommandId: "b-over", TargetUserIds: append(targets[1:], "x1", "x2"), TargetUserId: "x3"}, // 22
		{CommandId: "b-owner", TargetUserIds: []string{"x1", "owner"}},
		{CommandId: "b-none"},
	}
	for _, r := range refused {
		r.AppCode, r.RoomId, r.UserId, r.BanSeconds, r.Reason = "app", "r1", "owner", 60, "raid"
		if _, err := f.do(pid, wrap(r)); err == nil {
			t.Fatalf("%s accepted", r.CommandId)
		} else if errors.Is(err, errclass.Unavailable) {
			t.Fatalf("%s: %v", r.CommandId, err)
		}
	}
	if n := f.logLen(); n != logged {
		t.Fatalf("refused bans wrote %d log rows", n-logged)
	}
	if bans := f.mustDo(pid, rcListBans()).GetBans(); len(bans) != 0 {
		t.Fatalf("bans after refused calls: %v", bans)
	}

	f.mustDo(pid, wrap(&v1.BanUserRequest{CommandId: "b-ok", AppCode: "app", RoomId: "r1", UserId: "owner",
		TargetUserIds: targets, BanSeconds: 600, Reason: "raid"}))
	if n := f.logLen(); n != logged+1 {
		t.Fatalf("one batch wrote %d log rows, want 1", n-logged)
	}
	check := func(when string) {
		t.Helper()
		bans := f.mustDo(pid, rcListBans()).GetBans()
		if len(bans) != room.MaxBanTargets {
			t.Fatalf("%s: %d bans, want %d", when, len(bans), room.MaxBanTargets)
		}
		for _, b := range bans {
			if b.GetReason() != "raid" || b.GetOperatorUserId() != "owner" {
				t.Fatalf("%s: ban %v", when, b)
			}
		}
		if got := f.mustDo(pid, rcGet()).GetRoom().GetMembers(); len(got) != 1 || got[0] != "owner" {
			t.Fatalf("%s: members %v", when, got)
		}
	}
	check("live")
	f.sys.Root.Stop(pid)
	pid = f.activate("app/r1")
	check("replayed")
	if _, err := f.do(pid, rcJoin("j2", "alice")); !errors.Is(err, room.ErrBanned) {
		t.Fatalf("banned alice joins: %v", err)
	}
}
