package supervise

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// ErrStopTimeout: the actor had not terminated when the wait ran out. It
// keeps running; the caller decides whether to go on shutting down.
var ErrStopTimeout = errors.New("supervise: actor did not stop in time")

// PanicError carries a recovered panic value and the stack where it
// happened, so a supervisor event can say where the actor crashed. Code that
// must clean up on a panic recovers, cleans up and re-panics with Repanic.
type PanicError struct {
	Value any
	Stack []byte
}

func (p *PanicError) Error() string { return fmt.Sprintf("panic: %v", p.Value) }

// Repanic panics again with r wrapped in a *PanicError that records the
// current stack (when called from the deferred recover, that is the stack
// of the original panic). A value that already is a *PanicError is kept.
func Repanic(r any) {
	if p, ok := r.(*PanicError); ok {
		panic(p)
	}
	panic(&PanicError{Value: r, Stack: debug.Stack()})
}

// LogEvents logs every supervisor decision of system at Error with the
// failed child, the directive and the panic value (plus the stack when the
// reason is a *PanicError). Call the returned function to unsubscribe.
func LogEvents(system *actor.ActorSystem, logger *slog.Logger) (unsubscribe func()) {
	sub := system.EventStream.SubscribeWithPredicate(func(evt any) {
		e := evt.(*actor.SupervisorEvent)
		attrs := []any{
			slog.String("child", e.Child.String()),
			slog.String("directive", e.Directive.String()),
			slog.String("reason", fmt.Sprint(e.Reason)),
		}
		var p *PanicError
		if err, ok := e.Reason.(error); ok && errors.As(err, &p) && len(p.Stack) > 0 {
			attrs = append(attrs, slog.String("stack", string(p.Stack)))
		}
		logger.Error("actor failed", attrs...)
	}, func(evt any) bool {
		_, ok := evt.(*actor.SupervisorEvent)
		return ok
	})
	return func() { system.EventStream.Unsubscribe(sub) }
}

// Supervisor is a parent actor whose only job is to own worker actors under
// a restart strategy: a panic in a child is handled by the strategy instead
// of the root guardian's default.
type Supervisor struct {
	system *actor.ActorSystem
	pid    *actor.PID
	health *Health // NewWorkerSupervisor only
}

type spawnRequest struct {
	name  string
	props *actor.Props
}

type spawnReply struct {
	pid *actor.PID
	err error
}

// NewSupervisor spawns the parent named name. For roomcell's workers:
// NewSupervisor(system, "workers", actor.NewOneForOneStrategy(10, time.Minute, actor.DefaultDecider)).
func NewSupervisor(system *actor.ActorSystem, name string, strategy actor.SupervisorStrategy) (*Supervisor, error) {
	props := actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(*spawnRequest); ok {
			pid, err := c.SpawnNamed(m.props, m.name)
			c.Respond(&spawnReply{pid: pid, err: err})
		}
	}, actor.WithSupervisor(strategy))
	pid, err := system.Root.SpawnNamed(props, name)
	if err != nil {
		return nil, fmt.Errorf("supervise: spawn %s: %w", name, err)
	}
	return &Supervisor{system: system, pid: pid}, nil
}

// PID is the parent's PID.
func (s *Supervisor) PID() *actor.PID { return s.pid }

// System is the actor system the parent lives in.
func (s *Supervisor) System() *actor.ActorSystem { return s.system }

// Spawn starts a child named name (its PID id is "<parent>/<name>").
func (s *Supervisor) Spawn(name string, props *actor.Props) (*actor.PID, error) {
	res, err := s.system.Root.RequestFuture(s.pid, &spawnRequest{name: name, props: props}, 5*time.Second).Result()
	if err != nil {
		return nil, fmt.Errorf("supervise: spawn %s: %w", name, err)
	}
	r := res.(*spawnReply)
	if r.err != nil {
		return nil, fmt.Errorf("supervise: spawn %s: %w", name, r.err)
	}
	return r.pid, nil
}

// Stop poisons the parent and waits; children still running are stopped
// with it (their queued messages are dropped), so stop the workers first
// with StopAndWait.
func (s *Supervisor) Stop(timeout time.Duration) error {
	return StopAndWait(s.system, s.pid, timeout)
}

// StopAndWait sends pid a poison pill (everything queued before it is still
// processed) and waits until the actor has terminated or timeout passes.
// Unlike PoisonFuture it is not capped at 10 s.
func StopAndWait(system *actor.ActorSystem, pid *actor.PID, timeout time.Duration) error {
	done := make(chan struct{})
	var once sync.Once
	watcher := system.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *actor.Started:
			// Watching an actor that is already gone yields Terminated
			// through the dead-letter process, so the order against the
			// poison below does not matter.
			c.Watch(pid)
		case *actor.Terminated:
			if m.Who.Equal(pid) {
				once.Do(func() { close(done) })
				c.Stop(c.Self())
			}
		}
	}))
	system.Root.Poison(pid)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
		system.Root.Stop(watcher)
		return fmt.Errorf("%w: %s after %s", ErrStopTimeout, pid.Id, timeout)
	}
}
