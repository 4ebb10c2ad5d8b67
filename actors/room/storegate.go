package room

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/persistence"
)

// storeGate is the node's view of whether its room store answers, shared
// by every room of the node. A grain handles its messages one at a time,
// so a write that waits on a store that went away holds up every read of
// its room behind it, for the whole store timeout. Once one call found
// the store unreachable (it ran out its timeout, or the connection
// failed), or calls have been waiting while none finished for
// storeStallAfter (each confirmed by a quick look at the store, so one
// slow batch on a store that answers does not close it), the gate closes: the rooms' writes (and reloads) are
// refused at once without touching the store, and one prober of the
// node asks the store a cheap read every storeProbeEvery until it
// answers, which opens the gate again. No room waits on a probe. The
// rooms' reads answer from the state in memory meanwhile (grain.unsure).
type storeGate struct {
	down       atomic.Bool
	confirming atomic.Bool  // one caller is confirming a stall
	inflight   atomic.Int64 // store calls under way
	lastDone   atomic.Int64 // unix nanos of the last call's end (or of the first start after a quiet spell)
	// probe asks the store something cheap; nil never closes the gate.
	probe func(ctx context.Context) error
	// attached, when set, says whether the store may be used at all (a
	// room database that was unreachable when the node started is
	// attached once it answers and has its schema): until then the gate
	// stays closed whatever the probe says.
	attached func() bool
	// refusal is what a refused call gets (nil: errStoreDown): it
	// names the room database when the node has several.
	refusal error
	timeout time.Duration
	log     *slog.Logger
}

const (
	storeProbeEvery = 250 * time.Millisecond
	storeStallAfter = time.Second
)

// errStoreDown refuses a write while the node's store is unreachable.
// Its code brings it back as itself from another node, so the room client
// can tell the caller when to retry (storeProbeEvery: the gate opens at
// the first probe that finds the store back).
var errStoreDown = errclass.New(errclass.CodeRoomStoreDown)

// probeKey is a room no command is ever written for: the probe's lookup
// in it answers "not found" as soon as the store answers at all.
var probeKey = persistence.RoomKey{AppCode: "roomcell", RoomID: "store-probe"}

func newStoreGate(store Store, timeout time.Duration, log *slog.Logger) *storeGate {
	g := &storeGate{timeout: timeout, log: log}
	if store != nil {
		g.probe = func(ctx context.Context) error {
			_, err := store.FindCommand(ctx, probeKey, "store-probe")
			if errors.Is(err, persistence.ErrNotFound) {
				return nil
			}
			return err
		}
	}
	if g.timeout <= 0 {
		g.timeout = 3 * time.Second
	}
	return g
}

// admit says whether a store call may go now: errStoreDown while the
// gate is closed, or once calls have stalled (which closes it).
func (s *storeGate) admit() error {
	if s == nil {
		return nil
	}
	if s.down.Load() {
		return s.refused()
	}
	now := time.Now().UnixNano()
	if s.inflight.Load() > 0 && now-s.lastDone.Load() >= int64(storeStallAfter) && s.confirming.CompareAndSwap(false, true) {
		// A stall, or one slow batch: a quick look tells.
		down := s.stillUnreachable()
		s.confirming.Store(false)
		if down {
			s.close("no store call finished for a second", nil)
			return s.refused()
		}
		s.lastDone.Store(time.Now().UnixNano())
	}
	if s.inflight.Add(1) == 1 {
		s.lastDone.Store(now)
	}
	return nil
}

// done records the outcome of an admitted call.
func (s *storeGate) done(err error) {
	if s == nil {
		return
	}
	s.lastDone.Store(time.Now().UnixNano())
	s.inflight.Add(-1)
	if err != nil && unreachable(err) && !s.down.Load() && s.stillUnreachable() {
		s.close("a store call could not reach the store", err)
	}
}

// storeConfirmTimeout bounds the look that confirms one failed call: a
// single call can time out (an acknowledgement lost, a lock held long)
// while the store answers everyone else.
const storeConfirmTimeout = 100 * time.Millisecond

// stillUnreachable asks the store once, briefly, whether it answers.
func (s *storeGate) stillUnreachable() bool {
	if s.probe == nil {
		return false
	}
	if s.attached != nil && !s.attached() {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeConfirmTimeout)
	defer cancel()
	err := s.probe(ctx)
	return err != nil && unreachable(err)
}

// close closes the gate and starts the prober, once.
func (s *storeGate) close(why string, err error) {
	if s.probe == nil || s.down.Swap(true) {
		return
	}
	if s.log != nil {
		s.log.Warn("room store unreachable; refusing writes at once, reads answer from memory", "why", why, "error", err)
	}
	go s.probeUntilUp()
}

// probeUntilUp asks the store until it answers (an error that is not
// unreachability is an answer too: a closed store, a refusal), then
// opens the gate.
func (s *storeGate) probeUntilUp() {
	start := time.Now()
	for {
		if s.attached != nil && !s.attached() {
			time.Sleep(storeProbeEvery)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
		err := s.probe(ctx)
		cancel()
		if err == nil || !unreachable(err) {
			s.lastDone.Store(time.Now().UnixNano())
			s.down.Store(false)
			if s.log != nil {
				s.log.Info("room store answers again; writes admitted", "closed_for", time.Since(start).Round(time.Millisecond))
			}
			return
		}
		time.Sleep(storeProbeEvery)
	}
}

// refused is the error of a refused call.
func (s *storeGate) refused() error {
	if s.refusal == nil {
		return errStoreDown
	}
	return s.refusal
}

// forDatabase names the gate's room database in its refusals and, with
// attached, keeps it closed from the start until attached says yes: the
// node started while that database did not answer.
func (s *storeGate) forDatabase(name string, attached func() bool) {
	s.refusal = persistence.InRoomDB(name, errStoreDown)
	if attached == nil {
		return
	}
	s.attached = attached
	if !attached() {
		s.close("the room database did not answer when the node started", nil)
	}
}

// unreachable: the call ran out its time or could not reach the store,
// as opposed to a refusal of this one call (a fence, a lock wait).
func unreachable(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne)
}

// storeCall runs one store call of the grain through the node's gate.
func (g *grain) storeCall(call func(ctx context.Context) error) error {
	if err := g.deps.store.admit(); err != nil {
		return err
	}
	ctx, cancel := g.storeCtx()
	err := call(ctx)
	cancel()
	g.deps.store.done(err)
	return err
}
