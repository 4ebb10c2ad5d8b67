package roomnotice

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/hyapp/roomcell/actors/notice"
	"github.com/hyapp/roomcell/persistence"
)

// PartedSource is a Source over several room databases that can hand out
// one reader per database (persistence/shardmap.RoomOutboxes). The
// module scans each on its own (PartsScanner), so a database that is slow
// or down holds up only the kicks of its own rooms.
type PartedSource interface {
	Source
	// Parts are the databases' keys and readers, in the same order.
	Parts() (keys []string, readers []Source)
}

// Bounds of a PartsScanner.
const (
	// DefaultPartWait is how long a scan waits for the databases' reads
	// before it hands out what the others returned; a read still running
	// then is picked up by a later scan.
	DefaultPartWait = 200 * time.Millisecond
	// partTimeout ends a database's read that its store did not bound.
	partTimeout = 30 * time.Second
)

// PartsScanner scans room_outbox of several room databases, each with a
// Scanner of its own (its own position and late-commit window), in
// parallel. A scan hands out what every database read within the part
// wait returned; a database whose read takes longer (paused, dialling a
// server that is down) keeps it running and its rows come with a later
// scan, so the other databases' kicks are never held behind it. A
// database whose read fails restarts from its own last safe position.
//
// The cursor it hands back (Safe) is the earliest of the databases' safe
// positions: every kick at or before it in every database has been
// handed out, the same meaning as one scan over their union, so the
// stored cursor, the purge's wait for it and a restart read it as
// before. A database that is down holds that cursor back (a restart
// rereads the others from there; ingest ignores what it has), never
// their deliveries.
type PartsScanner struct {
	parts []*part
	wait  time.Duration
	log   *slog.Logger
}

type part struct {
	key  string
	sc   *Scanner
	safe persistence.NoticeCursor // every row of this database at or before it was handed out
	// running carries the result of the read in flight; nil when none.
	running chan partResult
	// reset is a Reset that came while a read was in flight: it applies
	// when the read ends (whose result is dropped).
	reset   *persistence.NoticeCursor
	failing bool
}

type partResult struct {
	res notice.ScanResult
	err error
}

// NewPartsScanner returns the scanner of src's parts; log gets a line
// when a database's reads start failing and when they recover (nil:
// slog.Default()).
func NewPartsScanner(src PartedSource, wait time.Duration, log *slog.Logger, opts ...Option) *PartsScanner {
	if wait <= 0 {
		wait = DefaultPartWait
	}
	if log == nil {
		log = slog.Default()
	}
	keys, readers := src.Parts()
	m := &PartsScanner{wait: wait, log: log}
	for i, r := range readers {
		m.parts = append(m.parts, &part{key: keys[i], sc: NewScanner(r, opts...)})
	}
	return m
}

// Reset implements notice.Scanner: every database restarts at from.
func (m *PartsScanner) Reset(from persistence.NoticeCursor) {
	for _, p := range m.parts {
		p.safe = from
		if p.running != nil {
			c := from
			p.reset = &c
			continue
		}
		p.sc.Reset(from)
	}
}

// Scan implements notice.Scanner. It fails only when no database's read
// succeeded and one failed.
func (m *PartsScanner) Scan(ctx context.Context, nowMs int64, limit int) (notice.ScanResult, error) {
	for _, p := range m.parts {
		if p.running == nil {
			ch := make(chan partResult, 1)
			p.running = ch
			sc := p.sc
			go func() {
				pctx, cancel := context.WithTimeout(context.Background(), partTimeout)
				defer cancel()
				r, err := sc.Scan(pctx, nowMs, limit)
				ch <- partResult{r, err}
			}()
		}
	}
	timer := time.NewTimer(m.wait)
	defer timer.Stop()
	var res notice.ScanResult
	var errs []error
	ok := 0
	expired := false
	for _, p := range m.parts {
		var r partResult
		if expired {
			select {
			case r = <-p.running:
			default:
				continue
			}
		} else {
			select {
			case r = <-p.running:
			case <-timer.C:
				expired = true
				continue
			case <-ctx.Done():
				expired = true
				continue
			}
		}
		p.running = nil
		if p.reset != nil {
			// Reset while the read ran: its result is of the old position.
			p.sc.Reset(*p.reset)
			p.reset = nil
			continue
		}
		if r.err != nil {
			errs = append(errs, persistence.InRoomDB(p.key, r.err))
			p.sc.Reset(p.safe) // its state is unknown: from its last safe position
			if !p.failing {
				p.failing = true
				m.log.Warn("room notice scan of one room database failing; the others go on", "room_db", p.key, "error", r.err)
			}
			continue
		}
		if p.failing {
			p.failing = false
			m.log.Info("room notice scan of the room database recovered", "room_db", p.key)
		}
		ok++
		p.safe = r.res.Safe
		res.Deliveries = append(res.Deliveries, r.res.Deliveries...)
		res.More = res.More || r.res.More
	}
	if ok == 0 && len(errs) > 0 {
		return notice.ScanResult{}, errors.Join(errs...)
	}
	res.Safe = m.parts[0].safe
	for _, p := range m.parts[1:] {
		if p.safe.Less(res.Safe) {
			res.Safe = p.safe
		}
	}
	return res, nil
}
