// Package storegate is a node's view of whether a room database
// answers, shared by every room of that database on the node: once the
// store stops answering, the rooms' store calls are refused at once
// instead of each waiting out its timeout. The node's wiring makes one
// per room database and hands it to the room grains (roomgrain.Deps).
package storegate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/persistence"
)

// Gate is the node's view of whether its room store answers, shared
// by every room of the node. A grain handles its messages one at a time,
// so a write that waits on a store that went away holds up every read of
// its room behind it, for the whole store timeout. Once one call found
// the store unreachable (it ran out its time, or the connection failed),
// or calls have been waiting while none finished for StallAfter (each
// confirmed by one look at the store bounded by ProbeTimeout, so one slow
// batch on a store that answers does not close it), the gate closes: the
// rooms' writes (and reloads) are refused at once without touching the
// store, the calls still waiting on it are cancelled (a write's outcome
// is then unknown, as after a timeout: the grain reloads before its next
// write), and one prober of the node asks the store a cheap question
// every ProbeEvery until one is answered, which opens the gate again. No
// room waits on a probe. The rooms' reads answer from the state in memory
// meanwhile (grain.unsure), and a room whose reload the gate cut short
// keeps the state it had (grain.loadIn).
//
// A watchdog runs while calls are in flight, so a stall is noticed
// StallAfter + ProbeTimeout after the last call finished even when no
// new call comes to notice it: every room of the node may be waiting on
// the store already.
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
	// names the room database when the node has several, as do the
	// gate's log lines (db): a record attribute, so that the node's log
	// throttle, which keys a line by its message and its own attributes,
	// never holds one database's closing back as a repeat of another's.
	refusal error
	db      string
	// closedAt is when the gate last closed (unix nanos), for the
	// reopening's log line; closes counts the closings (Register).
	closedAt atomic.Int64
	closes   atomic.Int64
	set      Settings
	log      *slog.Logger
}

// Settings are a gate's thresholds (room.store_stall_after,
// room.store_probe_timeout); zero takes the default. A store that
// answers finishes some call within the stall bound under any load a
// node takes (a group-commit batch is tens of ms), and answers a point
// read within the probe bound even on a CPU-starved server; with the
// defaults the gate closes about 0.35 s after the store stopped
// answering (the watchdog's wake-up and the probe).
type Settings struct {
	// StallAfter: calls in flight and none finished for this long is a
	// stall, confirmed by one probe.
	StallAfter time.Duration
	// ProbeTimeout bounds the probe that confirms a stall or a failed
	// call.
	ProbeTimeout time.Duration
}

func (s Settings) withDefaults() Settings {
	if s.StallAfter <= 0 {
		s.StallAfter = configs.DefaultStoreStallAfter
	}
	if s.ProbeTimeout <= 0 {
		s.ProbeTimeout = configs.DefaultStoreProbeTimeout
	}
	return s
}

// ProbeEvery is the prober's pace while the gate is closed: the gate
// opens at most ProbeEvery after the store answers again (a probe in
// flight when it resumes is answered then).
const ProbeEvery = 250 * time.Millisecond

// ErrDown refuses a write while the node's store is unreachable.
// Its code brings it back as itself from another node, so the room client
// can tell the caller when to retry (ProbeEvery: the gate opens at
// the first probe that finds the store back).
var ErrDown = errclass.New(errclass.CodeRoomStoreDown)

// probeKey is a room no command is ever written for: the probe's lookup
// in it answers "not found" as soon as the store answers at all.
var probeKey = persistence.RoomKey{AppCode: "roomcell", RoomID: "store-probe"}

// Finder is the store call the gate's probe makes when the store is no
// Prober.
type Finder interface {
	FindCommand(ctx context.Context, key persistence.RoomKey, commandID string) (persistence.CommandRecord, error)
}

// Prober is a store that answers a probe of its own (a ping on a
// connection outside its pool: persistence/mysql); the gate asks it
// instead of looking a command up.
type Prober interface {
	Probe(ctx context.Context) error
}

// New makes the gate of one room database (its calls' store); a nil
// store never closes it. The node makes one per database, once.
func New(store Finder, set Settings, log *slog.Logger) *Gate {
	g := &Gate{set: set.withDefaults(), log: log}
	if p, ok := store.(Prober); ok {
		g.probe = p.Probe
	} else if store != nil {
		g.probe = func(ctx context.Context) error {
			_, err := store.FindCommand(ctx, probeKey, "store-probe")
			if errors.Is(err, persistence.ErrNotFound) {
				return nil
			}
			return err
		}
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
	if s.inflight.Load() > 0 && now-s.lastDone.Load() >= int64(s.set.StallAfter) && s.stalled() {
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
// StallAfter) with a quick look at the store, and closes the gate
// if the store does not answer; one slow batch on a store that answers
// leaves it open.
func (s *Gate) stalled() bool {
	s.confirming.Lock()
	defer s.confirming.Unlock()
	if s.down.Load() {
		return true
	}
	if s.inflight.Load() == 0 || time.Now().UnixNano()-s.lastDone.Load() < int64(s.set.StallAfter) {
		return false // another caller confirmed the store answers, or the calls ended
	}
	if s.stillUnreachable() {
		s.close("no store call finished for "+s.set.StallAfter.String(), nil)
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
		if wait := time.Duration(s.lastDone.Load() + int64(s.set.StallAfter) - time.Now().UnixNano()); wait > 0 {
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

// stillUnreachable asks the store once, within ProbeTimeout, whether it
// answers. A single call can time out (an acknowledgement lost, a lock
// held long) while the store answers everyone else; a point read
// answers in milliseconds on a store that answers at all.
func (s *Gate) stillUnreachable() bool {
	if s.probe == nil {
		return false
	}
	if s.attached != nil && !s.attached() {
		return true
	}
	return !s.answers(s.set.ProbeTimeout)
}

// answers asks the store once, within d. Only an answer
// counts: any error (the deadline, a connection the driver gave up on
// after its own read timeout, a pool with no connection to spare) says
// the store did not answer in time.
func (s *Gate) answers(d time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return s.probe(ctx) == nil
}

// close closes the gate and starts the prober, once.
func (s *Gate) close(why string, err error) {
	if s.probe == nil || s.down.Swap(true) {
		return
	}
	s.closedAt.Store(time.Now().UnixNano())
	s.closes.Add(1)
	s.abandon()
	if s.log != nil {
		attrs := []any{"why", why}
		if s.db != "" {
			attrs = append(attrs, "room_db", s.db)
		}
		if err != nil {
			attrs = append(attrs, "cause", err.Error())
		}
		s.log.Warn("room store unreachable; refusing writes at once, reads answer from memory", attrs...)
	}
	go s.probeUntilUp()
}

// reopenProbeTimeout bounds each probe of the prober. It is longer
// than ProbeTimeout, which only has to tell a stall from a store that
// answers: a probe that timed out costs its connection, and the next one
// dials, logs in and sets up a session before its ping, which a store
// that has just come back (or a busy machine) may not do within
// ProbeTimeout; waiting longer costs nothing while the store answers (a
// ping comes back in milliseconds), and a ping sent while it was frozen is
// answered the moment it resumes.
const reopenProbeTimeout = time.Second

// probeUntilUp asks the store every ProbeEvery until it answers, then
// opens the gate.
func (s *Gate) probeUntilUp() {
	for {
		if (s.attached == nil || s.attached()) && s.answers(reopenProbeTimeout) {
			s.lastDone.Store(time.Now().UnixNano())
			s.down.Store(false)
			if s.log != nil {
				attrs := []any{"closed_for", time.Duration(time.Now().UnixNano() - s.closedAt.Load()).Round(time.Millisecond)}
				if s.db != "" {
					attrs = append(attrs, "room_db", s.db)
				}
				s.log.Info("room store answers again; writes admitted", attrs...)
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
	s.refusal, s.db = persistence.InRoomDB(name, ErrDown), name
	if attached == nil {
		return
	}
	s.attached = attached
	if !attached() {
		s.close("the room database did not answer when the node started", nil)
	}
}

// unreachable: the call ran out its time or could not reach the store
// (persistence.ErrUnavailable: a dead connection, a pool closed), as
// opposed to a refusal of this one call (a fence, a rule): worth a probe.
func unreachable(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) || errors.Is(err, persistence.ErrUnavailable)
}

// Call runs one store call through the gate, under timeout: ErrDown
// (or the database's refusal) at once while the gate is closed, and the
// call is cancelled when the gate closes while it waits. A nil gate
// runs every call.
func (s *Gate) Call(timeout time.Duration, call func(ctx context.Context) error) error {
	if err := s.admit(); err != nil {
		return err
	}
	// The call's context is a child of the gate's open context, so a
	// closing gate cancels it: one registration with the open context per
	// call (an AfterFunc on it beside a context of its own was two, and
	// their removals, on every room write).
	parent := context.Background()
	if s != nil {
		parent = s.openCtx()
	}
	ctx, cancel := context.WithTimeout(parent, timeout)
	if s != nil && s.down.Load() {
		cancel() // closed between admit and here: abandoned with the others
	}
	err := call(ctx)
	cancel()
	s.done(err)
	return err
}

// Register exports the gate on reg (labelled room_db by the node when it
// has several room databases): roomcell_room_store_gate_closed is 1
// while the gate refuses its rooms' writes, and
// roomcell_room_store_gate_closes_total counts its closings.
func (s *Gate) Register(reg prometheus.Registerer) error {
	closed := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "roomcell_room_store_gate_closed",
		Help: "1 while the node's store gate of the room database is closed: its writes are refused at once (ROOM_STORE_DOWN), its rooms' reads answer from memory.",
	}, func() float64 {
		if s.down.Load() {
			return 1
		}
		return 0
	})
	closes := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "roomcell_room_store_gate_closes_total",
		Help: "Times the node's store gate of the room database closed (a stall or a failed call the probe confirmed, or the database unattached at start).",
	}, func() float64 { return float64(s.closes.Load()) })
	for _, c := range []prometheus.Collector{closed, closes} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("storegate: register: %w", err)
		}
	}
	return nil
}
