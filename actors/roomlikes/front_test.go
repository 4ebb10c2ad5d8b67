package roomlikes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hyapp/roomcell/actors/roomgrain"
	"github.com/hyapp/roomcell/actors/roomgrain/roomcheck"
	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/room"
)

// mailboxLikes is an observer listed before the likes one: it counts the
// LikeRoom commands that reach the grain (its mailbox) and takes none.
type mailboxLikes struct{ n atomic.Int64 }

func (m *mailboxLikes) Receive(ctx actor.Context) bool {
	if rc, ok := ctx.Message().(*v1.RoomCommand); ok && rc.GetLikeRoom() != nil {
		m.n.Add(1)
	}
	return false
}
func (*mailboxLikes) Loaded()                              {}
func (*mailboxLikes) Check(room.Command) error             { return nil }
func (*mailboxLikes) Passed(room.Command)                  {}
func (*mailboxLikes) Applying([]room.Event)                {}
func (*mailboxLikes) Committed(room.Command, []room.Event) {}
func (*mailboxLikes) Tick()                                {}
func (*mailboxLikes) Passivating()                         {}
func (*mailboxLikes) Stopped()                             {}

// likeOnce sends one like to where the node's client sends it and
// returns the grain's answer.
func likeOnce(f *fixture, pid *actor.PID, id, user string, count int64, timeout time.Duration) (*v1.CommandReply, error) {
	res, err := f.sys.Root.RequestFuture(f.likesTo(pid), rcLike(id, user, count), timeout).Result()
	if err != nil {
		return nil, err
	}
	return replyOf(res)
}

// membersRoom is room app/r1 of the owner and members u0..u<n-1>, its
// grain's mailbox likes counted.
func membersRoom(t *testing.T, n int, window time.Duration) (*fixture, *actor.PID, *mailboxLikes) {
	f := newFixture(t)
	f.deps.Config.LikeWindow = window
	mb := &mailboxLikes{}
	f.deps.Observers = []roomgrain.NewObserver{func(roomgrain.Activation) roomgrain.Observer { return mb }}
	pid := f.activate("app/r1")
	f.mustDo(pid, rcCreate("c0", "owner"))
	for i := range n {
		f.mustDo(pid, rcJoin(fmt.Sprintf("j%d", i), fmt.Sprintf("u%d", i)))
	}
	return f, pid, mb
}

// Once a room is liked, this node's likes of it are decided before its
// mailbox: 40 members' 1,200 likes at once, with joins and gifts in
// between, reach the grain as none of its messages (the first like
// opened the front), and the total is every like acknowledged.
func TestLikesBypassTheRoomsMailbox(t *testing.T) {
	f, pid, mb := membersRoom(t, 40, 50*time.Millisecond)
	if _, err := likeOnce(f, pid, "first", "u0", 1, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := mb.n.Load(); got != 1 {
		t.Fatalf("the first like reached the grain %d times, want once", got)
	}
	if roomgrain.Front(f.sys, pid) == pid {
		t.Fatal("the liked room opened no front")
	}
	var acked atomic.Int64
	var wg sync.WaitGroup
	for m := range 40 {
		for k := range 30 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := likeOnce(f, pid, fmt.Sprintf("l-%d-%d", m, k), fmt.Sprintf("u%d", m), 2, 5*time.Second)
				if err != nil {
					t.Errorf("like of u%d: %v", m, err)
					return
				}
				if r.Duplicate {
					t.Errorf("like l-%d-%d answered as a duplicate", m, k)
				}
				acked.Add(2)
			}()
		}
	}
	for i := range 10 {
		f.mustDo(pid, rcJoin(fmt.Sprintf("x%d", i), fmt.Sprintf("x%d", i)))
		f.mustDo(pid, rcGift(fmt.Sprintf("g%d", i), "owner", "u0"))
	}
	wg.Wait()
	if got := mb.n.Load(); got != 1 {
		t.Fatalf("%d likes reached the grain's mailbox, want only the first", got)
	}
	if got, want := roomLikes(t, f, pid), acked.Load()+1; got != want {
		t.Fatalf("room's likes %d, acknowledged %d", got, want)
	}
}

// Members leave and are banned while hundreds of their likes wait in
// open windows: no like of a user who was not a member (or was banned)
// when its window's row was written is in that row, every like
// acknowledged is in the total and nothing else is, and likes of the
// users who left are refused (not lost: refused).
func TestFrontLikersLeavingAndBannedMidWindow(t *testing.T) {
	const members = 60
	f, pid, _ := membersRoom(t, members, 80*time.Millisecond)
	if _, err := likeOnce(f, pid, "first", "u59", 1, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	var acked, refused atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for m := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user := fmt.Sprintf("u%d", m)
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				case <-time.After(5 * time.Millisecond):
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					r, err := likeOnce(f, pid, fmt.Sprintf("m-%d-%d", m, n), user, 1, 5*time.Second)
					switch {
					case err == nil && !r.Duplicate:
						acked.Add(1)
					case err == nil:
						t.Errorf("like m-%d-%d answered as a duplicate", m, n)
					case m < 30 && (errors.Is(err, room.ErrNotMember) || errors.Is(err, room.ErrBanned)):
						refused.Add(1)
					default:
						t.Errorf("like of %s: %v", user, err)
					}
				}()
			}
		}()
	}
	time.Sleep(150 * time.Millisecond)
	for i := range 30 {
		u := fmt.Sprintf("u%d", i)
		if i%2 == 0 {
			f.mustDo(pid, roomcheck.Wrap(&v1.LeaveRoomRequest{CommandId: "leave-" + u, AppCode: "app", RoomId: "r1", UserId: u}))
		} else {
			f.mustDo(pid, roomcheck.Wrap(&v1.BanUserRequest{CommandId: "ban-" + u, AppCode: "app", RoomId: "r1", UserId: "owner", TargetUserId: u, BanSeconds: 3600}))
		}
		time.Sleep(7 * time.Millisecond)
	}
	time.Sleep(150 * time.Millisecond)
	close(stop)
	wg.Wait()
	if refused.Load() == 0 {
		t.Fatal("no like of a user who left was refused: the race did not happen")
	}
	if got, want := roomLikes(t, f, pid), acked.Load()+1; got != want {
		t.Fatalf("room's likes %d, acknowledged %d", got, want)
	}
	// Every like row, replayed: its likers were members, not banned,
	// in the room it was written to.
	recs, err := f.store.LoadCommands(context.Background(), persistence.RoomKey{AppCode: "app", RoomID: "r1"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	s := room.NewState("app", "r1")
	rows := 0
	for _, r := range recs {
		evs, err := persistence.DecodeEvents(r.Events)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if rr, ok := e.(room.RoomLikeReceipts); ok {
				rows++
				for u := range rr.Users {
					if !s.IsMember(u) || s.BannedAt(u, r.CreatedAtMs) {
						t.Fatalf("row %d counts likes of %s, who was not a member (or banned) then", r.Seq, u)
					}
				}
			}
		}
		s.ApplyInPlace(r.Seq, evs)
	}
	t.Logf("%d likes acknowledged in %d rows, %d refused", acked.Load(), rows, refused.Load())
}

// One command_id sent many times at once, half through the front and
// half to the grain: counted once, every answer a success, one of them
// the counting one. And a like racing another command under one id:
// exactly one of the two is done, the other refused as a reused id.
func TestFrontDuplicateIDsAcrossTheHandOver(t *testing.T) {
	f, pid, _ := membersRoom(t, 2, 40*time.Millisecond)
	if _, err := likeOnce(f, pid, "first", "u0", 1, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	const ids, copies = 30, 10
	var counting [ids]atomic.Int32
	var wg sync.WaitGroup
	for i := range ids {
		for c := range copies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				to := f.likesTo(pid)
				if c%2 == 1 {
					to = pid // as a like forwarded from another node arrives
				}
				res, err := f.sys.Root.RequestFuture(to, rcLike(fmt.Sprintf("d%d", i), "u1", 3), 5*time.Second).Result()
				var r *v1.CommandReply
				if err == nil {
					r, err = replyOf(res)
				}
				if err != nil {
					t.Errorf("copy %d of d%d: %v", c, i, err)
					return
				}
				if !r.Duplicate {
					counting[i].Add(1)
				}
			}()
		}
	}
	wg.Wait()
	for i := range ids {
		if n := counting[i].Load(); n != 1 {
			t.Errorf("d%d: %d answers counted it, want 1", i, n)
		}
	}
	if got := roomLikes(t, f, pid); got != 1+ids*3 {
		t.Fatalf("room's likes %d, want %d (each id once)", got, 1+ids*3)
	}

	const races = 100
	before := roomLikes(t, f, pid)
	var likesDone int64
	for i := range races {
		id := fmt.Sprintf("r%d", i)
		var likeErr, joinErr error
		var both sync.WaitGroup
		both.Add(2)
		go func() {
			defer both.Done()
			_, likeErr = likeOnce(f, pid, id, "u0", 1, 5*time.Second)
		}()
		go func() {
			defer both.Done()
			_, joinErr = f.do(pid, rcJoin(id, fmt.Sprintf("n%d", i)))
		}()
		both.Wait()
		switch {
		case likeErr == nil && joinErr == nil:
			t.Fatalf("id %s: both the like and the join were done", id)
		case likeErr == nil && errors.Is(joinErr, errclass.Exists):
			likesDone++
		case joinErr == nil && errors.Is(likeErr, errclass.Exists):
		default:
			t.Fatalf("id %s: like %v, join %v", id, likeErr, joinErr)
		}
	}
	if got := roomLikes(t, f, pid); got != before+likesDone {
		t.Fatalf("room's likes %d, want %d (%d races the like won)", got, before+likesDone, likesDone)
	}
	// A like under the id of a command committed before it (and not the
	// one the room decided last) is refused too.
	f.mustDo(pid, rcJoin("k1", "late1"))
	f.mustDo(pid, rcJoin("k2", "late2"))
	if _, err := likeOnce(f, pid, "k1", "u0", 1, 5*time.Second); !errors.Is(err, errclass.Exists) {
		t.Fatalf("a like under a recent join's id: %v, want %v", err, errclass.Exists)
	}
}

// flipLease is a lease the test moves: held or not, and its epoch.
type flipLease struct {
	mu    sync.Mutex
	epoch int64
	held  bool
}

func (l *flipLease) Hold(string) (int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.epoch, l.held
}

func (l *flipLease) set(epoch int64, held bool) {
	l.mu.Lock()
	l.epoch, l.held = epoch, held
	l.mu.Unlock()
}

// Likes through the front while the room's lease changes under them:
// the node retakes it under a newer epoch three times (the room loads
// again), then loses it (the activation stops) and a new activation
// takes over. Clients retry every like until it is acknowledged. Each
// like is then in the total exactly once: none acknowledged and lost,
// none counted twice (a window decided before a load never commits
// after it).
func TestFrontLikesRacingLeaseChanges(t *testing.T) {
	f := newFixture(t)
	lease := &flipLease{epoch: 1, held: true}
	f.deps.Lease = lease
	f.deps.Config.LikeWindow = 30 * time.Millisecond
	var cur atomic.Pointer[actor.PID]
	pid := f.activate("app/r1")
	cur.Store(pid)
	f.mustDo(pid, rcCreate("c0", "owner"))
	const likers = 20
	for i := range likers {
		f.mustDo(pid, rcJoin(fmt.Sprintf("j%d", i), fmt.Sprintf("u%d", i)))
	}
	var sent, acked atomic.Int64
	var refusedMoved atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range likers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				id, count := fmt.Sprintf("e-%d-%d", i, n), int64(1+n%4)
				sent.Add(count)
				for try := 0; ; try++ {
					if try > 200 {
						t.Errorf("like %s never acknowledged", id)
						return
					}
					r, err := likeOnce(f, cur.Load(), id, fmt.Sprintf("u%d", i), count, 300*time.Millisecond)
					if err == nil {
						if !r.Duplicate {
							acked.Add(count)
						}
						break
					}
					if errors.Is(err, errclass.Unavailable) {
						refusedMoved.Add(1)
					} else if !errors.Is(err, actor.ErrTimeout) && !errors.Is(err, actor.ErrDeadLetter) {
						t.Errorf("like %s: %v", id, err)
						return
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
		}()
	}
	epoch := int64(1)
	for range 3 {
		time.Sleep(60 * time.Millisecond)
		epoch++
		lease.set(epoch, true) // lost and retaken: the room loads again
	}
	time.Sleep(60 * time.Millisecond)
	lease.set(epoch, false) // lost: the activation stops on its next message
	if err := f.sys.Root.PoisonFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	epoch++
	lease.set(epoch, true)
	cur.Store(f.activate("app/r1"))
	time.Sleep(150 * time.Millisecond)
	close(stop)
	wg.Wait()
	if t.Failed() {
		return
	}
	got := roomLikes(t, f, cur.Load())
	if got != sent.Load() {
		t.Fatalf("room's likes %d, %d sent (each acknowledged once: %d by a counting answer)", got, sent.Load(), acked.Load())
	}
	if refusedMoved.Load() == 0 {
		t.Fatal("no like was refused while the lease changed: the race did not happen")
	}
	t.Logf("%d likes, %d refusals retried", got, refusedMoved.Load())
}

// The snapshot takes the receipts as the likes goroutine encoded them
// (packed), off the room's goroutine: the room restored from it plus the
// log after it equals the room replayed from the whole log, and a like
// retried after the restore is answered as a duplicate, counted once.
func TestSnapshotTakesEncodedReceipts(t *testing.T) {
	f, pid := aliceAndBob(t, 20*time.Millisecond, func(f *fixture) { f.deps.Config.SnapshotEvery = 2 })
	for i := range 6 {
		if _, err := f.do(pid, rcLike(fmt.Sprintf("s-%d", i), []string{"alice", "bob"}[i%2], int64(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(50 * time.Millisecond) // the newest receipts encoded
	f.mustDo(pid, rcJoin("j3", "carol"))
	f.mustDo(pid, rcJoin("j4", "dave"))
	key := persistence.RoomKey{AppCode: "app", RoomID: "r1"}
	snap, err := f.store.LoadSnapshot(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(snap.State, []byte(`"like_receipts":{"alice":{"last_ms":`)) || !bytes.Contains(snap.State, []byte(`"packed":"`)) {
		t.Fatalf("the snapshot at seq %d holds no encoded receipts: %s", snap.Seq, snap.State)
	}
	restored, err := room.UnmarshalState(snap.State)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := f.store.LoadCommands(context.Background(), key, 0)
	if err != nil {
		t.Fatal(err)
	}
	replayed := room.NewState("app", "r1")
	for _, r := range recs {
		evs, err := persistence.DecodeEvents(r.Events)
		if err == nil {
			err = room.Unseal(evs, r.Sealed)
		}
		if err != nil {
			t.Fatal(err)
		}
		if r.Seq > snap.Seq {
			restored.ApplyInPlace(r.Seq, evs)
		}
		replayed.ApplyInPlace(r.Seq, evs)
	}
	if !reflect.DeepEqual(restored, replayed) {
		t.Fatalf("snapshot + log after it:\n%+v\nthe whole log:\n%+v", restored, replayed)
	}
	if err := f.sys.Root.PoisonFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	total := replayed.Likes()
	pid2 := f.activate("app/r1")
	for i := range 6 {
		r, err := f.do(pid2, rcLike(fmt.Sprintf("s-%d", i), []string{"alice", "bob"}[i%2], int64(i+1)))
		if err != nil {
			t.Fatal(err)
		}
		if !r.Duplicate {
			t.Fatalf("like s-%d retried after the restore was counted again", i)
		}
	}
	if got := roomLikes(t, f, pid2); got != total {
		t.Fatalf("room's likes %d after the retries, %d before", got, total)
	}
}

// A like waits in a window of a node that lost the room; its client,
// cut short, retries it on the room's new owner, which counts it. The
// room comes back to the first node under a newer epoch, which loads the
// room for a join before that window ends. The window's likes were
// decided against receipts the load replaced: it is answered
// unavailable, never committed, so the like is counted once.
func TestWindowDecidedBeforeALoadNeverCommits(t *testing.T) {
	fa := newFixture(t)
	leaseA := &flipLease{epoch: 1, held: true}
	fa.deps.Lease = leaseA
	fa.deps.Config.LikeWindow = 400 * time.Millisecond
	a := fa.activate("app/r1")
	fa.mustDo(a, rcCreate("c0", "owner"))
	fa.mustDo(a, rcJoin("j1", "alice"))
	if _, err := likeOnce(fa, a, "first", "alice", 1, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	first := fa.sys.Root.RequestFuture(fa.likesTo(a), rcLike("L", "alice", 5), 5*time.Second)
	time.Sleep(20 * time.Millisecond) // in a's open window

	leaseA.set(1, false)
	fb := newFixture(t)
	fb.store, fb.deps.Store = fa.store, fa.store
	fb.deps.Lease = &flipLease{epoch: 2, held: true}
	fb.deps.Config.LikeWindow = 10 * time.Millisecond
	b := fb.activate("app/r1")
	if r, err := likeOnce(fb, b, "L", "alice", 5, 5*time.Second); err != nil || r.Duplicate {
		t.Fatalf("the retry on the new owner: %v, %+v", err, r)
	}
	if err := fb.sys.Root.PoisonFuture(b).Wait(); err != nil {
		t.Fatal(err)
	}

	leaseA.set(3, true)
	fa.mustDo(a, rcJoin("j2", "bob")) // a loads the room again
	res, err := first.Result()
	if err == nil {
		var r *v1.CommandReply
		if r, err = replyOf(res); err == nil && !r.Duplicate {
			t.Fatal("the window decided before the load was committed after it")
		}
	}
	if err != nil && !errors.Is(err, errclass.Unavailable) {
		t.Fatalf("the first attempt: %v", err)
	}
	if got := roomLikes(t, fa, a); got != 6 {
		t.Fatalf("room's likes %d, want 6 (the like counted once)", got)
	}
}
