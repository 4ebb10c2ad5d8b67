package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/roomim"
)

func newCtx(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// Likes at live-room rates over gRPC, through a whole dev process (its
// IM the fake behind delivery/roomim): 500 members like one room at
// 10,000 likes a second (each a call of 4 taps every 200 ms, as a client
// gathers taps while its last call waits), retrying a call without an
// answer under the same command_id until it is acknowledged. Quiet and
// liking rounds alternate, a join plus a gift timed in each. The IM group
// gets at most 40 messages in any second (counted at the fake), the
// room's total equals the likes acknowledged, and the median of the
// liking rounds' join+gift p99 is within 20% of the quiet rounds' (plus
// 2 ms: the scheduler's noise, where the quiet p99 itself is a couple of
// milliseconds). A few seconds of liking here, the latency only logged:
// in-process, the likers' 2,500 calls a second share the machine's cores
// with the server, and on a small machine shared with other builds the
// p99 is theirs. ROOMCELL_LIKES_LONG=1 (make test-likes-long, on a machine of
// its own) likes for 30 s and holds the latency bound.
// ROOMCELL_LIKES_ELSEWHERE=1 is the control: the same likes go to another
// room of the same process, so the timed room's p99 is the machine's
// share of the load alone (the bound is not held; the figures are
// logged).
func TestLikesAtLiveRoomRatesOverGRPC(t *testing.T) {
	rounds, round, long := 3, time.Second, os.Getenv("ROOMCELL_LIKES_LONG") != ""
	likedRoom, liker := "hot", "u%d"
	if os.Getenv("ROOMCELL_LIKES_ELSEWHERE") != "" {
		// Users of its own: a user is in one room at a time.
		likedRoom, liker = "other", "o%d"
	}
	if long {
		rounds, round = 10, 3*time.Second
	}
	// Under the race detector every call is many times slower: 50
	// members at 100 likes a second, and the rate and latency are not
	// judged (the counts and the IM rate are).
	// 500 members × 4 taps / 200 ms = 10,000 likes/s.
	members, every, perCall, wantRate := 500, 200*time.Millisecond, int64(4), 8_000.0
	if raceBuild {
		members, every, perCall, wantRate = 50, 500*time.Millisecond, 1, 0
	}
	const (
		appCode  = "likes"
		roomID   = "hot"
		timeout  = 10 * time.Second
		probeGap = 5 * time.Millisecond
	)
	app, rc := startDev(t, func(c *configs.Config) {
		// One timing client joins and gifts far faster than a person.
		c.RateLimits.Join.UserPerSecond, c.RateLimits.Join.AppPerSecond = 1000, 100_000
		c.RateLimits.Gift.UserPerSecond, c.RateLimits.Gift.UserBurst = 1000, 1000
	})
	ctx := ctxT(t)
	if _, err := rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "c", AppCode: appCode, RoomId: roomID, UserId: "owner", Name: "hot", MicSeats: 8}); err != nil {
		t.Fatal(err)
	}
	if likedRoom != roomID {
		if _, err := rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "c2", AppCode: appCode, RoomId: likedRoom, UserId: "owner2", Name: "other", MicSeats: 8}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := walletClient(t, app).Credit(ctx, &v1.WalletCreditRequest{CommandId: "topup", AppCode: appCode, UserId: "owner", AssetType: "COIN", Amount: 1 << 40}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range 25 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < members; i += 25 {
				for _, r := range slices.Compact([]string{roomID, likedRoom}) {
					user := fmt.Sprintf("u%d", i)
					if r != roomID {
						user = fmt.Sprintf(liker, i)
					}
					if _, err := rc.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: fmt.Sprintf("j%d", i), AppCode: appCode, RoomId: r, UserId: user}); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	// The likers come over connections of their own (a connection takes
	// 128 calls at once, and a like waits for its window), as members'
	// apps each have theirs; the timing client keeps its own.
	var likers []v1.RoomServiceClient
	for range 25 {
		conn, err := grpc.NewClient(app.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		likers = append(likers, v1.NewRoomServiceClient(conn))
	}
	// The likers: each member's call of perCall taps every `every`
	// while liking is on, retried under its command_id until answered.
	var liking atomic.Bool
	var acked, calls atomic.Int64
	stop := make(chan struct{})
	like := func(rc v1.RoomServiceClient, user, id string) {
		defer wg.Done()
		for giveUp := time.Now().Add(6 * timeout); time.Now().Before(giveUp); {
			cctx, cancel := newCtx(timeout)
			_, err := rc.LikeRoom(cctx, &v1.LikeRoomRequest{CommandId: id, AppCode: appCode, RoomId: likedRoom, UserId: user, Count: perCall})
			cancel()
			switch status.Code(err) {
			case codes.OK:
				acked.Add(perCall)
				return
			case codes.Unavailable, codes.DeadlineExceeded, codes.Aborted:
				continue // not answered: the same like again
			}
			t.Errorf("like %s of %s: %v", id, user, err)
			return
		}
		t.Errorf("like %s of %s: not acknowledged in %v", id, user, 6*timeout)
	}
	for m := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user := fmt.Sprintf(liker, m)
			// Spread over the period, as clients are.
			time.Sleep(time.Duration(m) * every / time.Duration(members))
			tick := time.NewTicker(every)
			defer tick.Stop()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				if liking.Load() {
					calls.Add(1)
					wg.Add(1)
					go like(likers[m%len(likers)], user, fmt.Sprintf("l-%d-%d", m, n))
				}
			}
		}()
	}

	// Rounds: quiet, liking, quiet, liking, ... each timing joins and
	// gifts for `round`.
	probes := 0
	p99 := func(on bool) time.Duration {
		liking.Store(on)
		if on {
			time.Sleep(every) // every liker has called
		}
		var took []time.Duration
		for end := time.Now().Add(round); time.Now().Before(end); {
			probes++
			t0 := time.Now()
			cctx, cancel := newCtx(timeout)
			_, err := rc.JoinRoom(cctx, &v1.JoinRoomRequest{CommandId: fmt.Sprintf("x%d", probes), AppCode: appCode, RoomId: roomID, UserId: fmt.Sprintf("x%d", probes)})
			if err == nil {
				_, err = rc.SendGift(cctx, &v1.SendGiftRequest{CommandId: fmt.Sprintf("g%d", probes), AppCode: appCode, RoomId: roomID, UserId: "owner", ToUserId: "u0", GiftId: "rose", GiftCount: 1})
			}
			cancel()
			if err != nil {
				t.Fatalf("join+gift while liking=%v: %v", on, err)
			}
			took = append(took, time.Since(t0))
			time.Sleep(probeGap)
		}
		slices.Sort(took)
		return took[len(took)*99/100]
	}
	var quiet, busy []time.Duration
	likingStart := time.Duration(0)
	for range rounds {
		quiet = append(quiet, p99(false))
		t0 := time.Now()
		busy = append(busy, p99(true))
		likingStart += time.Since(t0)
	}
	liking.Store(false)
	close(stop)
	wg.Wait()
	if t.Failed() {
		return
	}

	got, err := rc.GetRoom(ctxT(t), &v1.GetRoomRequest{AppCode: appCode, RoomId: likedRoom})
	if err != nil {
		t.Fatal(err)
	}
	if got.Room.Likes != acked.Load() || acked.Load() != calls.Load()*perCall {
		t.Fatalf("room's likes %d, acknowledged %d, sent %d", got.Room.Likes, acked.Load(), calls.Load()*perCall)
	}
	perSecond := map[int64]int{}
	maxPerSecond := 0
	for _, m := range app.fakeIM.GroupMessages(roomim.GroupID(appCode, likedRoom)) {
		s := m.At.Unix()
		perSecond[s]++
		maxPerSecond = max(maxPerSecond, perSecond[s])
	}
	median := func(d []time.Duration) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[len(s)/2]
	}
	q, b := median(quiet), median(busy)
	rate := float64(acked.Load()) / likingStart.Seconds()
	t.Logf("likes acknowledged %d (%.0f/s while liking), IM messages to the group at most %d in a second; join+gift p99 quiet %v liking %v (medians of %d rounds: quiet %v, liking %v)",
		acked.Load(), rate, maxPerSecond, q, b, rounds, quiet, busy)
	if maxPerSecond > 40 {
		t.Errorf("the group got %d IM messages in one second, want at most 40", maxPerSecond)
	}
	if rate < wantRate {
		t.Errorf("%.0f likes acknowledged a second while liking, want about 10,000", rate)
	}
	if bound := q*12/10 + 2*time.Millisecond; b > bound && long && likedRoom == roomID {
		t.Errorf("join+gift p99 while liking %v, quiet %v: want at most %v", b, q, bound)
	}
}
