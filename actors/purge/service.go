package purge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/hyapp/roomcell/actors/supervise"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
)

// WorkerName is the actor name and the log `worker` field.
const WorkerName = "retention_purge"

// Deps is what the purge worker needs.
type Deps struct {
	// Purgers are this node's stores that hold purgeable tables; a table
	// no store here holds is left to the nodes that have it.
	Purgers []persistence.Purger
	// Positions reads the notice cursors. nil: no cursor is known, so
	// RoomUserKicked and wallet_outbox rows, which wait for it, stay.
	Positions persistence.ConsumerPositions
	Config    configs.RetentionConfig
	NodeID    string
	Logger    *slog.Logger
	Metrics   *Metrics
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// TableRound is what one round did to one table.
type TableRound struct {
	Table   string
	Rows    int64
	Batches int
	// Done: nothing more was eligible when the round ended.
	Done bool
	// Skipped says why the table was not purged ("lease held by another
	// node"), "" when it was.
	Skipped string
	Err     error
	AtMs    int64
}

// TableReport is one table's line of `roomctl purge status` / `--dry-run`.
type TableReport struct {
	Table     string
	Retention time.Duration
	CutoffMs  int64
	// Held is false when no store on this node holds the table.
	Held              bool
	RowEstimate       int64
	OldestCreatedAtMs int64
	// Purgeable is the dry run's count (at most persistence.MaxPurgeCount;
	// -1 when not asked).
	Purgeable int64
	// Last is this node's last round of the table (zero before the first).
	Last TableRound
}

// Service runs purge rounds and answers status; the actor drives it.
type Service struct {
	deps  Deps
	owner string

	mu       sync.Mutex
	last     map[string]TableRound
	limiters map[string]*rate.Limiter
	// notBefore is when the next batch of any table may start: the yield
	// of retention.duty_cycle after the last batch, kept across tables and
	// rounds, so the duty cycle bounds the whole worker.
	notBefore time.Time
	errLog    map[string]time.Time // table → when its last error was logged
	behindLog map[string]time.Time // table → when it was last said to fall behind
}

// NewService validates deps: Config must be complete (as Load gives it,
// or configs.WithDefaults); an unset or bad retention key is an error
// naming it.
func NewService(deps Deps) (*Service, error) {
	if err := deps.Config.Validate(); err != nil {
		return nil, err
	}
	cfg := deps.Config
	supervise.Fallbacks(&deps.Logger, &deps.Now)
	s := &Service{deps: deps, owner: supervise.LeaseOwner(deps.NodeID), last: map[string]TableRound{},
		limiters: map[string]*rate.Limiter{}, errLog: map[string]time.Time{}, behindLog: map[string]time.Time{}}
	for _, t := range persistence.PurgeTables {
		l := rate.NewLimiter(rate.Limit(cfg.RowsPerSecond), cfg.BatchSize)
		// A limiter starts with a full bucket; empty it, so the rate holds
		// from the first batch instead of after a free burst per table.
		l.AllowN(time.Now(), cfg.BatchSize)
		s.limiters[t] = l
	}
	return s, nil
}

// Retention is the configured age of a table's rule.
func (s *Service) Retention(table string) time.Duration {
	c := s.deps.Config
	switch table {
	case persistence.PurgeRoomOutbox:
		return c.OutboxPublished
	case persistence.PurgeCommandLog:
		return c.CommandLog
	case persistence.PurgeWalletOutbox:
		return c.WalletOutbox
	case persistence.PurgeNoticeDelivery:
		return c.NoticesDelivered
	}
	return 0
}

func (s *Service) purger(table string) persistence.Purger {
	for _, p := range s.deps.Purgers {
		for _, t := range p.PurgeTables() {
			if t == table {
				return p
			}
		}
	}
	return nil
}

// consumerSource is the notice source whose cursor the table's rule waits
// for ("" = none).
func consumerSource(table string) string {
	switch table {
	case persistence.PurgeRoomOutbox:
		return persistence.SourceRoomOutbox
	case persistence.PurgeWalletOutbox:
		return persistence.SourceWalletOutbox
	}
	return ""
}

func (s *Service) request(ctx context.Context, table string, limit int) (persistence.PurgeRequest, error) {
	r := persistence.PurgeRequest{Table: table, CutoffMs: s.deps.Now().Add(-s.Retention(table)).UnixMilli(), Limit: limit}
	if src := consumerSource(table); src != "" && s.deps.Positions != nil {
		pos, err := s.deps.Positions.ConsumerPosition(ctx, src)
		if err != nil {
			return r, fmt.Errorf("read notice cursor %s: %w", src, err)
		}
		r.Consumer = pos
	}
	return r, nil
}

// Round purges every table this node holds, one after the other, and
// returns what it did. A table whose backlog outlasts retention.interval is
// left for the next round (Done false), so one table cannot starve the
// others.
func (s *Service) Round(ctx context.Context) []TableRound {
	var out []TableRound
	for _, table := range persistence.PurgeTables {
		p := s.purger(table)
		if p == nil {
			continue
		}
		tr := s.purgeTable(ctx, p, table)
		if tr.Err != nil {
			s.logError(tr)
			if s.deps.Metrics != nil {
				s.deps.Metrics.Errors.WithLabelValues(table).Inc()
			}
		}
		s.observe(ctx, p, tr)
		s.mu.Lock()
		s.last[table] = tr
		s.mu.Unlock()
		out = append(out, tr)
		if ctx.Err() != nil {
			break
		}
	}
	if s.deps.Metrics != nil && ctx.Err() == nil {
		s.deps.Metrics.Rounds.Inc()
	}
	return out
}

func (s *Service) purgeTable(ctx context.Context, p persistence.Purger, table string) TableRound {
	cfg := s.deps.Config
	start := s.deps.Now()
	tr := TableRound{Table: table, AtMs: start.UnixMilli()}
	lease, held, err := p.AcquirePurgeLease(ctx, table, s.owner, start.UnixMilli(), cfg.LeaseTTL.Milliseconds())
	if err != nil {
		tr.Err = fmt.Errorf("purge lease: %w", err)
		return tr
	}
	if !held {
		tr.Skipped, tr.Done = "lease held by another node", true
		return tr
	}
	defer lease.Release()
	r, err := s.request(ctx, table, cfg.BatchSize)
	if err != nil {
		tr.Err = err
		return tr
	}
	limiter := s.limiters[table]
	for {
		// Rows already deleted are charged to the table's limiter, even
		// by a round that ended since; the next batch waits until they
		// are paid for, so the rate holds across rounds.
		if err := limiter.WaitN(ctx, 1); err != nil {
			return tr // stopping: not an error of the table
		}
		s.mu.Lock()
		next := s.notBefore
		s.mu.Unlock()
		if err := sleep(ctx, time.Until(next)); err != nil {
			return tr
		}
		t0 := time.Now()
		res, err := p.Purge(ctx, r)
		s.mu.Lock()
		s.notBefore = time.Now().Add(YieldAfter(time.Since(t0), cfg.DutyCycle))
		s.mu.Unlock()
		if err != nil {
			tr.Err = err
			return tr
		}
		if res.Rows > 0 {
			limiter.ReserveN(time.Now(), min(res.Rows, limiter.Burst()))
		}
		tr.Batches++
		tr.Rows += int64(res.Rows)
		if s.deps.Metrics != nil && res.Rows > 0 {
			s.deps.Metrics.RowsPurged.WithLabelValues(table).Add(float64(res.Rows))
		}
		if res.Done {
			tr.Done = true
			return tr
		}
		r.After = res.Next
		if s.deps.Now().Sub(start) >= cfg.Interval {
			return tr
		}
		if err := sleep(ctx, cfg.BatchPause); err != nil {
			return tr
		}
	}
}

// YieldAfter is the pause after a batch that took took, so the purge
// spends at most duty of the wall time in its statements. The batch's
// time is the signal: on a database busy with room commands the same
// batch takes longer, so the purge slows down exactly when the appends
// need the server, and runs at its rate cap when it is idle.
func YieldAfter(took time.Duration, duty float64) time.Duration {
	if duty >= 1 || took <= 0 {
		return 0
	}
	return time.Duration(float64(took) * (1 - duty) / duty)
}

// sleep waits d (none when d <= 0) or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// observe refreshes the table's gauges after its round tr, and says when
// the purge is falling behind.
func (s *Service) observe(ctx context.Context, p persistence.Purger, tr TableRound) {
	table := tr.Table
	if s.deps.Metrics == nil || ctx.Err() != nil {
		return
	}
	ret, err := p.TableRetention(ctx, table)
	if err != nil {
		s.logError(TableRound{Table: table, Err: fmt.Errorf("table retention: %w", err)})
		return
	}
	age := int64(0)
	if ret.OldestCreatedAtMs > 0 {
		age = max(0, s.deps.Now().UnixMilli()-ret.OldestCreatedAtMs)
	}
	s.deps.Metrics.OldestAge.WithLabelValues(table).Set(float64(age) / 1000)
	s.deps.Metrics.RowEstimate.WithLabelValues(table).Set(float64(ret.RowEstimate))
	// A round that ended with rows still eligible while the oldest row is
	// twice the retention old: the purge deletes slower than rows arrive
	// (the yield of a saturated database, or a rate cap below the insert
	// rate). Said at most every behindLogEvery per table.
	if !tr.Done && tr.Err == nil && tr.Skipped == "" && time.Duration(age)*time.Millisecond > 2*s.Retention(table) {
		s.mu.Lock()
		last, seen := s.behindLog[table]
		now := s.deps.Now()
		if seen && now.Sub(last) < behindLogEvery {
			s.mu.Unlock()
			return
		}
		s.behindLog[table] = now
		s.mu.Unlock()
		s.deps.Logger.Warn("purge is falling behind: raise retention.duty_cycle or retention.rows_per_second if the database has room, or partition the table",
			slog.String("worker", WorkerName), slog.String("table", table),
			slog.Duration("oldest_row_age", time.Duration(age)*time.Millisecond), slog.Duration("retention", s.Retention(table)),
			slog.Int64("rows_purged_last_round", tr.Rows))
	}
}

// behindLogEvery bounds how often one table's falling-behind warning is
// logged.
const behindLogEvery = 10 * time.Minute

// errorLogEvery bounds how often one table's errors are logged: a
// database outage fails every round, and one line a minute says so.
const errorLogEvery = time.Minute

func (s *Service) logError(tr TableRound) {
	s.mu.Lock()
	now := s.deps.Now()
	last, seen := s.errLog[tr.Table]
	if seen && now.Sub(last) < errorLogEvery {
		s.mu.Unlock()
		return
	}
	s.errLog[tr.Table] = now
	s.mu.Unlock()
	s.deps.Logger.Error("purge round failed: retrying next round", slog.String("worker", WorkerName),
		slog.String("table", tr.Table), slog.String("error", supervise.ErrorText(tr.Err)))
}

// Status reports every purge table: its rule's cutoff, size, oldest row
// and this node's last round; with dryRun also how many rows a purge would
// delete now (it deletes nothing).
func (s *Service) Status(ctx context.Context, dryRun bool) ([]TableReport, error) {
	var out []TableReport
	var errs []error
	for _, table := range persistence.PurgeTables {
		rep := TableReport{Table: table, Retention: s.Retention(table), Purgeable: -1}
		s.mu.Lock()
		rep.Last = s.last[table]
		s.mu.Unlock()
		p := s.purger(table)
		r, err := s.request(ctx, table, persistence.MaxPurgeCount)
		rep.CutoffMs = r.CutoffMs
		if p == nil {
			out = append(out, rep)
			continue
		}
		rep.Held = true
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", table, err))
			out = append(out, rep)
			continue
		}
		ret, err := p.TableRetention(ctx, table)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", table, err))
		}
		rep.RowEstimate, rep.OldestCreatedAtMs = ret.RowEstimate, ret.OldestCreatedAtMs
		if dryRun {
			n, err := p.CountPurgeable(ctx, r)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", table, err))
			} else {
				rep.Purgeable = n
			}
		}
		out = append(out, rep)
	}
	return out, errors.Join(errs...)
}
