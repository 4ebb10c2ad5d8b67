package supervise

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
)

// RestartPolicy is how a worker Supervisor restarts a child that panicked:
// always, after Initial·2^(n-1) capped at Max, where n counts the child's
// failures since it last ran Window without one. Proto.Actor's OneForOne
// stops a child for good after too many failures, and its backoff strategy
// grows linearly without a cap; a polling worker must neither die nor wait
// unboundedly.
type RestartPolicy struct {
	Initial time.Duration // default 100ms
	Max     time.Duration // default 30s
	Window  time.Duration // default 1m
}

func (p RestartPolicy) normalized() RestartPolicy {
	if p.Initial <= 0 {
		p.Initial = 100 * time.Millisecond
	}
	if p.Max < p.Initial {
		p.Max = max(p.Initial, 30*time.Second)
	}
	if p.Window <= 0 {
		p.Window = time.Minute
	}
	return p
}

// delay is the wait before the restart after the nth failure.
func (p RestartPolicy) delay(n int) time.Duration {
	d := p.Initial
	for i := 1; i < n && d < p.Max; i++ {
		d *= 2
	}
	return min(d, p.Max)
}

// Health is the board of a worker Supervisor's children: which are not
// running (crashed, waiting for their restart) and how often each was
// restarted. /readyz reads Down.
type Health struct {
	mu       sync.Mutex
	down     map[string]time.Time // worker → down since
	restarts map[string]int
	counter  *prometheus.CounterVec // nil: not exported
}

// Down lists the workers that are not running, sorted.
func (h *Health) Down() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(h.down))
	for name := range h.down {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// Restarts is how often worker was restarted.
func (h *Health) Restarts(worker string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.restarts[worker]
}

func (h *Health) markDown(worker string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.down[worker]; !ok {
		h.down[worker] = time.Now()
	}
}

func (h *Health) markUp(worker string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.down, worker)
	if h.counter != nil {
		// The worker's series exists at zero from its first start, so
		// a dashboard shows "no restarts", not "no data".
		h.counter.WithLabelValues(worker)
	}
}

func (h *Health) restarted(worker string) {
	h.mu.Lock()
	h.restarts[worker]++
	h.mu.Unlock()
	if h.counter != nil {
		h.counter.WithLabelValues(worker).Inc()
	}
}

// workerName is a child's name under its parent ("workers/room_outbox" →
// "room_outbox").
func workerName(pid *actor.PID) string {
	id := pid.GetId()
	if i := strings.LastIndexByte(id, '/'); i >= 0 {
		return id[i+1:]
	}
	return id
}

// backoffStrategy implements RestartPolicy as a Proto.Actor strategy.
type backoffStrategy struct {
	policy RestartPolicy
	health *Health
	log    *slog.Logger
}

func (s *backoffStrategy) HandleFailure(system *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason, _ any) {
	if rs.NumberOfFailures(s.policy.Window) == 0 {
		rs.Reset()
	}
	rs.Fail()
	name := workerName(child)
	d := s.policy.delay(rs.FailureCount())
	s.health.markDown(name)
	// LogEvents logs it with the panic value and stack.
	system.EventStream.Publish(&actor.SupervisorEvent{Child: child, Reason: reason, Directive: actor.RestartDirective})
	s.log.Error("worker is down: restarting it after a backoff", slog.String("worker", name),
		slog.Int("failures", rs.FailureCount()), slog.Duration("backoff", d))
	time.AfterFunc(d, func() {
		s.health.restarted(name)
		sup.RestartChildren(child)
		// Children that are not pollers (no Started hook of ours) are up
		// again once restarted.
		s.health.markUp(name)
	})
}

// NewWorkerSupervisor spawns the parent named name for polling workers:
// children are restarted after any number of panics per policy, each
// restart counted in roomcell_worker_restarts_total{worker} (registered on
// reg when it is not nil), and a child waiting for its restart is listed by
// Health().Down().
func NewWorkerSupervisor(system *actor.ActorSystem, name string, policy RestartPolicy, reg prometheus.Registerer, logger *slog.Logger) (*Supervisor, error) {
	h := &Health{down: map[string]time.Time{}, restarts: map[string]int{}}
	if reg != nil {
		h.counter = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "roomcell_worker_restarts_total",
			Help: "Restarts of a polling worker (room_outbox, notice workers, presence_stale) after a panic.",
		}, []string{"worker"})
		if err := reg.Register(h.counter); err != nil {
			return nil, fmt.Errorf("supervise: register metrics: %w", err)
		}
	}
	if logger == nil {
		logger = slog.Default()
	}
	sup, err := NewSupervisor(system, name, &backoffStrategy{policy: policy.normalized(), health: h, log: logger})
	if err != nil {
		return nil, err
	}
	sup.health = h
	return sup, nil
}

// Health is the children's board; nil for a Supervisor made by
// NewSupervisor.
func (s *Supervisor) Health() *Health { return s.health }
