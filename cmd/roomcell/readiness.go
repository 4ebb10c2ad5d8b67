package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// probe is one dependency /readyz covers: what a command needs on every
// call. Background workers are not probes: a worker waiting for its
// restart is a metric and a log line, not an unready node.
type probe struct {
	name  string
	check func(ctx context.Context) error
	// roomDB marks one room database of several: its failure degrades
	// the node (its rooms are refused, the others serve) and only all of
	// them failing makes it unready.
	roomDB bool
}

// readyRound is the outcome of one round of probes.
type readyRound struct {
	at     time.Time
	failed []string // names of the probes that failed, in probe order
}

// readiness runs the probes in the background, every interval, each
// bounded by timeout, and keeps the last round: /readyz reads it without
// waiting on any dependency, so a hung store makes the node unready
// within a round, never /readyz slow. A probe that ignores its context
// is abandoned at the deadline (its goroutine finishes on its own) and
// counts as failed.
type readiness struct {
	probes   []probe
	interval time.Duration
	timeout  time.Duration
	log      *slog.Logger
	ok       *prometheus.GaugeVec

	last atomic.Pointer[readyRound]
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

func newReadiness(probes []probe, interval, timeout time.Duration, log *slog.Logger, reg prometheus.Registerer) (*readiness, error) {
	r := &readiness{probes: probes, interval: interval, timeout: timeout, log: log,
		ok: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "roomcell_readiness_probe_ok",
			Help: "1 when the last /readyz probe of this dependency (store, cluster, lease) succeeded within http.readiness.probe_timeout, else 0.",
		}, []string{"probe"}),
		stop: make(chan struct{}), done: make(chan struct{})}
	if err := reg.Register(r.ok); err != nil {
		return nil, fmt.Errorf("readiness metrics: %w", err)
	}
	return r, nil
}

// start runs one round now (so /readyz is right from the first request)
// and then one per interval until close.
func (r *readiness) start() {
	r.round()
	go func() {
		defer close(r.done)
		t := time.NewTicker(r.interval)
		defer t.Stop()
		for {
			select {
			case <-r.stop:
				return
			case <-t.C:
				r.round()
			}
		}
	}()
}

func (r *readiness) close() {
	r.once.Do(func() {
		close(r.stop)
		<-r.done
	})
}

// round runs every probe at once and records the outcome; a probe's
// change of state is logged once (WARN when it starts failing, INFO when
// it recovers), never per round.
func (r *readiness) round() {
	errs := make([]error, len(r.probes))
	var wg sync.WaitGroup
	for i, p := range r.probes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = r.run(p)
		}()
	}
	wg.Wait()
	prev := r.last.Load()
	cur := &readyRound{at: time.Now()}
	for i, p := range r.probes {
		was := prev == nil || !failedIn(prev, p.name)
		if errs[i] != nil {
			// The error goes to the log only: /readyz names the probe.
			cur.failed = append(cur.failed, p.name)
			r.ok.WithLabelValues(p.name).Set(0)
			if was && p.roomDB {
				r.log.Warn("room database failing: /readyz reports it degraded; its rooms are refused, the others serve", "probe", p.name, "error", errs[i])
			} else if was {
				r.log.Warn("readiness probe failing: /readyz answers 503 until it recovers", "probe", p.name, "error", errs[i])
			}
			continue
		}
		r.ok.WithLabelValues(p.name).Set(1)
		if !was {
			r.log.Info("readiness probe recovered", "probe", p.name)
		}
	}
	r.last.Store(cur)
}

func failedIn(rd *readyRound, name string) bool { return slices.Contains(rd.failed, name) }

// run is one probe under the deadline, whether or not it honours its
// context.
func (r *readiness) run(p probe) error {
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	res := make(chan error, 1)
	go func() { res <- p.check(ctx) }()
	select {
	case err := <-res:
		return err
	case <-ctx.Done():
		return fmt.Errorf("no answer within %s", r.timeout)
	}
}

// failing is what keeps the node unready ("" = nothing): a probe that
// failed in the last round (a room database's only when every room
// database failed), or a last round too old to trust (the loop is
// stuck).
func (r *readiness) failing(now time.Time) string {
	rd := r.last.Load()
	if rd == nil {
		return "readiness probes have not run"
	}
	if stale := 2*r.interval + r.timeout; now.Sub(rd.at) > stale {
		return fmt.Sprintf("readiness probes last ran %s ago (more than %s)", now.Sub(rd.at).Round(time.Millisecond), stale)
	}
	var hard []string
	dbs, dbsFailed := 0, 0
	for _, p := range r.probes {
		failed := failedIn(rd, p.name)
		if p.roomDB {
			dbs++
			if failed {
				dbsFailed++
			}
			continue
		}
		if failed {
			hard = append(hard, p.name)
		}
	}
	if dbs > 0 && dbsFailed == dbs {
		hard = append(hard, "every room database")
	}
	if len(hard) > 0 {
		return "probe failing: " + strings.Join(hard, ", ")
	}
	return ""
}

// degraded lists the room databases that failed the last round while
// others answered: the node is ready, but their rooms are refused.
func (r *readiness) degraded() []string {
	rd := r.last.Load()
	if rd == nil {
		return nil
	}
	var out []string
	for _, p := range r.probes {
		if p.roomDB && failedIn(rd, p.name) {
			out = append(out, p.name)
		}
	}
	return out
}

// readinessProbes are the dependencies a command needs on this node: the
// room store answers (MySQL: a ping on a pooled connection; go-memdb is
// in process), the cluster member is serving (joined, not rejoining or
// draining) and, with etcd ownership, this node's shard lease is renewed.
// The wallet, IM, MQ and directory are left out: a command that needs
// one fails on its own and the others keep working.
//
// With several room databases each is a probe of its own, room_db@<key>
// (pinged; one that did not answer at start fails until it is attached):
// one that fails leaves the node ready, reported as degraded in /readyz's
// body and in roomcell_readiness_probe_ok, since every node shares the
// databases and taking this one out of service would refuse the other
// databases' rooms too; all of them failing makes it unready.
func (a *App) readinessProbes() []probe {
	var ps []probe
	if !a.multiRoomDB() {
		if db, ok := a.store.(interface{ DB() *sql.DB }); ok {
			ps = append(ps, probe{name: "store", check: func(ctx context.Context) error { return db.DB().PingContext(ctx) }})
		}
	}
	for _, rdb := range a.roomDBs {
		db, ok := rdb.store.(interface{ DB() *sql.DB })
		if !a.multiRoomDB() || !ok {
			continue
		}
		ps = append(ps, probe{name: "room_db@" + rdb.key, roomDB: true, check: func(ctx context.Context) error {
			if !rdb.attached.Load() {
				return errors.New("unreachable since the node started; its rooms are refused until it answers")
			}
			return db.DB().PingContext(ctx)
		}})
	}
	ps = append(ps, probe{name: "cluster", check: func(context.Context) error {
		if !a.member.Ready() {
			return fmt.Errorf("cluster member is %s", a.member.Status())
		}
		return nil
	}})
	if l, ok := a.owners.(interface{ Serving() bool }); ok {
		ps = append(ps, probe{name: "lease", check: func(context.Context) error {
			if !l.Serving() {
				return errors.New("shard lease not renewed (etcd unreachable or lost quorum)")
			}
			return nil
		}})
	}
	return ps
}
