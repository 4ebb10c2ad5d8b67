package roomlikes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/room"
)

func rcLike(cmdID, user string, count int64) *v1.RoomCommand {
	return &v1.RoomCommand{Command: &v1.RoomCommand_LikeRoom{LikeRoom: &v1.LikeRoomRequest{
		CommandId: cmdID, AppCode: "app", RoomId: "r1", UserId: user, Count: count}}}
}

// imClock is a Publisher that keeps when each RoomLiked reached it (the
// room's IM side: one group message per event sent).
type imClock struct {
	mu    sync.Mutex
	liked []time.Time
	total int
}

func (p *imClock) PublishRoomEvent(_ context.Context, env persistence.Envelope) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total++
	if env.EventType == room.TypeRoomLiked {
		p.liked = append(p.liked, time.Now())
	}
	return nil
}

// maxPerSecond is the most sends in any one-second span.
func (p *imClock) maxPerSecond() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	most := 0
	for i, t := range p.liked {
		j := i
		for j < len(p.liked) && p.liked[j].Sub(t) < time.Second {
			j++
		}
		most = max(most, j-i)
	}
	return most
}

// likeRows counts the room's log rows that hold likes, and checks that
// each holds one RoomLiked.
func likeRows(t testing.TB, store Store, roomID string) int {
	t.Helper()
	recs, err := store.LoadCommands(context.Background(), persistence.RoomKey{AppCode: "app", RoomID: roomID}, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range recs {
		if r.CommandType != room.CmdLikeRoom {
			continue
		}
		n++
		if len(r.Events) != 2 || r.Events[0].EventType != room.TypeRoomLiked || r.Events[1].EventType != room.TypeRoomLikeReceipts {
			t.Fatalf("like row %d holds %+v", r.Seq, r.Events)
		}
	}
	return n
}

func roomLikes(t *testing.T, f *fixture, pid *actor.PID) int64 {
	t.Helper()
	return f.mustDo(pid, rcGet()).GetRoom().GetLikes()
}

// Many likers at once into one room: every acknowledged like is in the
// total and nothing else is, the likes take one log row and one IM
// message per window, and the room's other commands are served while
// windows are open.
func TestLikesCoalesceUnderConcurrentLikers(t *testing.T) {
	f := newFixture(t)
	const window = 100 * time.Millisecond
	f.deps.Config.LikeWindow = window
	im := &imClock{}
	f.deps.Publisher = im
	pid := f.activate("app/r1")
	f.mustDo(pid, rcCreate("c0", "owner"))
	const likers = 40
	for i := range likers {
		f.mustDo(pid, rcJoin(fmt.Sprintf("j%d", i), fmt.Sprintf("u%d", i)))
	}
	rowsBefore := likeRows(t, f.store, "r1")
	var acked, sent atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	const duration = 1500 * time.Millisecond
	for i := range likers {
		for k := range 5 { // five callers per user
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; time.Since(start) < duration; n++ {
					count := int64(1 + (n+i)%7)
					sent.Add(count)
					res, err := f.sys.Root.RequestFuture(f.likesTo(pid), rcLike(fmt.Sprintf("l-%d-%d-%d", i, k, n), fmt.Sprintf("u%d", i), count), 5*time.Second).Result()
					if err != nil {
						t.Errorf("like not answered: %v", err)
						return
					}
					r, err := replyOf(res)
					if err != nil {
						t.Errorf("like refused: %v", err)
						return
					}
					if r.Duplicate || len(r.Events) != 1 || r.Events[0].EventType != room.TypeRoomLiked {
						t.Errorf("like answered %+v", r)
						return
					}
					acked.Add(count)
				}
			}()
		}
	}
	// Joins and gifts go on while the windows are open, answered before
	// the window they overlap ends.
	var took []time.Duration
	for i := 0; time.Since(start) < duration; i++ {
		t0 := time.Now()
		f.mustDo(pid, rcJoin(fmt.Sprintf("x%d", i), fmt.Sprintf("x%d", i)))
		f.mustDo(pid, rcGift(fmt.Sprintf("g%d", i), "owner", "u0"))
		took = append(took, time.Since(t0))
		time.Sleep(10 * time.Millisecond)
	}
	wg.Wait()
	elapsed := time.Since(start)
	// They queue behind the likes in the mailbox (200 callers), not
	// behind a window: most are answered well inside one.
	slices.Sort(took)
	median := took[len(took)/2]
	if median >= window/2 {
		t.Errorf("a join and a gift took %s (median of %d) while likes were open: they waited for windows", median, len(took))
	}
	if got, want := roomLikes(t, f, pid), acked.Load(); got != want || want == 0 || want != sent.Load() {
		t.Fatalf("room's likes %d, acknowledged %d, sent %d", got, want, sent.Load())
	}
	rows := likeRows(t, f.store, "r1") - rowsBefore
	if limit := int(elapsed/window) + 1; rows > limit || rows == 0 {
		t.Fatalf("%d like rows in %s, want at most %d (one per %s window)", rows, elapsed, limit, window)
	}
	// The IM side: one message per window; a liked room stays far under
	// Tencent's 40 a second per group.
	deadline := time.Now().Add(2 * time.Second)
	for {
		im.mu.Lock()
		n := len(im.liked)
		im.mu.Unlock()
		if n == rows || time.Now().After(deadline) {
			if n != rows {
				t.Fatalf("%d RoomLiked messages sent for %d rows", n, rows)
			}
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if most, limit := im.maxPerSecond(), int(time.Second/window)+1; most > limit || most > 40 {
		t.Fatalf("%d like messages in one second, want at most %d", most, limit)
	}
	t.Logf("%d likes from %d callers in %s: %d rows, at most %d IM messages a second; a join+gift took %s (median), %s (max)",
		acked.Load(), likers*5, elapsed.Round(time.Millisecond), rows, im.maxPerSecond(), median, took[len(took)-1])
}

// A like sent twice, at once and later, and again after a new activation
// rebuilt the room from the store, is counted once and answered as a
// duplicate; its id with another count, or from another user, or for
// another command, is refused.
func TestLikeRetriesCountedOnce(t *testing.T) {
	f, pid := aliceAndBob(t, 100*time.Millisecond, func(f *fixture) { f.deps.Config.SnapshotEvery = 0 })
	var wg sync.WaitGroup
	replies := make([]*v1.CommandReply, 8)
	for i := range replies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := f.sys.Root.RequestFuture(f.likesTo(pid), rcLike("dup-1", "alice", 5), 5*time.Second).Result()
			if err == nil {
				replies[i], err = replyOf(res)
			}
			if err != nil {
				t.Errorf("like %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	fresh := slices.IndexFunc(replies, func(r *v1.CommandReply) bool { return !r.Duplicate })
	for i, r := range replies {
		if r.RoomSeq != replies[0].RoomSeq || (i != fresh) != r.Duplicate {
			t.Fatalf("reply %d: %+v (the first not a duplicate: %d)", i, r, fresh)
		}
	}
	check := func(pid *actor.PID, phase string) {
		t.Helper()
		if r := f.mustDo(pid, rcLike("dup-1", "alice", 5)); !r.Duplicate {
			t.Fatalf("%s: a retry was counted: %+v", phase, r)
		}
		for name, rc := range map[string]*v1.RoomCommand{
			"another count":   rcLike("dup-1", "alice", 6),
			"another user":    rcLike("dup-1", "bob", 5),
			"another command": rcJoin("dup-1", "carol"),
		} {
			if _, err := f.do(pid, rc); !errors.Is(err, errclass.Exists) {
				t.Fatalf("%s: the like's id reused for %s: %v, want AlreadyExists", phase, name, err)
			}
		}
		if got := roomLikes(t, f, pid); got != 5 {
			t.Fatalf("%s: room's likes %d, want 5", phase, got)
		}
		if n := likeRows(t, f.store, "r1"); n != 1 {
			t.Fatalf("%s: %d like rows, want 1", phase, n)
		}
	}
	check(pid, "live")
	// An id a recent command used is not a like's (older ones are not
	// looked up for likes: a store read per like).
	if _, err := f.do(pid, rcLike("j1", "alice", 1)); !errors.Is(err, errclass.Exists) {
		t.Fatalf("a like under a join's command_id: %v, want AlreadyExists", err)
	}
	if err := f.sys.Root.PoisonFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	check(f.activate("app/r1"), "after restart")
}

// Likes the rules refuse are refused at once, and write nothing: from
// outside the room, banned, a closed room, counts out of range. A member
// who leaves while their like waits in the window is refused at its end.
func TestLikesRefusedWriteNothing(t *testing.T) {
	f, pid := aliceAndBob(t, 300*time.Millisecond, nil)
	f.mustDo(pid, &v1.RoomCommand{Command: &v1.RoomCommand_BanUser{BanUser: &v1.BanUserRequest{
		CommandId: "b1", AppCode: "app", RoomId: "r1", UserId: "owner", TargetUserId: "bob", BanSeconds: 600}}})
	seq := f.mustDo(pid, rcGet()).RoomSeq
	for name, c := range map[string]struct {
		rc   *v1.RoomCommand
		want error
	}{
		"outsider":  {rcLike("o1", "mallory", 1), room.ErrNotMember},
		"banned":    {rcLike("o2", "bob", 1), room.ErrBanned},
		"zero":      {rcLike("o3", "alice", 0), errclass.Invalid},
		"too many":  {rcLike("o4", "alice", room.MaxLikeCount+1), errclass.Invalid},
		"reserved":  {rcLike(room.LikesIDPrefix+"1-00", "alice", 1), nil},
		"elsewhere": {&v1.RoomCommand{Command: &v1.RoomCommand_LikeRoom{LikeRoom: &v1.LikeRoomRequest{CommandId: "o5", AppCode: "app", RoomId: "r2", UserId: "alice", Count: 1}}}, errclass.Invalid},
	} {
		if c.want == nil {
			// The reserved prefix is refused at the door (CheckClientCommand).
			if err := room.CheckClientCommand(c.rc); !errors.Is(err, errclass.Invalid) {
				t.Fatalf("%s: %v at the door", name, err)
			}
			continue
		}
		start := time.Now()
		if _, err := f.do(pid, c.rc); !errors.Is(err, c.want) {
			t.Fatalf("%s: %v, want %v", name, err, c.want)
		} else if time.Since(start) >= 300*time.Millisecond {
			t.Fatalf("%s: refused after %s: it waited for a window", name, time.Since(start))
		}
	}
	// alice's like waits in the window; she leaves before it ends.
	res := f.sys.Root.RequestFuture(f.likesTo(pid), rcLike("w1", "alice", 3), 5*time.Second)
	f.mustDo(pid, &v1.RoomCommand{Command: &v1.RoomCommand_LeaveRoom{LeaveRoom: &v1.LeaveRoomRequest{
		CommandId: "l1", AppCode: "app", RoomId: "r1", UserId: "alice", Reason: "left"}}})
	got, err := res.Result()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := replyOf(got); !errors.Is(err, room.ErrNotMember) {
		t.Fatalf("a like whose sender left before its window ended: %v, want not a member", err)
	}
	r := f.mustDo(pid, rcGet())
	if r.RoomSeq != seq+1 || r.GetRoom().GetLikes() != 0 || likeRows(t, f.store, "r1") != 0 {
		t.Fatalf("refused likes wrote: seq %d (want %d, the leave), likes %d", r.RoomSeq, seq+1, r.GetRoom().GetLikes())
	}
}

// killableStore is a Store whose process dies at its next append: that
// append commits but its answer never arrives (the worst case: durable,
// and nobody told), and every append after it fails.
type killableStore struct {
	Store
	dying, dead atomic.Bool
}

func (s *killableStore) Append(ctx context.Context, a persistence.Append) error {
	if s.dead.Load() {
		return errors.New("process killed")
	}
	err := s.Store.Append(ctx, a)
	if s.dying.Load() {
		s.dead.Store(true)
		return errors.New("process killed after the commit")
	}
	return err
}

// A crash in the middle of a like storm: the activation dies without
// writing its open window (no Stopping, no flush), a new one rebuilds the
// room from the store, and the clients retry every like they got no
// answer for. Every like is then counted exactly once: the acknowledged
// ones before the crash are in the total, none of them twice, and the
// retried ones once whether their window was stored or not.
func TestLikesExactAfterCrash(t *testing.T) {
	f1 := newFixture(t)
	store := &killableStore{Store: f1.store}
	f1.deps.Store = store
	f1.deps.Config.LikeWindow = 50 * time.Millisecond
	pid := f1.activate("app/r1")
	f1.mustDo(pid, rcCreate("c0", "owner"))
	const likers = 20
	for i := range likers {
		f1.mustDo(pid, rcJoin(fmt.Sprintf("j%d", i), fmt.Sprintf("u%d", i)))
	}
	type like struct {
		id    string
		user  string
		count int64
	}
	var mu sync.Mutex
	var ackedBefore int64
	var unanswered []like
	var all int64
	var wg sync.WaitGroup
	killAt := time.Now().Add(400 * time.Millisecond)
	for i := range likers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; time.Now().Before(killAt.Add(100 * time.Millisecond)); n++ {
				l := like{fmt.Sprintf("k-%d-%d", i, n), fmt.Sprintf("u%d", i), int64(1 + n%3)}
				mu.Lock()
				all += l.count
				mu.Unlock()
				res, err := f1.sys.Root.RequestFuture(f1.likesTo(pid), rcLike(l.id, l.user, l.count), 300*time.Millisecond).Result()
				var r *v1.CommandReply
				if err == nil {
					r, err = replyOf(res)
				}
				mu.Lock()
				if err == nil && !r.Duplicate && !store.dead.Load() {
					ackedBefore += l.count
				} else if err != nil {
					unanswered = append(unanswered, l)
				}
				mu.Unlock()
			}
		}()
	}
	time.Sleep(time.Until(killAt))
	store.dying.Store(true) // the next window lands, unanswered; then nothing does
	wg.Wait()
	if !store.dead.Load() {
		t.Fatal("no window was written after the kill")
	}
	// The old activation is left as it is: a dead process writes nothing
	// (its store refuses), and it gets no more messages.

	f2 := newFixture(t)
	f2.store = f1.store
	f2.deps.Store = f1.store
	f2.deps.Config.LikeWindow = 50 * time.Millisecond
	pid2 := f2.activate("app/r1")
	after := roomLikes(t, f2, pid2)
	if after <= ackedBefore {
		t.Fatalf("after the crash the room has %d likes, %d were acknowledged before it and one window more was stored unanswered", after, ackedBefore)
	}
	// The clients retry what was not answered, all at once.
	var retried sync.WaitGroup
	for _, l := range unanswered {
		retried.Add(1)
		go func() {
			defer retried.Done()
			if _, err := f2.do(pid2, rcLike(l.id, l.user, l.count)); err != nil {
				t.Errorf("retry of %s: %v", l.id, err)
			}
		}()
	}
	retried.Wait()
	if got := roomLikes(t, f2, pid2); got != all {
		t.Fatalf("after the retries the room has %d likes, %d were sent (each once), %d acknowledged before the crash", got, all, ackedBefore)
	}
	t.Logf("%d likes sent, %d acknowledged before the crash, %d in the room after it, %d retried", all, ackedBefore, after, len(unanswered))
}

// The ids of likes counted in every earlier window stay named, whether
// the room's index of its receipts has been built since (on a goroutine
// of its own) or the window is looked up by its own likes: right after
// each window, another user's like or another command under any earlier
// like's id is refused, a retry is a duplicate, and nothing counts twice.
func TestLikeIDsNamedAcrossWindows(t *testing.T) {
	f, pid := aliceAndBob(t, 100*time.Millisecond, nil)
	const windows = 12
	for i := range windows {
		if r := f.mustDo(pid, rcLike(fmt.Sprintf("w-%d", i), "alice", 1)); r.Duplicate {
			t.Fatalf("window %d: a new like answered as a duplicate", i)
		}
		for j := range i + 1 {
			id := fmt.Sprintf("w-%d", j)
			if _, err := f.do(pid, rcLike(id, "bob", 1)); !errors.Is(err, errclass.Exists) {
				t.Fatalf("after window %d: bob's like under %s: %v, want AlreadyExists", i, id, err)
			}
			if _, err := f.do(pid, rcJoin(id, "carol")); !errors.Is(err, errclass.Exists) {
				t.Fatalf("after window %d: a join under %s: %v, want AlreadyExists", i, id, err)
			}
			if r := f.mustDo(pid, rcLike(id, "alice", 1)); !r.Duplicate {
				t.Fatalf("after window %d: the retry of %s was counted", i, id)
			}
		}
		if i%3 == 2 {
			time.Sleep(20 * time.Millisecond) // the index's build catches up
		}
	}
	if got := roomLikes(t, f, pid); got != windows {
		t.Fatalf("room's likes %d, want %d", got, windows)
	}
}

// aliceAndBob is a room on memdb whose members are its owner, alice and
// bob, with the like window given (and the deps set by set, if any,
// before it starts).
func aliceAndBob(t *testing.T, window time.Duration, set func(f *fixture)) (*fixture, *actor.PID) {
	f := newFixture(t)
	f.deps.Config.LikeWindow = window
	if set != nil {
		set(f)
	}
	pid := f.activate("app/r1")
	f.mustDo(pid, rcCreate("c0", "owner"))
	f.mustDo(pid, rcJoin("j1", "alice"))
	f.mustDo(pid, rcJoin("j2", "bob"))
	return f, pid
}

// Retries of one like sent without pause from before its window ends
// until after it is stored: whether a retry finds the like in the open
// window, in the window being stored (the next one gathering meanwhile)
// or among the room's receipts, exactly one answer counts it and every
// other is a duplicate, and the total counts it once. Other users' likes
// keep the next windows busy throughout.
func TestLikeRetriedAcrossItsWindowsEnd(t *testing.T) {
	f, pid := aliceAndBob(t, 30*time.Millisecond, nil)
	const rounds = 5
	var wg sync.WaitGroup
	var bobs atomic.Int64
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := f.do(pid, rcLike(fmt.Sprintf("bob-%d", n), "bob", 1)); err != nil {
				t.Errorf("bob's like: %v", err)
				return
			}
			bobs.Add(1)
		}
	}()
	for r := range rounds {
		id := fmt.Sprintf("alice-%d", r)
		var fresh, dups atomic.Int64
		var retries sync.WaitGroup
		until := time.Now().Add(100 * time.Millisecond) // > 3 windows
		for range 4 {
			retries.Add(1)
			go func() {
				defer retries.Done()
				for time.Now().Before(until) {
					reply, err := f.do(pid, rcLike(id, "alice", 2))
					if err != nil {
						t.Errorf("%s: %v", id, err)
						return
					}
					if reply.Duplicate {
						dups.Add(1)
					} else {
						fresh.Add(1)
					}
				}
			}()
		}
		retries.Wait()
		if fresh.Load() != 1 || dups.Load() == 0 {
			t.Fatalf("%s: %d answers counted it, %d were duplicates; want exactly one counted", id, fresh.Load(), dups.Load())
		}
	}
	close(stop)
	wg.Wait()
	if got, want := roomLikes(t, f, pid), 2*rounds+bobs.Load(); got != want {
		t.Fatalf("room's likes %d, want %d (alice's %d likes once each, bob's %d)", got, want, rounds, bobs.Load())
	}
}

// Likes in flight when the room stops (passivation, rebalance): every
// like is answered, and the windows not yet stored are stored while the
// room can still commit (Stopping) or answered unavailable, never lost
// or counted without an answer: what was acknowledged is the total, and
// retrying the rest on the next activation counts each once.
func TestLikesInFlightWhenTheRoomStops(t *testing.T) {
	f, pid := aliceAndBob(t, 200*time.Millisecond, nil)
	type result struct {
		id, user string
		count    int64
		err      error
	}
	var results []result
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 60 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := result{id: fmt.Sprintf("s-%d", i), user: []string{"alice", "bob"}[i%2], count: int64(1 + i%3)}
			res, err := f.sys.Root.RequestFuture(f.likesTo(pid), rcLike(l.id, l.user, l.count), 5*time.Second).Result()
			if err == nil {
				_, err = replyOf(res)
			}
			l.err = err
			mu.Lock()
			results = append(results, l)
			mu.Unlock()
		}()
		if i == 30 {
			time.Sleep(250 * time.Millisecond) // the first window is stored; the next is open
		}
	}
	time.Sleep(20 * time.Millisecond) // the last likes reach the room
	if err := f.sys.Root.PoisonFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	var acked, all int64
	var retry []result
	for _, r := range results {
		all += r.count
		switch {
		case r.err == nil:
			acked += r.count
		case errors.Is(r.err, errclass.Unavailable):
			retry = append(retry, r)
		default:
			t.Fatalf("like %s: %v", r.id, r.err)
		}
	}
	pid2 := f.activate("app/r1")
	if got := roomLikes(t, f, pid2); got != acked {
		t.Fatalf("after the stop the room has %d likes, %d were acknowledged", got, acked)
	}
	for _, r := range retry {
		if _, err := f.do(pid2, rcLike(r.id, r.user, r.count)); err != nil {
			t.Fatalf("retry of %s: %v", r.id, err)
		}
	}
	if got := roomLikes(t, f, pid2); got != all {
		t.Fatalf("after the retries the room has %d likes, %d were sent", got, all)
	}
	t.Logf("%d likes sent, %d acknowledged before the stop, %d retried", all, acked, len(retry))
}
