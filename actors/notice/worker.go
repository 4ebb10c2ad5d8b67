package notice

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/hyapp/roomcell/actors/supervise"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
)

// storeTimeout bounds each store call of a round. Marks after a send run
// even when the worker is being stopped (an in-flight notice finishes with
// its mark), so they need their own deadline.
const storeTimeout = 5 * time.Second

// statsEvery throttles the store Stats query behind the gauges: it counts
// the open rows, which a backlog makes expensive to do every round.
const statsEvery = time.Second

// Deps is everything a worker uses. Store, Publisher, Module (Name,
// Source) and a complete Config (as Load gives it, or
// configs.WithDefaults) are required; Logger, Clock and Owner have
// fallbacks.
type Deps struct {
	Store     persistence.NoticeStore
	Publisher Publisher
	Module    Module
	Config    configs.NoticeWorkerConfig
	NodeID    string
	Logger    *slog.Logger // default slog.Default()
	Metrics   *Metrics     // nil: no metrics
	Clock     func() time.Time
	// Owner is the lease owner written into claimed rows and the cursor.
	// Empty: "<NodeID>/<random>". The actor sets a fresh one per
	// incarnation, so a crashed incarnation's leases expire instead of
	// being inherited.
	Owner string
}

// checked refuses missing dependencies and a Config that is not complete
// (the error names its key); it applies no configuration default, only the
// fallbacks that are not configuration.
func (d Deps) checked() (Deps, error) {
	if d.Store == nil || d.Publisher == nil || d.Module.Name == "" || d.Module.Source == "" {
		return d, errors.New("notice: Store, Publisher, Module.Name and Module.Source are required")
	}
	if err := d.Config.Validate("notice." + d.Module.Name); err != nil {
		return d, err
	}
	supervise.Fallbacks(&d.Logger, &d.Clock)
	if d.Owner == "" {
		d.Owner = supervise.LeaseOwner(d.NodeID)
	}
	return d, nil
}

// Result counts what one round did.
type Result struct {
	Scanned   int  // deliveries the scan produced (new or not)
	Ingested  int  // of those, new rows
	ScanMore  bool // the scan stopped at its limit
	Claimed   int
	Delivered int
	Retryable int // failed, will be retried
	Failed    int // failed for good: dead letters
	// Unattempted rows were claimed but released because the worker is
	// stopping.
	Unattempted int
	// StoreErrors counts marks that did not reach the store; those rows
	// come back when their lease expires (and may be sent twice).
	StoreErrors int
}

// Worker runs the rounds of one module: scan the owner outbox into the
// delivery table, claim due rows, send them, mark them. It keeps the
// scanner's in-memory position between rounds. Not safe for concurrent
// use; the actor owns one per incarnation.
type Worker struct {
	d         Deps
	held      bool // this owner held the cursor lease at the last scan
	lastStats time.Time
}

// NewWorker validates deps (a bad config names its key).
func NewWorker(deps Deps) (*Worker, error) {
	d, err := deps.checked()
	if err != nil {
		return nil, err
	}
	return &Worker{d: d}, nil
}

// Owner is the lease owner of this worker.
func (w *Worker) Owner() string { return w.d.Owner }

func (w *Worker) storeCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
}

func (w *Worker) log() *slog.Logger {
	return w.d.Logger.With(slog.String("worker", w.d.Module.Name))
}

// Round is one scan and one claim-send-mark pass. Cancelling ctx stops it
// between sends: sends in flight get the rest of send_timeout and their
// marks, claimed rows not started are released. The error is non-nil only
// when a step could not run at all (store down); per-row outcomes are
// logged and counted. A panic in the Publisher is re-raised (as a
// *supervise.PanicError with its stack) after the other sends of the
// round are settled, so the supervisor restarts the actor; the row that
// panicked keeps its lease and comes back after lock_ttl.
func (w *Worker) Round(ctx context.Context) (Result, error) {
	var res Result
	if w.d.Metrics != nil {
		w.d.Metrics.Batches.WithLabelValues(w.d.Module.Source).Inc()
	}
	defer w.refreshGauges(ctx)
	if ctx.Err() != nil {
		return res, nil
	}
	scanErr := w.scan(ctx, &res)
	if ctx.Err() != nil {
		return res, scanErr
	}
	err := w.deliver(ctx, &res)
	return res, errors.Join(scanErr, err)
}

// scan moves new facts of the owner outbox into the delivery table, under
// the source's cursor lease so that two instances do not both read it.
func (w *Worker) scan(ctx context.Context, res *Result) error {
	sc := w.d.Module.Scanner
	if sc == nil {
		return nil
	}
	src := w.d.Module.Source
	now := w.d.Clock()
	cctx, cancel := w.storeCtx(ctx)
	cur, held, err := w.d.Store.ClaimCursor(cctx, src, w.d.Owner, now.UnixMilli(), w.d.Config.LockTTL.Milliseconds())
	cancel()
	if err != nil {
		w.held = false
		return fmt.Errorf("notice: %s: claim scan cursor: %w", src, err)
	}
	if !held {
		// Another instance scans; this one only delivers.
		w.held = false
		return nil
	}
	if !w.held {
		// First scan of this owner, or the lease came back from someone
		// else: start from what is stored, not from our old position.
		sc.Reset(cur)
		w.held = true
	}
	sctx, cancel := w.storeCtx(ctx)
	// Twice a claim: the instance holding the scan lease would otherwise
	// ingest only what it claims itself, and the others would starve.
	sr, err := sc.Scan(sctx, now.UnixMilli(), 2*w.d.Config.BatchSize)
	cancel()
	if err != nil {
		w.held = false // the scanner's state is unknown: restart it from the store
		return fmt.Errorf("notice: %s: scan: %w", src, err)
	}
	res.Scanned, res.ScanMore = len(sr.Deliveries), sr.More
	for i := range sr.Deliveries {
		if sr.Deliveries[i].Ingress == "" {
			sr.Deliveries[i].Ingress = persistence.IngressPoll
		}
	}
	if len(sr.Deliveries) > 0 {
		ictx, cancel := w.storeCtx(ctx)
		n, err := w.d.Store.Ingest(ictx, sr.Deliveries, w.d.Clock().UnixMilli())
		cancel()
		if err != nil {
			w.held = false
			return fmt.Errorf("notice: %s: ingest: %w", src, err)
		}
		res.Ingested = n
		if w.d.Metrics != nil {
			w.d.Metrics.Ingested.WithLabelValues(src, persistence.IngressPoll).Add(float64(n))
		}
		for _, d := range sr.Deliveries {
			if d.Status == persistence.NoticeFailed {
				w.log().Error("notice source event is corrupt: recorded as a dead letter",
					slog.String("source_event_id", d.SourceEventID), slog.String("event_type", d.EventType),
					slog.String("status", persistence.NoticeFailed), slog.String("error", d.LastError))
			}
		}
	}
	sctx, cancel = w.storeCtx(ctx)
	err = w.d.Store.SaveCursor(sctx, src, w.d.Owner, sr.Safe, w.d.Clock().UnixMilli())
	cancel()
	if err != nil {
		// Costs only a rescan (ingest ignores what it has).
		w.log().Warn("notice scan cursor not saved", slog.String("error", supervise.ErrorText(err)))
	}
	return nil
}

// outcome is the result of one send.
type outcome struct {
	row     persistence.NoticeDelivery
	err     error
	started bool
	took    time.Duration
}

func (w *Worker) deliver(ctx context.Context, res *Result) error {
	cfg := w.d.Config
	now := w.d.Clock()
	cctx, cancel := w.storeCtx(ctx)
	rows, err := w.d.Store.Claim(cctx, w.d.Module.Source, w.d.Owner, now.UnixMilli(), cfg.LockTTL.Milliseconds(), cfg.BatchSize)
	cancel()
	if err != nil {
		return fmt.Errorf("notice: %s: claim: %w", w.d.Module.Source, err)
	}
	res.Claimed = len(rows)
	if len(rows) == 0 {
		return nil
	}
	outs := w.sendAll(ctx, rows)
	var panicked any
	var ok []persistence.NoticeKey
	var okRows []persistence.NoticeDelivery
	var unstarted []persistence.NoticeKey
	for _, o := range outs {
		switch {
		case !o.started:
			unstarted = append(unstarted, o.row.NoticeKey)
		case o.err == nil:
			ok = append(ok, o.row.NoticeKey)
			okRows = append(okRows, o.row)
		default:
			var pe *supervise.PanicError
			if errors.As(o.err, &pe) {
				// The row keeps its lease: it comes back after lock_ttl
				// instead of crash-looping the worker.
				panicked = pe
				continue
			}
			w.fail(ctx, res, o.row, o.err)
		}
	}
	if len(ok) > 0 {
		mctx, cancel := w.storeCtx(ctx)
		err := w.d.Store.MarkDelivered(mctx, ok, w.d.Clock().UnixMilli())
		cancel()
		if err != nil {
			res.StoreErrors += len(ok)
			w.log().Error("notice mark delivered failed: the rows will be sent again after their lease",
				slog.Int("rows", len(ok)), slog.String("error", supervise.ErrorText(err)))
		} else {
			res.Delivered += len(ok)
			w.delivered(okRows)
		}
	}
	if len(unstarted) > 0 {
		res.Unattempted += len(unstarted)
		rctx, cancel := w.storeCtx(ctx)
		if err := w.d.Store.Release(rctx, unstarted, w.d.Owner, w.d.Clock().UnixMilli()); err != nil {
			w.log().Warn("notice release failed: the rows wait for their lease to expire",
				slog.Int("rows", len(unstarted)), slog.String("error", supervise.ErrorText(err)))
		}
		cancel()
	}
	if panicked != nil {
		supervise.Repanic(panicked)
	}
	return nil
}

// sendAll sends the claimed rows with send_concurrency lanes. The rows of
// one user share a lane, in claim order, so a user's notices of one claim
// are not sent in parallel. Claims are ordered by due time only, and
// retries reorder anyway: clients order by balance_version and drop older
// notices (docs/client-protocol.md), which is what makes order optional.
func (w *Worker) sendAll(ctx context.Context, rows []persistence.NoticeDelivery) []outcome {
	lanes := min(w.d.Config.SendConcurrency, len(rows))
	byLane := make([][]int, lanes)
	for i, r := range rows {
		h := fnv.New32a()
		h.Write([]byte(r.AppCode))
		h.Write([]byte{0})
		h.Write([]byte(r.UserID))
		l := int(h.Sum32() % uint32(lanes))
		byLane[l] = append(byLane[l], i)
	}
	outs := make([]outcome, len(rows))
	for i, r := range rows {
		outs[i].row = r
	}
	var wg sync.WaitGroup
	for _, idx := range byLane {
		if len(idx) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, i := range idx {
				if ctx.Err() != nil {
					return
				}
				outs[i].started = true
				start := time.Now()
				outs[i].err = w.sendOne(ctx, outs[i].row)
				outs[i].took = time.Since(start)
			}
		}()
	}
	wg.Wait()
	if w.d.Metrics != nil {
		h := w.d.Metrics.SendLatency.WithLabelValues(w.d.Module.Source)
		for _, o := range outs {
			if o.started {
				h.Observe(o.took.Seconds())
			}
		}
	}
	return outs
}

// sendOne sends one notice with its own send_timeout. A panic in the
// publisher comes back as a *supervise.PanicError.
func (w *Worker) sendOne(ctx context.Context, d persistence.NoticeDelivery) (err error) {
	if d.UserID == "" || d.Ext == "" || len(d.Payload) == 0 {
		return fmt.Errorf("%w: row has no user, ext or payload", ErrCorruptSource)
	}
	defer func() {
		if r := recover(); r != nil {
			if pe, ok := r.(*supervise.PanicError); ok {
				err = pe
				return
			}
			// Still in the panicking goroutine: this is its stack.
			err = &supervise.PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	// The send may finish after a stop request (an in-flight notice
	// completes), so it only inherits ctx's values.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.d.Config.SendTimeout)
	defer cancel()
	return w.d.Publisher.SendNotice(sctx, d.AppCode, d.UserID, d.Ext, d.Payload, d.SourceEventID)
}

// fail records one failed attempt: retryable with a backoff, or failed
// after max_retry_count retries (or at once for a row that can never be
// sent).
func (w *Worker) fail(ctx context.Context, res *Result, d persistence.NoticeDelivery, cause error) {
	cfg := w.d.Config
	text := supervise.ErrorText(cause)
	n := d.RetryCount + 1
	now := w.d.Clock()
	dead := n > cfg.MaxRetryCount || errors.Is(cause, ErrCorruptSource)
	log := w.log().With(slog.String("source_event_id", d.SourceEventID), slog.String("event_type", d.EventType),
		slog.String("app_code", d.AppCode), slog.String("user_id", d.UserID), slog.Int("retry_count", n),
		slog.String("error", text))
	mctx, cancel := w.storeCtx(ctx)
	defer cancel()
	var err error
	if dead {
		err = w.d.Store.MarkFailed(mctx, d.NoticeKey, w.d.Owner, n, text, now.UnixMilli())
	} else {
		next := now.Add(Backoff(cfg, n))
		err = w.d.Store.MarkRetryable(mctx, d.NoticeKey, w.d.Owner, n, text, next.UnixMilli(), now.UnixMilli())
		log = log.With(slog.Time("next_retry_at", next))
	}
	if err != nil {
		res.StoreErrors++
		log.Error("notice failure not recorded: the row comes back after its lease", slog.String("store_error", supervise.ErrorText(err)))
		return
	}
	if dead {
		res.Failed++
		if w.d.Metrics != nil {
			w.d.Metrics.Failed.WithLabelValues(w.d.Module.Source).Inc()
		}
		log.Error("notice failed for good: dead letter (roomctl notice requeue to retry)", slog.String("status", persistence.NoticeFailed))
		return
	}
	res.Retryable++
	if w.d.Metrics != nil {
		w.d.Metrics.Retryable.WithLabelValues(w.d.Module.Source).Inc()
	}
	log.Warn("notice send failed: retrying after backoff", slog.String("status", persistence.NoticeRetryable))
}

func (w *Worker) delivered(rows []persistence.NoticeDelivery) {
	now := w.d.Clock()
	for _, d := range rows {
		if w.d.Metrics != nil {
			w.d.Metrics.Delivered.WithLabelValues(w.d.Module.Source).Inc()
			if d.SourceCreatedAtMs > 0 {
				w.d.Metrics.DeliveryLag.WithLabelValues(w.d.Module.Source).Observe(float64(max(0, now.UnixMilli()-d.SourceCreatedAtMs)) / 1000)
			}
		}
		// A compensation after failures is news; a first-try success is
		// not.
		level := slog.LevelDebug
		if d.RetryCount > 0 {
			level = slog.LevelInfo
		}
		w.log().Log(context.Background(), level, "notice delivered", slog.String("source_event_id", d.SourceEventID),
			slog.String("event_type", d.EventType), slog.String("user_id", d.UserID),
			slog.Int("retry_count", d.RetryCount), slog.String("status", persistence.NoticeDelivered))
	}
}

func (w *Worker) refreshGauges(ctx context.Context) {
	if w.d.Metrics == nil || time.Since(w.lastStats) < statsEvery {
		return
	}
	w.lastStats = time.Now()
	sctx, cancel := w.storeCtx(ctx)
	defer cancel()
	now := w.d.Clock().UnixMilli()
	st, err := w.d.Store.Stats(sctx, w.d.Module.Source, now)
	if err != nil {
		w.log().Warn("notice stats failed", slog.String("error", supervise.ErrorText(err)))
		return
	}
	src := w.d.Module.Source
	age := 0.0
	if st.OldestDueMs > 0 {
		age = float64(max(0, now-st.OldestDueMs)) / 1000
	}
	w.d.Metrics.OldestDueAge.WithLabelValues(src).Set(age)
	w.d.Metrics.DeadLetters.WithLabelValues(src).Set(float64(st.Failed))
	w.d.Metrics.Open.WithLabelValues(src).Set(float64(st.Delivering + st.Retryable))
}
