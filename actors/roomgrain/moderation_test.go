package roomgrain

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/room"
)

// Bans, unbans, closes and reopens race joins and leaves of 50 users. In
// the command log, no user banned at a seq (RoomUserBanned, or
// RoomUserKicked with a ban) is a member at any later seq before the ban
// ends or an unban, across every lifecycle of the room: a reopen brings
// no banned user back.
func TestBanRacesJoins(t *testing.T) {
	f := newFixture(t)
	pid := f.activate("app/r1")
	f.mustDo(pid, rcCreate("c1", "owner"))
	const users, ops = 50, 60
	var wg sync.WaitGroup
	for u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user := fmt.Sprintf("u%02d", u)
			for i := range ops {
				id := fmt.Sprintf("%s-%d", user, i)
				if i%3 == 2 {
					_, _ = f.do(pid, wrap(&v1.LeaveRoomRequest{CommandId: id, AppCode: "app", RoomId: "r1", UserId: user}))
				} else {
					_, _ = f.do(pid, wrap(&v1.JoinRoomRequest{CommandId: id, AppCode: "app", RoomId: "r1", UserId: user}))
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		r := rand.New(rand.NewPCG(3, 4))
		for i := range users * ops / 4 {
			id := fmt.Sprintf("mod-%d", i)
			target := fmt.Sprintf("u%02d", r.IntN(users))
			switch k := r.IntN(40); {
			case k == 0:
				_, _ = f.do(pid, wrap(&v1.CloseRoomRequest{CommandId: id, AppCode: "app", RoomId: "r1", UserId: "owner"}))
				continue
			case k < 4:
				_, _ = f.do(pid, wrap(&v1.ReopenRoomRequest{CommandId: id, AppCode: "app", RoomId: "r1", UserId: "owner"}))
				continue
			}
			if r.IntN(3) == 0 {
				_, _ = f.do(pid, wrap(&v1.UnbanUserRequest{CommandId: id, AppCode: "app", RoomId: "r1", UserId: "owner", TargetUserId: target}))
			} else {
				_, _ = f.do(pid, wrap(&v1.BanUserRequest{CommandId: id, AppCode: "app", RoomId: "r1", UserId: "owner", TargetUserId: target, BanSeconds: 3600}))
			}
		}
	}()
	wg.Wait()
	f.mustDo(pid, wrap(&v1.ReopenRoomRequest{CommandId: "reopen-last", AppCode: "app", RoomId: "r1", UserId: "owner"}))

	recs, err := f.store.LoadCommands(context.Background(), grainKey, 0)
	if err != nil {
		t.Fatal(err)
	}
	s := room.NewState("app", "r1")
	banned := map[string]int64{} // user -> ban end, from the events alone
	var bans, unbans, joins, refusedByBan, closes, reopens int
	for _, rec := range recs {
		evs, err := persistence.DecodeEvents(rec.Events)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			switch e := e.(type) {
			case room.RoomUserBanned:
				banned[e.TargetUserID] = e.BanUntilMs
				bans++
			case room.RoomUserKicked:
				if e.BanUntilMs > 0 {
					banned[e.TargetUserID] = e.BanUntilMs
					bans++
				}
			case room.RoomUserUnbanned:
				delete(banned, e.TargetUserID)
				unbans++
			case room.RoomClosed:
				closes++
			case room.RoomCreated:
				if e.Reopened {
					reopens++
				}
			case room.RoomUserJoined:
				joins++
				if until, ok := banned[e.UserID]; ok && e.JoinedAtMs < until {
					t.Fatalf("seq %d: %s joined while banned until %d", rec.Seq, e.UserID, until)
				}
			}
		}
		s.ApplyInPlace(rec.Seq, evs)
		for u := range banned {
			if s.IsMember(u) {
				t.Fatalf("seq %d: banned %s is a member", rec.Seq, u)
			}
		}
	}
	for u := range banned {
		if _, err := f.do(pid, wrap(&v1.JoinRoomRequest{CommandId: "late-" + u, AppCode: "app", RoomId: "r1", UserId: u})); err != nil {
			refusedByBan++
		}
	}
	t.Logf("%d commands: %d bans, %d unbans, %d joins, %d closes, %d reopens; %d users banned at the end, %d of them refused a join",
		len(recs), bans, unbans, joins, closes, reopens, len(banned), refusedByBan)
	if bans < 50 || unbans < 10 || joins < 100 || closes < 3 || reopens < 3 || refusedByBan != len(banned) {
		t.Fatalf("the race did not exercise bans and lifecycles: %d bans, %d unbans, %d joins, %d closes, %d reopens, %d/%d refused",
			bans, unbans, joins, closes, reopens, refusedByBan, len(banned))
	}
}
