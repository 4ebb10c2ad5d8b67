package roomgrain

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/room"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
)

// giftStore fails a gift's room write in the ways a database does: not
// written, or written with the acknowledgement lost; and can fail VoidGift.
type giftStore struct {
	*memdb.Store
	appendFails atomic.Bool // Append returns an error without writing
	ackLost     atomic.Bool // Append writes, then returns an error
	voidFails   atomic.Bool
	loadFails   atomic.Bool
}

func (s *giftStore) Append(ctx context.Context, a persistence.Append) error {
	if s.appendFails.Load() {
		return persistence.ErrUnavailable
	}
	if err := s.Store.Append(ctx, a); err != nil {
		return err
	}
	if s.ackLost.Load() {
		return persistence.ErrUnavailable
	}
	return nil
}

func (s *giftStore) VoidGift(ctx context.Context, k persistence.RoomKey, id string, now int64) (bool, error) {
	if s.voidFails.Load() {
		return false, persistence.ErrUnavailable
	}
	return s.Store.VoidGift(ctx, k, id, now)
}

func (s *giftStore) LoadSnapshot(ctx context.Context, k persistence.RoomKey) (persistence.Snapshot, error) {
	if s.loadFails.Load() {
		return persistence.Snapshot{}, persistence.ErrUnavailable
	}
	return s.Store.LoadSnapshot(ctx, k)
}

func giftFixture(t *testing.T) (*fixture, *giftStore) {
	f := newFixture(t)
	gs := &giftStore{Store: f.store}
	f.deps.Store = gs
	return f, gs
}

func giftLogged(t *testing.T, f *fixture, id string) bool {
	t.Helper()
	_, err := f.store.FindCommand(context.Background(), grainKey, id)
	if err != nil && !errors.Is(err, persistence.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

// Each case ends with the one invariant of a gift: it is in the room log
// exactly when the wallet confirmed it, and a gift not logged is refunded
// or still open for the reconciler, never confirmed.
func TestGrainGiftIsOneOutcome(t *testing.T) {
	setup := func(t *testing.T) (*fixture, *giftStore, func(*testing.T, string, string), *actor.PID) {
		f, gs := giftFixture(t)
		pid := f.activate("app/r1")
		f.mustDo(pid, rcCreate("c1", "owner"))
		f.mustDo(pid, rcJoin("c2", "bob"))
		check := func(t *testing.T, id, want string) {
			t.Helper()
			logged := giftLogged(t, f, id)
			got := f.wallet.outcome(id)
			if got != want || logged != (want == "confirmed") {
				t.Fatalf("gift %s: wallet %q, logged %v; want wallet %q, logged %v", id, got, logged, want, want == "confirmed")
			}
		}
		return f, gs, check, pid
	}
	t.Run("append ok: confirmed", func(t *testing.T) {
		f, _, check, pid := setup(t)
		f.mustDo(pid, rcGift("g1", "owner", "bob"))
		check(t, "g1", "confirmed")
	})
	t.Run("append fails: voided and refunded, and stays so on retry", func(t *testing.T) {
		f, gs, check, pid := setup(t)
		gs.appendFails.Store(true)
		if _, err := f.do(pid, rcGift("g1", "owner", "bob")); !isRefunded(err) {
			t.Fatalf("gift whose append failed: %v, want ErrGiftRefunded", err)
		}
		check(t, "g1", "refunded")
		gs.appendFails.Store(false)
		if _, err := f.do(pid, rcGift("g1", "owner", "bob")); !isRefunded(err) {
			t.Fatalf("retry of a refunded gift: %v, want ErrGiftRefunded", err)
		}
		check(t, "g1", "refunded")
	})
	t.Run("ack lost: found sent, answered and confirmed", func(t *testing.T) {
		f, gs, check, pid := setup(t)
		gs.ackLost.Store(true)
		r, err := f.do(pid, rcGift("g1", "owner", "bob"))
		if err != nil || r.RoomSeq != 3 {
			t.Fatalf("gift whose ack was lost: %+v, %v; want its recorded reply at seq 3", r, err)
		}
		gs.ackLost.Store(false)
		check(t, "g1", "confirmed")
		again := f.mustDo(pid, rcGift("g1", "owner", "bob"))
		if !again.Duplicate || again.RoomSeq != 3 || f.wallet.calls["g1"] != 1 {
			t.Fatalf("retry: %+v, holds %d; want the recorded reply and one hold", again, f.wallet.calls["g1"])
		}
	})
	t.Run("room store down: left open, retry delivers once", func(t *testing.T) {
		f, gs, check, pid := setup(t)
		gs.appendFails.Store(true)
		gs.voidFails.Store(true)
		if _, err := f.do(pid, rcGift("g1", "owner", "bob")); !errors.Is(err, errclass.Unavailable) {
			t.Fatalf("gift with the room store down: %v, want ErrUnavailable", err)
		}
		check(t, "g1", "")
		gs.appendFails.Store(false)
		gs.voidFails.Store(false)
		r := f.mustDo(pid, rcGift("g1", "owner", "bob"))
		if r.Duplicate || r.RoomSeq != 3 {
			t.Fatalf("retry after recovery: %+v, want a fresh append at seq 3", r)
		}
		check(t, "g1", "confirmed")
	})
	t.Run("voided by the reconciler before the retry: refunded", func(t *testing.T) {
		f, gs, check, pid := setup(t)
		gs.appendFails.Store(true)
		gs.voidFails.Store(true)
		_, _ = f.do(pid, rcGift("g1", "owner", "bob"))
		gs.appendFails.Store(false)
		gs.voidFails.Store(false)
		// What the reconciler does for an old open reservation.
		if sent, err := f.store.VoidGift(context.Background(), grainKey, "g1", 1); err != nil || sent {
			t.Fatalf("reconciler void: sent %v, %v", sent, err)
		}
		if _, err := f.do(pid, rcGift("g1", "owner", "bob")); !isRefunded(err) {
			t.Fatalf("retry of a voided gift: %v, want ErrGiftRefunded", err)
		}
		check(t, "g1", "refunded")
	})
}

// isRefunded recognises ErrGiftRefunded after the trip through the
// actor's reply (it is registered, so it comes back as itself).
func isRefunded(err error) bool { return errors.Is(err, room.ErrGiftRefunded) }
