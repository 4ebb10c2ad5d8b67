//go:build !race

package main

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/cluster/clustertest"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/room"
)

// The seat race: 200 users and three operators (the owner, two admins)
// race for the 8 seats of one room on three roomcell processes: users
// apply (timeouts of 1–4 s, so many expire), cancel, take seats directly
// (while the owner has the room in free mode), move, release, and answer
// the invitations they get (accept or decline, sometimes too late);
// operators approve and reject pending applications, invite, kick users
// off seats, move them (onto taken seats too, with force or swap), take
// seats themselves, and the owner switches the seat mode every few
// seconds. Every client retries retryable errors
// with the same command_id on another node. Mid-run the room's owner
// node is SIGKILLed (and started again later), then the new owner is
// frozen (SIGSTOP) past its lease and continued, its stale activation
// holding queued commands and a seat timer. Then the room's own timers
// end what is still pending.
//
// Asserted, by replaying the store's command log with the pure room
// package, at every seq: no seat is taken while held (RoomMicTaken of a
// held seat would be two users on it), no user takes a second seat,
// every RoomMicReleased frees the seat its user held, and the replayed
// state's seats, applications and invitations equal the ones the events
// describe; every application and invitation opened ends exactly once,
// with an outcome of the protocol, and none is left open; the log is
// gapless from 1; every acknowledged command is in it once at its seq;
// the live room equals the replay; no client got an internal error.
// The run must have exercised every application outcome (approved,
// rejected, cancelled, expired), accepts, declines and expiries of
// invitations, refused seat conflicts, and expiries committed after the
// kill.
//
// ROOMCELL_SEAT_CHAOS_LONG=1 runs 20 s before the kill, 20 s after it,
// 10 s after the restart and after the thaw, and freezes 15 s, instead of
// 6, 6, 3 and 5 s; then it also cuts the owner off for 15 s with the
// partition harness (nodes in network namespaces), 10 s after the heal.
func TestMultiMemberSeatRaceUnderOwnerKill(t *testing.T) {
	long := chaosLong("ROOMCELL_SEAT_CHAOS_LONG")
	before, after, tail, freeze := 6*time.Second, 6*time.Second, 3*time.Second, 5*time.Second
	if long {
		before, after, tail, freeze = 20*time.Second, 20*time.Second, 10*time.Second, 15*time.Second
	}
	const users, seats = 200, 8
	start := time.Now()
	c := clustertest.New(t, clustertest.Options{Nodes: 3, BinDir: clusterBinDir(), Netns: long, Edit: func(_ int, nc *clustertest.NodeConfig) {
		nc.Presence = map[string]any{"stale_after": "10m"} // nobody heartbeats
	}})
	clusterUp := time.Since(start)
	sc := newSeatClients(t, c)
	const roomID = "seats"
	operators := []string{"owner", "admin-1", "admin-2"}
	sc.mustDo("create", func(ctx context.Context, rc v1.RoomServiceClient) (*v1.CommandReply, error) {
		return rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "create", AppCode: clustertest.App, RoomId: roomID,
			UserId: "owner", Name: "seats", MicSeats: seats, AdminUserIds: operators[1:]})
	})
	userIDs := make([]string, users)
	for i := range userIDs {
		userIDs[i] = fmt.Sprintf("u%03d", i)
	}
	var wg sync.WaitGroup
	// 20 joins in flight: the room commits one command at a time, and a
	// storm of 200 would mostly wait out its deadline and be retried.
	slots := make(chan struct{}, 20)
	for _, u := range append(slices.Clone(operators), userIDs...) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			sc.mustDo("join-"+u, func(ctx context.Context, rc v1.RoomServiceClient) (*v1.CommandReply, error) {
				return rc.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: "join-" + u, AppCode: clustertest.App, RoomId: roomID, UserId: u})
			})
		}()
	}
	wg.Wait()
	setupTook := time.Since(start)
	sc.mustDo("mode-0", func(ctx context.Context, rc v1.RoomServiceClient) (*v1.CommandReply, error) {
		return rc.SetSeatMode(ctx, &v1.SetSeatModeRequest{CommandId: "mode-0", AppCode: clustertest.App, RoomId: roomID, UserId: "owner", SeatMode: room.SeatModeApply})
	})

	// Invitations reach their invitee through its inbox, as IM would.
	inbox := map[string]chan struct{}{}
	for _, u := range append(slices.Clone(operators), userIDs...) {
		inbox[u] = make(chan struct{}, 1)
	}
	stop := make(chan struct{})
	stopped := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopped()
	sleep := func(lo, hi time.Duration) bool {
		select {
		case <-stop:
			return false
		case <-time.After(lo + rand.N(hi-lo)):
			return true
		}
	}
	for _, u := range userIDs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				case <-inbox[u]:
					// Answer after 0–2 s: an invitation of 1–4 s sometimes
					// runs out first.
					if !sleep(time.Millisecond, 2*time.Second) {
						return
					}
					sc.userAnswer(roomID, u, k)
					continue
				case <-time.After(time.Second + rand.N(2*time.Second)):
				}
				sc.userAct(roomID, u, k, seats)
			}
		}()
	}
	for i, op := range operators {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mode := 0
			lastMode := time.Now()
			for k := 0; sleep(100*time.Millisecond, 300*time.Millisecond); k++ {
				if i == 0 && time.Since(lastMode) > 3*time.Second {
					mode++
					lastMode = time.Now()
					m := []string{room.SeatModeApply, room.SeatModeFree}[mode%2]
					sc.do(fmt.Sprintf("%s-%d", op, k), "SetSeatMode", func(ctx context.Context, rc v1.RoomServiceClient, id string) (*v1.CommandReply, error) {
						return rc.SetSeatMode(ctx, &v1.SetSeatModeRequest{CommandId: id, AppCode: clustertest.App, RoomId: roomID, UserId: op, SeatMode: m})
					})
					continue
				}
				sc.operatorAct(roomID, op, k, seats, userIDs, inbox)
			}
		}()
	}

	if !sleep(before, before+time.Millisecond) {
		t.Fatal("stopped early")
	}
	victim := ownerNode(t, c, roomID)
	killedAt := time.Now()
	victim.Kill()
	t.Logf("SIGKILLed %s, the room's owner, %s into the race", victim.ID, killedAt.Sub(start).Round(time.Second))
	sleep(after, after+time.Millisecond)
	victim.Start(t)
	victim.WaitReady(t, 60*time.Second)
	sleep(tail, tail+time.Millisecond)
	// Then freeze the owner past its lease: the room moves, and on SIGCONT
	// the stale activation still has commands and a seat timer queued.
	frozen := ownerNode(t, c, roomID)
	frozen.Pause()
	t.Logf("SIGSTOPped %s, the room's owner, for %s", frozen.ID, freeze)
	sleep(freeze, freeze+time.Millisecond)
	frozen.Resume()
	sleep(tail, tail+time.Millisecond)
	if long {
		// And cut the owner off (it keeps running: its seat timer fires
		// and its expiry cannot commit until the heal, when it is fenced).
		cutOff := ownerNode(t, c, roomID)
		cutOff.Partition(t)
		t.Logf("cut off %s, the room's owner, for %s", cutOff.ID, freeze)
		sleep(freeze, freeze+time.Millisecond)
		cutOff.Heal(t)
		sleep(tail, tail+time.Millisecond)
	}
	// On a slow machine a short race may not have produced every way a
	// client ends a request yet: race on (30 s at most) until it has.
	clientOutcomes := []string{"application " + room.OutcomeApproved, "application " + room.OutcomeRejected,
		"application " + room.OutcomeCancelled, "invitation " + room.OutcomeAccepted, "invitation " + room.OutcomeDeclined}
	for until := time.Now().Add(30 * time.Second); time.Now().Before(until); time.Sleep(200 * time.Millisecond) {
		sc.mu.Lock()
		all := true
		for _, o := range clientOutcomes {
			all = all && sc.seen[o]
		}
		sc.mu.Unlock()
		if all {
			break
		}
	}
	stopped()
	raceEnd := time.Now()

	// What is still pending runs out by the room's own timers (4 s at
	// most); reads through any node keep the room active meanwhile.
	waitUntil(t, 30*time.Second, "every seat request ends", func() bool {
		var rep *v1.ListSeatRequestsReply
		err := retrying(10*time.Second, func(i int) error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var err error
			rep, err = c.Nodes[i%len(c.Nodes)].Rooms(t).ListSeatRequests(ctx, &v1.ListSeatRequestsRequest{AppCode: clustertest.App, RoomId: roomID})
			return err
		})
		if err != nil {
			t.Fatalf("list seat requests: %v", err)
		}
		return len(rep.GetApplications()) == 0 && len(rep.GetInvitations()) == 0
	})

	// The live room first, then the log (which may have grown since):
	// the replay up to the live room's seq must equal it.
	var live *v1.GetRoomReply
	if err := retrying(10*time.Second, func(i int) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var err error
		live, err = c.Nodes[i%len(c.Nodes)].Rooms(t).GetRoom(ctx, &v1.GetRoomRequest{AppCode: clustertest.App, RoomId: roomID, PageSize: 1000})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	recs, err := c.RoomStore(t, roomID).LoadCommands(context.Background(), persistence.RoomKey{AppCode: clustertest.App, RoomID: roomID}, 0)
	if err != nil {
		t.Fatal(err)
	}
	rep := replaySeats(t, recs)
	if n := live.GetRoom().GetSeq(); n < 1 || n > int64(len(recs)) {
		t.Fatalf("live room at seq %d; the log has %d commands", n, len(recs))
	}
	want := room.View(replayTo(t, recs[:live.GetRoom().GetSeq()]))
	if fmt.Sprint(live.GetRoom().GetSeats()) != fmt.Sprint(want.GetSeats()) || !slices.Equal(live.GetRoom().GetMembers(), want.GetMembers()) ||
		fmt.Sprint(live.GetRoom().GetSeatApplications(), live.GetRoom().GetSeatInvitations()) != fmt.Sprint(want.GetSeatApplications(), want.GetSeatInvitations()) {
		t.Errorf("live room at seq %d: seats %v; the replay of the log to that seq: seats %v", live.GetRoom().GetSeq(), live.GetRoom().GetSeats(), want.GetSeats())
	}

	sc.mu.Lock()
	defer sc.mu.Unlock()
	for _, f := range sc.faults {
		t.Error(f)
	}
	seqOf := map[string][]int64{}
	for _, r := range recs {
		seqOf[r.CommandID] = append(seqOf[r.CommandID], r.Seq)
	}
	for id, seq := range sc.acked {
		if got := seqOf[id]; len(got) != 1 || got[0] != seq {
			t.Errorf("acknowledged command %s (seq %d) is in the log at %v", id, seq, got)
		}
	}
	var expiredAfterKill int
	for _, r := range recs {
		if strings.HasPrefix(r.CommandID, room.SeatExpireIDPrefix) && r.CreatedAtMs > killedAt.UnixMilli() {
			expiredAfterKill++
		}
	}
	for _, need := range []string{"application " + room.OutcomeApproved, "application " + room.OutcomeRejected,
		"application " + room.OutcomeCancelled, "application " + room.OutcomeExpired, "invitation " + room.OutcomeAccepted,
		"invitation " + room.OutcomeDeclined, "invitation " + room.OutcomeExpired} {
		if rep.outcomes[need] == 0 {
			t.Errorf("no %s in the run: the race did not exercise it", need)
		}
	}
	if sc.refusals["TakeMic "+codes.FailedPrecondition.String()]+sc.refusals["ApproveSeatApplication "+codes.FailedPrecondition.String()] == 0 {
		t.Error("no seat conflict was refused: the race did not race")
	}
	if expiredAfterKill == 0 {
		t.Error("no expiry was committed after the kill")
	}
	t.Logf("%d commands in the log (%d acknowledged to the clients, %d attempts retried), %d seat takes, %d releases, %d expiry commands after the kill",
		len(recs), len(sc.acked), sc.retried.Load(), rep.takes, rep.releases, expiredAfterKill)
	t.Logf("outcomes: %s", counts(rep.outcomes))
	t.Logf("refused: %s", counts(sc.refusals))
	t.Logf("cluster up %s, then 203 joins %s; race until %s, %s in all", clusterUp.Round(time.Second), (setupTook - clusterUp).Round(time.Second),
		raceEnd.Sub(start).Round(time.Second), time.Since(start).Round(time.Second))
}

// seatClients send the race's commands through random nodes, retrying
// retryable errors with the same command_id, and keep the acks.
type seatClients struct {
	c       *clustertest.Cluster
	t       *testing.T
	retried atomic.Int64

	mu       sync.Mutex
	acked    map[string]int64 // command_id -> the seq its reply named
	refusals map[string]int   // "method code" -> count
	last     error            // the last refusal
	seen     map[string]bool  // request outcomes in the replies: "application approved"
	faults   []string
}

func newSeatClients(t *testing.T, c *clustertest.Cluster) *seatClients {
	return &seatClients{c: c, t: t, acked: map[string]int64{}, refusals: map[string]int{}, seen: map[string]bool{}}
}

// do runs one command until it is answered (ack or refusal) or 60 s
// pass; it returns the reply (nil when refused).
func (sc *seatClients) do(id, method string, call func(ctx context.Context, rc v1.RoomServiceClient, id string) (*v1.CommandReply, error)) *v1.CommandReply {
	var rep *v1.CommandReply
	err := retrying(60*time.Second, func(attempt int) error {
		if attempt > 0 {
			sc.retried.Add(1)
		}
		n := sc.c.Nodes[rand.IntN(len(sc.c.Nodes))]
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var err error
		rep, err = call(ctx, n.Rooms(sc.t), id)
		return err
	})
	sc.mu.Lock()
	defer sc.mu.Unlock()
	switch code := status.Code(err); {
	case err == nil:
		sc.acked[id] = rep.GetRoomSeq()
		for _, e := range rep.GetEvents() {
			switch ev, _ := room.DecodeEvent(e.GetEventType(), []byte(e.GetPayload())); ev := ev.(type) {
			case room.RoomSeatApplicationEnded:
				sc.seen["application "+ev.Outcome] = true
			case room.RoomSeatInvitationEnded:
				sc.seen["invitation "+ev.Outcome] = true
			}
		}
		return rep
	case code == codes.Internal || code == codes.Unknown || clustertest.Retryable(err):
		sc.faults = append(sc.faults, fmt.Sprintf("%s %s: %v", method, id, err))
	default:
		sc.refusals[method+" "+code.String()]++
		sc.last = err
	}
	return nil
}

func (sc *seatClients) mustDo(id string, call func(ctx context.Context, rc v1.RoomServiceClient) (*v1.CommandReply, error)) {
	if sc.do(id, "setup", func(ctx context.Context, rc v1.RoomServiceClient, _ string) (*v1.CommandReply, error) {
		return call(ctx, rc)
	}) == nil {
		sc.t.Fatalf("setup command %s refused: %v", id, sc.last)
	}
}

// userAct is one random move of a user who may or may not hold a seat
// or have a pending request: the room decides.
func (sc *seatClients) userAct(roomID, u string, k, seats int) {
	id := fmt.Sprintf("%s-%d", u, k)
	seat := int32(rand.IntN(seats))
	base := func() (string, string, string) { return clustertest.App, roomID, u }
	switch p := rand.IntN(100); {
	case p < 40:
		timeout := int64(1 + rand.IntN(4))
		sc.do(id, "ApplySeat", func(ctx context.Context, rc v1.RoomServiceClient, id string) (*v1.CommandReply, error) {
			app, r, u := base()
			return rc.ApplySeat(ctx, &v1.ApplySeatRequest{CommandId: id, AppCode: app, RoomId: r, UserId: u, Seat: seat, TimeoutSeconds: timeout})
		})
	case p < 55:
		sc.do(id, "TakeMic", func(ctx context.Context, rc v1.RoomServiceClient, id string) (*v1.CommandReply, error) {
			app, r, u := base()
			return rc.TakeMic(ctx, &v1.TakeMicRequest{CommandId: id, AppCode: app, RoomId: r, UserId: u, Seat: seat})
		})
	case p < 67:
		sc.do(id, "CancelSeatApplication", func(ctx context.Context, rc v1.RoomServiceClient, id string) (*v1.CommandReply, error) {
			app, r, u := base()
			return rc.CancelSeatApplication(ctx, &v1.CancelSeatApplicationRequest{CommandId: id, AppCode: app, RoomId: r, UserId: u})
		})
	case p < 77:
		sc.do(id, "MoveSeat", func(ctx context.Context, rc v1.RoomServiceClient, id string) (*v1.CommandReply, error) {
			app, r, u := base()
			return rc.MoveSeat(ctx, &v1.MoveSeatRequest{CommandId: id, AppCode: app, RoomId: r, UserId: u, Seat: seat})
		})
	default:
		sc.do(id, "ReleaseMic", func(ctx context.Context, rc v1.RoomServiceClient, id string) (*v1.CommandReply, error) {
			app, r, u := base()
			return rc.ReleaseMic(ctx, &v1.ReleaseMicRequest{CommandId: id, AppCode: app, RoomId: r, UserId: u})
		})
	}
}

// userAnswer accepts (70 %) or declines an invitation.
func (sc *seatClients) userAnswer(roomID, u string, k int) {
	id := fmt.Sprintf("%s-%d", u, k)
	if rand.IntN(10) < 7 {
		sc.do(id, "AcceptSeatInvitation", func(ctx context.Context, rc v1.RoomServiceClient, id string) (*v1.CommandReply, error) {
			return rc.AcceptSeatInvitation(ctx, &v1.AcceptSeatInvitationRequest{CommandId: id, AppCode: clustertest.App, RoomId: roomID, UserId: u})
		})
		return
	}
	sc.do(id, "DeclineSeatInvitation", func(ctx context.Context, rc v1.RoomServiceClient, id string) (*v1.CommandReply, error) {
		return rc.DeclineSeatInvitation(ctx, &v1.DeclineSeatInvitationRequest{CommandId: id, AppCode: clustertest.App, RoomId: roomID, UserId: u})
	})
}

// operatorAct is one move of the owner or an admin, from a fresh read
// of the room (which may be stale by the time the command lands).
func (sc *seatClients) operatorAct(roomID, op string, k, seats int, userIDs []string, inbox map[string]chan struct{}) {
	id := fmt.Sprintf("%s-%d", op, k)
	var view *v1.GetRoomReply
	if err := retrying(10*time.Second, func(i int) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var err error
		view, err = sc.c.Nodes[rand.IntN(len(sc.c.Nodes))].Rooms(sc.t).GetRoom(ctx, &v1.GetRoomRequest{AppCode: clustertest.App, RoomId: roomID, PageSize: 1})
		return err
	}); err != nil {
		return // the room is moving; next turn
	}
	r := view.GetRoom()
	var seated []string
	var free []int32
	for _, s := range r.GetSeats() {
		if s.GetUserId() != "" {
			seated = append(seated, s.GetUserId())
		} else {
			free = append(free, s.GetSeat())
		}
	}
	// Mostly a seat that was free when read: the command may still find
	// it taken.
	seat := int32(rand.IntN(seats))
	if len(free) > 0 && rand.IntN(4) > 0 {
		seat = free[rand.IntN(len(free))]
	}
	switch p := rand.IntN(100); {
	case p < 45 && len(r.GetSeatApplications()) > 0:
		target := r.GetSeatApplications()[rand.IntN(len(r.GetSeatApplications()))].GetUserId()
		if rand.IntN(100) < 65 {
			sc.do(id, "ApproveSeatApplication", func(ctx context.Context, rc v1.RoomServiceClient, id string) (*v1.CommandReply, error) {
				return rc.ApproveSeatApplication(ctx, &v1.ApproveSeatApplicationRequest{CommandId: id, AppCode: clustertest.App, RoomId: roomID, UserId: op, TargetUserId: target})
			})
		} else {
			sc.do(id, "RejectSeatApplication", func(ctx context.Context, rc v1.RoomServiceClient, id string) (*v1.CommandReply, error) {
				return rc.RejectSeatApplication(ctx, &v1.RejectSeatApplicationRequest{CommandId: id, AppCode: clustertest.App, RoomId: roomID, UserId: op, TargetUserId: target})
			})
		}
	case p < 65:
		target := userIDs[rand.IntN(len(userIDs))]
		timeout := int64(1 + rand.IntN(4))
		if sc.do(id, "InviteToSeat", func(ctx context.Context, rc v1.RoomServiceClient, id string) (*v1.CommandReply, error) {
			return rc.InviteToSeat(ctx, &v1.InviteToSeatRequest{CommandId: id, AppCode: clustertest.App, RoomId: roomID, UserId: op, TargetUserId: target, Seat: seat, TimeoutSeconds: timeout})
		}) != nil {
			select {
			case inbox[target] <- struct{}{}:
			default:
			}
		}
	case p < 80 && len(seated) > 0:
		target := seated[rand.IntN(len(seated))]
		sc.do(id, "KickOffSeat", func(ctx context.Context, rc v1.RoomServiceClient, id string) (*v1.CommandReply, error) {
			return rc.KickOffSeat(ctx, &v1.KickOffSeatRequest{CommandId: id, AppCode: clustertest.App, RoomId: roomID, UserId: op, TargetUserId: target})
		})
	case p < 90 && len(seated) > 0:
		target := seated[rand.IntN(len(seated))]
		// Onto a taken seat too: the policies displace or swap its holder
		// (chosen once: a retry sends the same request).
		policy := []string{"", room.MoveForce, room.MoveSwap}[rand.IntN(3)]
		sc.do(id, "MoveSeat", func(ctx context.Context, rc v1.RoomServiceClient, id string) (*v1.CommandReply, error) {
			return rc.MoveSeat(ctx, &v1.MoveSeatRequest{CommandId: id, AppCode: clustertest.App, RoomId: roomID, UserId: op, TargetUserId: target, Seat: seat, Policy: policy})
		})
	case p < 95:
		sc.do(id, "TakeMic", func(ctx context.Context, rc v1.RoomServiceClient, id string) (*v1.CommandReply, error) {
			return rc.TakeMic(ctx, &v1.TakeMicRequest{CommandId: id, AppCode: clustertest.App, RoomId: roomID, UserId: op, Seat: seat})
		})
	default:
		sc.do(id, "ReleaseMic", func(ctx context.Context, rc v1.RoomServiceClient, id string) (*v1.CommandReply, error) {
			return rc.ReleaseMic(ctx, &v1.ReleaseMicRequest{CommandId: id, AppCode: clustertest.App, RoomId: roomID, UserId: op})
		})
	}
}

// seatReplay is what replaying a room's log found.
type seatReplay struct {
	takes, releases int
	outcomes        map[string]int // "application approved" -> count
}

// endOutcomes are the ways a request ends (room/seatrequest.go).
var endOutcomes = map[string]bool{room.OutcomeApproved: true, room.OutcomeRejected: true, room.OutcomeCancelled: true,
	room.OutcomeAccepted: true, room.OutcomeDeclined: true, room.OutcomeExpired: true, room.OutcomeSeated: true,
	room.OutcomeLeft: true, room.OutcomeClosed: true, room.OutcomeSeatRemoved: true}

// replaySeats replays the log event by event against its own account of
// seats and requests, and command by command with room.ApplyCommand,
// failing the test at the first seq where the seat or request rules
// break or the two disagree.
func replaySeats(t *testing.T, recs []persistence.CommandRecord) seatReplay {
	t.Helper()
	rep := seatReplay{outcomes: map[string]int{}}
	if len(recs) == 0 {
		t.Fatal("empty log")
	}
	s := room.NewState(recs[0].AppCode, recs[0].RoomID)
	holder := map[int]string{} // seat -> user
	seatOf := map[string]int{} // user -> seat
	apps := map[string]int64{} // open application -> the seq it opened at
	invs := map[string]int64{}
	for i, rec := range recs {
		if rec.Seq != int64(i+1) {
			t.Fatalf("log seq %d at position %d: a gap or a duplicate", rec.Seq, i)
		}
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("seq %d (%s %s): %s", rec.Seq, rec.CommandType, rec.CommandID, fmt.Sprintf(format, args...))
		}
		// A request opens only when none of its kind is open for the
		// user, and ends only when one is: each ends exactly once.
		opened := func(kind string, open map[string]int64, user string) {
			if at, ok := open[user]; ok {
				fail("a %s of %s opens with the one of seq %d still open", kind, user, at)
			}
			open[user] = rec.Seq
		}
		ended := func(kind string, open map[string]int64, user, outcome string) {
			if _, ok := open[user]; !ok {
				fail("the %s of %s ends (%s) but none is open", kind, user, outcome)
			}
			if !endOutcomes[outcome] {
				fail("%s outcome %q", kind, outcome)
			}
			delete(open, user)
			rep.outcomes[kind+" "+outcome]++
		}
		var evs []room.Event
		for _, env := range rec.Events {
			ev, err := room.DecodeEvent(env.EventType, env.Payload)
			if err != nil {
				t.Fatal(err)
			}
			evs = append(evs, ev)
			switch e := ev.(type) {
			case room.RoomMicTaken:
				if h, ok := holder[e.Seat]; ok {
					fail("%s takes seat %d, which %s holds", e.UserID, e.Seat, h)
				}
				if at, ok := seatOf[e.UserID]; ok {
					fail("%s takes seat %d while on seat %d", e.UserID, e.Seat, at)
				}
				holder[e.Seat], seatOf[e.UserID] = e.UserID, e.Seat
				rep.takes++
			case room.RoomMicReleased:
				if holder[e.Seat] != e.UserID {
					fail("%s released from seat %d, which %q holds", e.UserID, e.Seat, holder[e.Seat])
				}
				delete(holder, e.Seat)
				delete(seatOf, e.UserID)
				rep.releases++
			case room.RoomSeatApplied:
				opened("application", apps, e.UserID)
			case room.RoomSeatApplicationEnded:
				ended("application", apps, e.UserID, e.Outcome)
			case room.RoomSeatInvited:
				opened("invitation", invs, e.UserID)
			case room.RoomSeatInvitationEnded:
				ended("invitation", invs, e.UserID, e.Outcome)
			case room.RoomUserLeft, room.RoomUserKicked, room.RoomSeatCountChanged, room.RoomSeatLocked, room.RoomClosed:
				fail("unexpected %T in this run", e)
			}
		}
		s = room.ApplyCommand(s, rec.Seq, evs)
		// The pure state agrees with the events, seat by seat.
		users := map[string]bool{}
		for seat, u := range s.Seats {
			if u != holder[seat] {
				fail("the replayed state has %q on seat %d; the events put %q there", u, seat, holder[seat])
			}
			if u != "" && users[u] {
				fail("%s holds two seats", u)
			}
			users[u] = true
		}
		if len(users)-btoi(users[""]) != len(seatOf) {
			fail("the replayed state seats %d users; the events %d", len(users)-btoi(users[""]), len(seatOf))
		}
		if !slices.Equal(slices.Sorted(maps.Keys(s.Applications())), slices.Sorted(maps.Keys(apps))) ||
			!slices.Equal(slices.Sorted(maps.Keys(s.Invitations())), slices.Sorted(maps.Keys(invs))) {
			fail("pending requests: state %v / %v, events %v / %v", s.Applications(), s.Invitations(), apps, invs)
		}
	}
	if len(apps) != 0 || len(invs) != 0 {
		t.Fatalf("requests never ended: applications %v, invitations %v (opened at those seqs)", apps, invs)
	}
	return rep
}

// replayTo is the state after recs, by room.ApplyCommand.
func replayTo(t *testing.T, recs []persistence.CommandRecord) room.State {
	t.Helper()
	s := room.NewState(recs[0].AppCode, recs[0].RoomID)
	for _, rec := range recs {
		var evs []room.Event
		for _, env := range rec.Events {
			ev, err := room.DecodeEvent(env.EventType, env.Payload)
			if err != nil {
				t.Fatal(err)
			}
			evs = append(evs, ev)
		}
		s = room.ApplyCommand(s, rec.Seq, evs)
	}
	return s
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ownerNode is the node that owns roomID.
func ownerNode(t *testing.T, c *clustertest.Cluster, roomID string) *clustertest.Node {
	t.Helper()
	for _, via := range c.Nodes {
		if !via.Running() {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		rep, err := via.Admin(t).WhereIsRoom(ctx, &v1.WhereIsRoomRequest{AppCode: clustertest.App, RoomId: roomID})
		cancel()
		if err != nil {
			continue
		}
		for _, n := range c.Nodes {
			if n.ClusterAddr == rep.GetOwnerAddress() {
				return n
			}
		}
	}
	t.Fatalf("no node knows the owner of %s", roomID)
	return nil
}
