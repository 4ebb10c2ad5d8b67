// Package storegate is a node's view of whether a room database
// answers, shared by every room of that database on the node: once the
// store stops answering, the rooms' store calls are refused at once
// instead of each waiting out its timeout. The node's wiring makes one
// per room database and hands it to the room grains (roomgrain.Deps).
package storegate

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/persistence"
)

// Gate is the node's view of whether its room store answers, shared
// by every room of the node. A grain handles its messages one at a time,
// so a write that waits on a store that went away holds up every read of
// its room behind it, for the whole store timeout. Once one call found
// the store unreachable (it ran out its timeout, or the connection
// failed), or calls have been waiting while none finished for
// storeStallAfter (each confirmed by a quick look at the store, so one
// slow batch on a store that answers does not close it), the gate closes: the rooms' writes (and reloads) are
// refused at once without touching the store, the calls still waiting
// on it are cancelled (a write's outcome is then unknown, as after a
// timeout: the grain reloads before its next write), and one prober of
// the node asks the store a cheap read every ProbeEvery until it
// answers, which opens the gate again. No room waits on a probe. The
// rooms' reads answer from the state in memory meanwhile (grain.unsure).
//
// A watchdog runs while calls are in flight, so a stall is noticed
// storeStallAfter + storeConfirmTimeout after the last call finished
// even when no new call comes to notice it: every room of the node may
// be waiting on the store already.
type Gate struct {
	down       atomic.Bool
	confirming sync.Mutex   // one caller confirms a stall; the others wait for its verdict
	watching   atomic.Bool  // the watchdog runs
	inflight   atomic.Int64 // store calls under way
	lastDone   atomic.Int64 // unix nanos of the last call's end (or of the first start after a quiet spell)
	// open is cancelled when the gate closes: the calls admitted before
	// are abandoned instead of waiting out the store timeout.
	openMu sync.Mutex
	open   context.Context
	cancel context.CancelFunc
	// probe asks the store something cheap; nil never closes the gate.
	probe func(ctx context.Context) error
	// attached, when set, says whether the store may be used at all (a
	// room database that was unreachable when the node started is
	// attached once it answers and has its schema): until then the gate
	// stays closed whatever the probe says.
	attached func() bool
	// refusal is what a refused call gets (nil: ErrDown): it
	// names the room database when the node has several.
	refusal error
	timeout time.Duration
	log     *slog.Logger
}

// A store that answers finishes some call within storeStallAfter under
// any load this node takes (a group-commit batch is tens of ms); a stall
// that long is confirmed by one look bounded by storeConfirmTimeout, so
// the gate closes under half a second after the store stopped answering.
const (
	ProbeEvery      = 250 * time.Millisecond
	storeStallAfter = 300 * time.Millisecond
)

// ErrDown refuses a write while the node's store is unreachable.
// Its code brings it back as itself from another node, so the room client
// can tell the caller when to retry (ProbeEvery: the gate opens at
// the first probe that finds the store back).
var ErrDown = errclass.New(errclass.CodeRoomStoreDown)

// probeKey is a room no command is ever written for: the probe's lookup
// in it answers "not found" as soon as the store answers at all.
var probeKey = persistence.RoomKey{AppCode: "roomcell", RoomID: "store-probe"}

// Finder is the store call the gate's probe makes.
type Finder interface {
	FindCommand(ctx context.Context, key persistence.RoomKey, commandID string) (persistence.CommandRecord, error)
}

// New makes the gate of one room database (its calls' store); a nil
// store never closes it. The node makes one per database, once.
func New(store Finder, timeout time.Duration, log *slog.Logger) *Gate {
	g := &Gate{timeout: timeout, log: log}
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

// admit says whether a store call may go now: ErrDown while the
// gate is closed, or once calls have stalled (which closes it).
func (s *Gate) admit() error {
	if s == nil {
		return nil
	}
	if s.down.Load() {
		return s.refused()
	}
	now := time.Now().UnixNano()
	if s.inflight.Load() > 0 && now-s.lastDone.Load() >= int64(storeStallAfter) && s.stalled() {
		return s.refused()
	}
	if s.inflight.Add(1) == 1 {
		s.lastDone.Store(now)
	}
	if s.probe != nil && s.watching.CompareAndSwap(false, true) {
		go s.watchdog()
	}
	return nil
}

// stalled confirms a stall (calls waiting, none finished for
// storeStallAfter) with a quick look at the store, and closes the gate
// if the store does not answer; one slow batch on a store that answers
// leaves it open.
func (s *Gate) stalled() bool {
	s.confirming.Lock()
	defer s.confirming.Unlock()
	if s.down.Load() {
		return true
	}
	if s.inflight.Load() == 0 || time.Now().UnixNano()-s.lastDone.Load() < int64(storeStallAfter) {
		return false // another caller confirmed the store answers, or the calls ended
	}
	if s.stillUnreachable() {
		s.close("no store call finished for "+storeStallAfter.String(), nil)
		return true
	}
	s.lastDone.Store(time.Now().UnixNano())
	return false
}

// watchdog checks for a stall while calls are in flight, and ends when
// none is (admit starts it again) or the gate closed.
func (s *Gate) watchdog() {
	for {
		if s.down.Load() || s.inflight.Load() == 0 {
			s.watching.Store(false)
			// A call admitted after the check above but before the
			// store of false found the watchdog running: take it on.
			if s.down.Load() || s.inflight.Load() == 0 || !s.watching.CompareAndSwap(false, true) {
				return
			}
		}
		if wait := time.Duration(s.lastDone.Load() + int64(storeStallAfter) - time.Now().UnixNano()); wait > 0 {
			time.Sleep(wait)
			continue
		}
		s.stalled()
	}
}

// openCtx is cancelled when the gate closes next.
func (s *Gate) openCtx() context.Context {
	s.openMu.Lock()
	defer s.openMu.Unlock()
	if s.open == nil {
		s.open, s.cancel = context.WithCancel(context.Background())
	}
	return s.open
}

// abandon cancels the calls admitted before the gate closed.
func (s *Gate) abandon() {
	s.openMu.Lock()
	defer s.openMu.Unlock()
	if s.cancel != nil {
		s.cancel()
	}
	s.open, s.cancel = nil, nil
}

// done records the outcome of an admitted call.
func (s *Gate) done(err error) {
	if s == nil {
		return
	}
	s.lastDone.Store(time.Now().UnixNano())
	s.inflight.Add(-1)
	if err != nil && unreachable(err) && !s.down.Load() && s.stillUnreachable() {
		s.close("a store call could not reach the store", err)
	}
}

// storeConfirmTimeout bounds the look that confirms a stall or one
// failed call: a single call can time out (an acknowledgement lost, a
// lock held long) while the store answers everyone else, and a point
// read answers in milliseconds on a store that answers at all (150 ms
// leaves room for a CPU-starved server; with storeStallAfter the gate
// closes 0.45 s into an outage).
const storeConfirmTimeout = 150 * time.Millisecond

// stillUnreachable asks the store once, briefly, whether it answers.
func (s *Gate) stillUnreachable() bool {
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
func (s *Gate) close(why string, err error) {
	if s.probe == nil || s.down.Swap(true) {
		return
	}
	s.abandon()
	if s.log != nil {
		s.log.Warn("room store unreachable; refusing writes at once, reads answer from memory", "why", why, "error", err)
	}
	go s.probeUntilUp()
}

// probeUntilUp asks the store until it answers (an error that is not
// unreachability is an answer too: a closed store, a refusal), then
// opens the gate.
func (s *Gate) probeUntilUp() {
	start := time.Now()
	for {
		if s.attached != nil && !s.attached() {
			time.Sleep(ProbeEvery)
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
		time.Sleep(ProbeEvery)
	}
}

// refused is the error of a refused call.
func (s *Gate) refused() error {
	if s.refusal == nil {
		return ErrDown
	}
	return s.refusal
}

// ForDatabase names the gate's room database in its refusals and, with
// attached, keeps it closed from the start until attached says yes: the
// node started while that database did not answer.
func (s *Gate) ForDatabase(name string, attached func() bool) {
	s.refusal = persistence.InRoomDB(name, ErrDown)
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

// Call runs one store call through the gate, under timeout: ErrDown
// (or the database's refusal) at once while the gate is closed, and the
// call is cancelled when the gate closes while it waits. A nil gate
// runs every call.
func (s *Gate) Call(timeout time.Duration, call func(ctx context.Context) error) error {
	if err := s.admit(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	if s != nil {
		stop := context.AfterFunc(s.openCtx(), cancel)
		defer stop()
		if s.down.Load() {
			cancel() // closed between admit and here: abandoned with the others
		}
	}
	err := call(ctx)
	cancel()
	s.done(err)
	return err
}
