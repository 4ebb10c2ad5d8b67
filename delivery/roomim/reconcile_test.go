package roomim_test

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/roomim"
	"github.com/hyapp/roomcell/delivery/tencentim"
)

func TestDiffBans(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_500)
	ms := func(d time.Duration) int64 { return now.Add(d).UnixMilli() }
	im := func(user string, d time.Duration) tencentim.BannedMember {
		// As Tencent reports it: whole seconds.
		return tencentim.BannedMember{UserID: user, Until: time.Unix(now.Add(d).Unix(), 0)}
	}
	cases := []struct {
		name string
		room map[string]int64
		im   []tencentim.BannedMember
		want roomim.BanPlan
	}{
		{name: "both empty"},
		{name: "in line, IM in whole seconds",
			room: map[string]int64{"a": ms(time.Hour), "b": ms(90 * time.Second)},
			im:   []tencentim.BannedMember{im("b", 90*time.Second), im("a", time.Hour+time.Second/2)}},
		{name: "missing in IM: banned for what is left, rounded up",
			room: map[string]int64{"a": ms(time.Hour), "b": ms(1500 * time.Millisecond)},
			want: roomim.BanPlan{Ban: []roomim.BanOrder{{UserID: "a", Seconds: 3600}, {UserID: "b", Seconds: 2}}}},
		{name: "IM ends earlier: banned again",
			room: map[string]int64{"a": ms(time.Hour)},
			im:   []tencentim.BannedMember{im("a", time.Minute)},
			want: roomim.BanPlan{Ban: []roomim.BanOrder{{UserID: "a", Seconds: 3600}}}},
		{name: "IM ends later: set to the room's",
			room: map[string]int64{"a": ms(time.Minute)},
			im:   []tencentim.BannedMember{im("a", time.Hour)},
			want: roomim.BanPlan{Ban: []roomim.BanOrder{{UserID: "a", Seconds: 60}}}},
		{name: "IM bans a user the room does not: unbanned",
			room: map[string]int64{"a": ms(time.Hour)},
			im:   []tencentim.BannedMember{im("z", time.Hour), im("a", time.Hour), im("y", time.Minute)},
			want: roomim.BanPlan{Unban: []string{"y", "z"}}},
		{name: "a room ban already over is no ban",
			room: map[string]int64{"old": ms(-time.Second), "edge": now.UnixMilli()},
			im:   []tencentim.BannedMember{im("old", time.Hour)},
			want: roomim.BanPlan{Unban: []string{"old"}}},
		{name: "an IM entry already over is no ban",
			room: map[string]int64{"a": ms(time.Hour)},
			im:   []tencentim.BannedMember{im("a", -time.Second), im("gone", -time.Minute)},
			want: roomim.BanPlan{Ban: []roomim.BanOrder{{UserID: "a", Seconds: 3600}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := roomim.DiffBans(c.room, c.im, now)
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
			if got.Empty() != (len(c.want.Ban)+len(c.want.Unban) == 0) {
				t.Fatal("Empty disagrees with the plan")
			}
		})
	}
}

// After drift the outbox cannot repair (a ban IM never got, an IM ban the
// room lifted, an IM ban cut short, plus more bans than one call takes),
// the repair makes the fake's ban list equal the room's bans in force;
// a second run changes nothing.
func TestReconcileBansRepairsDrift(t *testing.T) {
	ctx := ctxT(t)
	now := time.Now()
	f := setup(t, nil, roomim.WithClock(func() time.Time { return now }))
	const app, rid = "lalu", "drift"
	gid := roomim.GroupID(app, rid)
	if err := f.pub.EnsureGroup(ctx, app, rid, "host", "drift"); err != nil {
		t.Fatal(err)
	}
	roomBans := map[string]int64{
		"kept":  now.Add(time.Hour).UnixMilli(),
		"cut":   now.Add(2 * time.Hour).UnixMilli(),
		"over":  now.Add(-time.Minute).UnixMilli(),
		"never": now.Add(30 * time.Minute).UnixMilli(),
	}
	for i := range 25 { // one batch ban of the room: same end, > 20 accounts
		roomBans[fmt.Sprintf("batch%02d", i)] = now.Add(10 * time.Minute).UnixMilli()
	}
	ban := func(user string, secs int64) {
		t.Helper()
		if err := f.client.BanGroupMember(ctx, gid, []string{user}, secs, ""); err != nil {
			t.Fatal(err)
		}
	}
	ban("kept", 3600)
	ban("cut", 60)       // IM's ban ends too early
	ban("extra", 3600)   // IM bans someone the room does not
	ban("lifted", 86400) // the room's unban never reached IM
	// "never" and the batch: the room's bans never reached IM.

	plan, err := f.pub.ReconcileBans(ctx, app, rid, roomBans)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Ban) != 27 /* cut, never, the batch; kept is in line */ || !reflect.DeepEqual(plan.Unban, []string{"extra", "lifted"}) {
		t.Fatalf("plan: %d bans, unbans %v", len(plan.Ban), plan.Unban)
	}
	for user, untilMs := range roomBans {
		until, banned := f.fake.BannedUntil(gid, user)
		inForce := untilMs > now.UnixMilli()
		if banned != inForce {
			t.Fatalf("%s: banned in IM %v, in the room %v", user, banned, inForce)
		}
		if inForce && until.Sub(time.UnixMilli(untilMs)).Abs() > time.Second {
			t.Fatalf("%s: IM ban ends %s, the room's %s", user, until, time.UnixMilli(untilMs))
		}
	}
	for _, user := range []string{"extra", "lifted"} {
		if _, banned := f.fake.BannedUntil(gid, user); banned {
			t.Fatalf("%s still banned in IM", user)
		}
	}
	list, err := f.client.GetGroupBanMembers(ctx, gid)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 28 {
		t.Fatalf("IM lists %d bans, the room has 28 in force: %v", len(list), list)
	}

	// A second run: nothing to do, and no ban or unban call made.
	before := len(f.fake.Calls())
	again, err := f.pub.ReconcileBans(ctx, app, rid, roomBans)
	if err != nil || !again.Empty() {
		t.Fatalf("second run: %+v, %v", again, err)
	}
	for _, c := range f.fake.Calls()[before:] {
		if c.API != tencentim.APIGetGroupBanMember {
			t.Fatalf("second run called %s", c.API)
		}
	}
}

// A group type that takes no room bans (member lists instead) gets an
// empty plan and no call.
func TestReconcileBansSkipsOtherGroupTypes(t *testing.T) {
	f := setup(t, func(c *configs.TencentIMConfig) { c.GroupType = "Public" })
	before := len(f.fake.Calls())
	plan, err := f.pub.ReconcileBans(ctxT(t), "lalu", "pub", map[string]int64{"a": time.Now().Add(time.Hour).UnixMilli()})
	if err != nil || !plan.Empty() || len(f.fake.Calls()) != before {
		t.Fatalf("public group: %+v, %v, %d calls", plan, err, len(f.fake.Calls())-before)
	}
}
