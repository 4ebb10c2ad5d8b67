package storetest

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hyapp/roomcell/persistence"
)

// RunRoomFence runs the epoch-fence part of the persistence.RoomStore
// contract (docs/cluster.md, "Ownership"): an append or a FenceRoom with
// an epoch below the room's fence fails with ErrConflict and writes
// nothing, whatever seq it carries; a fenced append raises the fence in
// its own transaction. newStore is as for RunRoomStore.
func RunRoomFence(t *testing.T, newStore func(t *testing.T) persistence.Store) {
	t.Helper()
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, s persistence.Store)
	}{
		{"StaleEpochAppendWritesNothing", testStaleEpochAppend},
		{"AppendRaisesFence", testAppendRaisesFence},
		{"EpochZeroIsNotFenced", testEpochZeroNotFenced},
		{"FencesArePerRoom", testFencesPerRoom},
		{"OldOwnerNeverWritesAfterTakeover", testOldOwnerAfterTakeover},
		{"StaleAppendAmongConcurrentCleanOnes", testStaleAmongClean},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t, newStore(t))
		})
	}
}

func fenced(a persistence.Append, epoch int64) persistence.Append {
	a.Epoch = epoch
	return a
}

func testStaleEpochAppend(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	first, firstSnap := command(roomA, 1, "c1", 1000, "e1"), snapshot(roomA, 1, 1000)
	mustAppend(t, s, fenced(persistence.Append{Command: first, Snapshot: firstSnap}, 5))
	mustNoErr(t, "FenceRoom(9)", s.FenceRoom(ctx, roomA, 9))

	// seq 2 is free: only the epoch fence can stop this write.
	stale := fenced(persistence.Append{Command: command(roomA, 2, "c2", 2000, "e2"), Snapshot: snapshot(roomA, 2, 2000)}, 5)
	wantIs(t, "append with epoch 5 after FenceRoom(9)", s.Append(ctx, stale), persistence.ErrConflict)
	wantUnchanged(t, s, first, firstSnap, stale)
	wantIs(t, "FenceRoom(8) after FenceRoom(9)", s.FenceRoom(ctx, roomA, 8), persistence.ErrConflict)

	// The new owner writes the same seq.
	mustAppend(t, s, fenced(persistence.Append{Command: command(roomA, 2, "c2-new", 2001, "e2-new")}, 9))
	recs, err := s.LoadCommands(ctx, roomA, 0)
	mustNoErr(t, "LoadCommands", err)
	if got := seqs(recs); len(got) != 2 || recs[1].CommandID != "c2-new" {
		t.Fatalf("log after takeover: seqs %v, last %q; want [1 2] with c2-new", got, recs[len(recs)-1].CommandID)
	}
}

func testAppendRaisesFence(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	mustAppend(t, s, fenced(persistence.Append{Command: command(roomA, 1, "c1", 1000, "e1")}, 7))
	wantIs(t, "FenceRoom(6) after an epoch-7 append", s.FenceRoom(ctx, roomA, 6), persistence.ErrConflict)
	wantIs(t, "epoch-6 append after an epoch-7 append",
		s.Append(ctx, fenced(persistence.Append{Command: command(roomA, 2, "c2", 2000, "e2")}, 6)), persistence.ErrConflict)
	// Equal epochs pass: one owner appends many times under one grant.
	mustNoErr(t, "FenceRoom(7) again", s.FenceRoom(ctx, roomA, 7))
	mustAppend(t, s, fenced(persistence.Append{Command: command(roomA, 2, "c2", 2000, "e2")}, 7))
	mustAppend(t, s, fenced(persistence.Append{Command: command(roomA, 3, "c3", 3000, "e3")}, 8))
	wantIs(t, "epoch-7 append after an epoch-8 append",
		s.Append(ctx, fenced(persistence.Append{Command: command(roomA, 4, "c4", 4000, "e4")}, 7)), persistence.ErrConflict)
	if _, err := s.FindCommand(ctx, roomA, "c4"); err == nil {
		t.Fatal("the refused epoch-7 append was written")
	}
}

// Epoch 0 is single-node mode's: it neither checks nor raises the fence.
func testEpochZeroNotFenced(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	mustNoErr(t, "FenceRoom(0)", s.FenceRoom(ctx, roomA, 0))
	mustAppend(t, s, persistence.Append{Command: command(roomA, 1, "c1", 1000, "e1")})
	mustNoErr(t, "FenceRoom(1) after an epoch-0 append", s.FenceRoom(ctx, roomA, 1))
	if err := s.FenceRoom(ctx, roomA, -1); err == nil {
		t.Fatal("FenceRoom(-1) succeeded; want an invalid-argument error")
	}
	if err := s.Append(ctx, fenced(persistence.Append{Command: command(roomA, 2, "c2", 2000, "e2")}, -3)); err == nil {
		t.Fatal("append with epoch -3 succeeded; want an invalid-argument error")
	}
}

func testFencesPerRoom(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	roomB := persistence.RoomKey{AppCode: roomA.AppCode, RoomID: "room-b"}
	otherApp := persistence.RoomKey{AppCode: "app2", RoomID: roomA.RoomID}
	mustNoErr(t, "FenceRoom(A, 50)", s.FenceRoom(ctx, roomA, 50))
	mustAppend(t, s, fenced(persistence.Append{Command: command(roomB, 1, "c1", 1000, "b1")}, 3))
	mustAppend(t, s, fenced(persistence.Append{Command: command(otherApp, 1, "c1", 1000, "o1")}, 3))
	wantIs(t, "room A epoch 3", s.Append(ctx, fenced(persistence.Append{Command: command(roomA, 1, "c1", 1000, "a1")}, 3)), persistence.ErrConflict)
}

// An old owner keeps appending under epoch 1 while a new owner takes the
// room over: FenceRoom(2), load, append. Every old append that started
// after the new owner's FenceRoom returned must fail, the new owner's
// appends must never meet a seq conflict (nobody wrote behind its load),
// and the log must be 1..n without a gap.
func testOldOwnerAfterTakeover(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	var (
		fencedAt  atomic.Bool
		late      atomic.Int64 // old appends started after the fence that succeeded
		oldSeq    = int64(0)
		stop      = make(chan struct{})
		wg        sync.WaitGroup
		oldWrites atomic.Int64
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			after := fencedAt.Load()
			oldSeq++
			err := s.Append(ctx, fenced(persistence.Append{Command: command(roomA, oldSeq, fmt.Sprintf("old-%d", oldSeq), 1000, fmt.Sprintf("old-e%d", oldSeq))}, 1))
			if err != nil {
				oldSeq-- // lost the seq or the room: try again from the same place
				if after {
					return // fenced for good
				}
				continue
			}
			oldWrites.Add(1)
			if after {
				late.Add(1)
			}
		}
	}()
	for oldWrites.Load() < 5 {
		if err := ctx.Err(); err != nil {
			t.Fatal(err)
		}
	}
	mustNoErr(t, "new owner FenceRoom(2)", s.FenceRoom(ctx, roomA, 2))
	fencedAt.Store(true)
	recs, err := s.LoadCommands(ctx, roomA, 0)
	mustNoErr(t, "new owner load", err)
	next := int64(len(recs)) + 1
	for i := range 20 {
		a := fenced(persistence.Append{Command: command(roomA, next, fmt.Sprintf("new-%d", i), 2000, fmt.Sprintf("new-e%d", i))}, 2)
		if err := s.Append(ctx, a); err != nil {
			t.Fatalf("new owner append seq %d: %v (someone wrote behind its load)", next, err)
		}
		next++
	}
	close(stop)
	wg.Wait()
	if n := late.Load(); n != 0 {
		t.Fatalf("%d epoch-1 appends started after FenceRoom(2) and were written", n)
	}
	all, err := s.LoadCommands(ctx, roomA, 0)
	mustNoErr(t, "final load", err)
	for i, r := range all {
		if r.Seq != int64(i)+1 {
			t.Fatalf("log has a gap: row %d has seq %d", i, r.Seq)
		}
	}
	if int64(len(all)) != next-1 {
		t.Fatalf("log has %d rows, want %d", len(all), next-1)
	}
}

// Many rooms append at once (a MySQL group-commit batch shares one
// transaction); one of them is stale. Only the stale one fails.
func testStaleAmongClean(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	const rooms = 24
	stale := rand.IntN(rooms)
	key := func(i int) persistence.RoomKey {
		return persistence.RoomKey{AppCode: roomA.AppCode, RoomID: fmt.Sprintf("room-%02d", i)}
	}
	mustNoErr(t, "FenceRoom", s.FenceRoom(ctx, key(stale), 10))
	errs := make([]error, rooms)
	var wg sync.WaitGroup
	for i := range rooms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Append(ctx, fenced(persistence.Append{Command: command(key(i), 1, "c1", 1000, fmt.Sprintf("ev-%02d", i))}, 4))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if i == stale {
			wantIs(t, fmt.Sprintf("stale room %d", i), err, persistence.ErrConflict)
			if _, ferr := s.FindCommand(ctx, key(i), "c1"); ferr == nil {
				t.Fatalf("stale append of room %d was written", i)
			}
			continue
		}
		mustNoErr(t, fmt.Sprintf("clean room %d", i), err)
	}
}
