package main

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/roomim"
	"github.com/hyapp/roomcell/delivery/tencentim"
)

// divergedBans makes a dev room whose IM group's ban list left the
// room's behind, as after an IM outage longer than the outbox keeps: the
// room bans alice (a kick with a ban) and erin (a non-member), and they
// reached IM; then, at IM only, alice's ban was lifted and carol (whom the
// room never banned) was banned. It returns the group and the room's ban
// ends.
func divergedBans(t *testing.T, app *App, rc v1.RoomServiceClient, a, r string) (gid string, ends map[string]time.Time) {
	t.Helper()
	ctx := ctxT(t)
	gid = roomim.GroupID(a, r)
	if _, err := rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "c1", AppCode: a, RoomId: r, UserId: "owner", Name: "bans"}); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"alice", "carol"} {
		if _, err := rc.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: "j-" + u, AppCode: a, RoomId: r, UserId: u}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rc.KickUser(ctx, &v1.KickUserRequest{CommandId: "k1", AppCode: a, RoomId: r, UserId: "owner", TargetUserId: "alice", BanSeconds: 600}); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.BanUser(ctx, &v1.BanUserRequest{CommandId: "b1", AppCode: a, RoomId: r, UserId: "owner", TargetUserId: "erin", BanSeconds: 900}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, aliceBanned := app.fakeIM.BannedUntil(gid, "alice")
		_, erinBanned := app.fakeIM.BannedUntil(gid, "erin")
		if aliceBanned && erinBanned {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the room's bans did not reach IM: alice %v, erin %v", aliceBanned, erinBanned)
		}
		time.Sleep(20 * time.Millisecond)
	}
	bans, err := rc.ListBans(ctx, &v1.ListBansRequest{AppCode: a, RoomId: r})
	if err != nil {
		t.Fatal(err)
	}
	ends = map[string]time.Time{}
	for _, b := range bans.GetBans() {
		ends[b.GetUserId()] = time.UnixMilli(b.GetBannedUntilMs())
	}
	// The drift, made at IM only (Tencent's own API, on the fake).
	im, err := tencentim.New(app.fakeIM.ClientConfig(), tencentim.WithHTTPClient(&http.Client{Transport: app.fakeIM.Transport()}))
	if err != nil {
		t.Fatal(err)
	}
	if err := im.UnbanGroupMember(ctx, gid, []string{"alice"}); err != nil {
		t.Fatal(err)
	}
	if err := im.BanGroupMember(ctx, gid, []string{"carol"}, 3600, "drift"); err != nil {
		t.Fatal(err)
	}
	return gid, ends
}

// inLine reports whether IM bans exactly the room's banned users, each
// until the room's end (within Tencent's whole second).
func inLine(app *App, gid string, ends map[string]time.Time) bool {
	for _, u := range []string{"alice", "carol", "erin", "owner"} {
		until, banned := app.fakeIM.BannedUntil(gid, u)
		end, want := ends[u]
		if banned != want || want && until.Sub(end).Abs() > time.Second {
			return false
		}
	}
	return true
}

// TestReconcileImBansRepairsDrift: after the IM ban list diverged from the
// room's (a user banned at IM whom the room does not ban, and one the room
// bans whom IM let go), the operator's ReconcileImBans puts IM back in
// line with the room: carol unbanned, alice banned again until the
// room's end, erin untouched. A second run changes nothing at IM (no ban
// or unban call).
func TestReconcileImBansRepairsDrift(t *testing.T) {
	app, rc := startDev(t, nil)
	const a, r = "demo", "ban-drift"
	gid, ends := divergedBans(t, app, rc, a, r)
	if inLine(app, gid, ends) {
		t.Fatal("the drift was not made")
	}
	admin := v1.NewImAdminClient(dialApp(t, app))
	reply, err := admin.ReconcileImBans(ctxT(t), &v1.ReconcileImBansRequest{AppCode: a, RoomId: r})
	if err != nil {
		t.Fatal(err)
	}
	if reply.GetRoomBans() != 2 || !slices.Equal(reply.GetBannedUsers(), []string{"alice"}) || !slices.Equal(reply.GetUnbannedUsers(), []string{"carol"}) ||
		reply.GetBanned() != 1 || reply.GetUnbanned() != 1 {
		t.Fatalf("reconcile: %+v, want alice banned and carol unbanned of 2 room bans", reply)
	}
	if !inLine(app, gid, ends) {
		t.Fatal("IM is not in line with the room after the reconcile")
	}
	calls := len(app.fakeIM.Calls())
	again, err := admin.ReconcileImBans(ctxT(t), &v1.ReconcileImBansRequest{AppCode: a, RoomId: r})
	if err != nil || again.GetBanned()+again.GetUnbanned() != 0 || again.GetRoomBans() != 2 {
		t.Fatalf("second run: %+v %v, want nothing to do", again, err)
	}
	for _, c := range app.fakeIM.Calls()[calls:] {
		if c.API != tencentim.APIGetGroupBanMember {
			t.Fatalf("the second run called %s", c.API)
		}
	}
	// Bad input changes nothing: a malformed id is InvalidArgument, an
	// unknown room NotFound.
	_, err = admin.ReconcileImBans(ctxT(t), &v1.ReconcileImBansRequest{AppCode: a, RoomId: "bad/id"})
	wantCode(t, err, codes.InvalidArgument, "malformed room id")
	_, err = admin.ReconcileImBans(ctxT(t), &v1.ReconcileImBansRequest{AppCode: a, RoomId: "nowhere"})
	wantCode(t, err, codes.NotFound, "unknown room")
}

// With tencent_im.ban_reconcile_interval set, the room's node repairs the
// same drift on its own, once, and then leaves IM alone.
func TestPeriodicImBanReconcile(t *testing.T) {
	const every = 300 * time.Millisecond
	app, rc := startDev(t, func(c *configs.Config) { c.TencentIM.BanReconcileInterval = every })
	gid, ends := divergedBans(t, app, rc, "demo", "ban-periodic")
	deadline := time.Now().Add(5 * time.Second)
	for !inLine(app, gid, ends) {
		if time.Now().After(deadline) {
			t.Fatal("the periodic reconcile did not put IM in line with the room")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(every) // a round in flight when the check passed finishes
	calls := len(app.fakeIM.Calls())
	time.Sleep(3 * every)
	rounds := 0
	for _, c := range app.fakeIM.Calls()[calls:] {
		switch c.API {
		case tencentim.APIGetGroupBanMember:
			rounds++
		case tencentim.APIBanGroupMember, tencentim.APIUnbanGroupMember:
			t.Fatalf("a round after the repair called %s", c.API)
		}
	}
	if rounds == 0 {
		t.Fatal("no round ran after the repair")
	}
}
