package roomnotice

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hyapp/roomcell/actors/notice"
	"github.com/hyapp/roomcell/persistence"
)

// pausable is a room database whose reads hang while it is paused (until
// their context ends or it resumes) and fail while it is down.
type pausable struct {
	*fakeRooms
	paused atomic.Pointer[chan struct{}]
	down   atomic.Bool
}

func (p *pausable) pause() {
	ch := make(chan struct{})
	p.paused.Store(&ch)
}

func (p *pausable) resume() {
	if ch := p.paused.Swap(nil); ch != nil {
		close(*ch)
	}
}

func (p *pausable) RoomOutboxAfter(ctx context.Context, eventType string, afterMs int64, afterID string, limit int) ([]persistence.OutboxRow, error) {
	if ch := p.paused.Load(); ch != nil {
		select {
		case <-*ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if p.down.Load() {
		return nil, errors.New("connection refused")
	}
	return p.fakeRooms.RoomOutboxAfter(ctx, eventType, afterMs, afterID, limit)
}

type parts struct{ dbs []*pausable }

func (p parts) RoomOutboxAfter(context.Context, string, int64, string, int) ([]persistence.OutboxRow, error) {
	panic("the union read is not used by a PartsScanner")
}

func (p parts) Parts() ([]string, []Source) {
	return []string{"a", "b"}, []Source{p.dbs[0], p.dbs[1]}
}

func partsScan(t *testing.T, s *PartsScanner, nowMs int64) ([]string, notice.ScanResult, time.Duration) {
	t.Helper()
	start := time.Now()
	res, err := s.Scan(context.Background(), nowMs, 10)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range res.Deliveries {
		ids = append(ids, d.SourceEventID)
	}
	slices.Sort(ids)
	return ids, res, took
}

// Two room databases, one paused: the other's kicks are handed out by
// every scan within the part wait; the paused one's come once it
// resumes, each once; the cursor handed back never passes the paused
// database's position, and a database whose read fails restarts from
// its own position without holding up the other.
func TestPartsScannerPausedDatabaseDelaysOnlyItsOwnKicks(t *testing.T) {
	a, b := &pausable{fakeRooms: &fakeRooms{}}, &pausable{fakeRooms: &fakeRooms{}}
	const wait = 50 * time.Millisecond
	s := NewPartsScanner(parts{[]*pausable{a, b}}, wait, nil, WithSettle(time.Second))
	s.Reset(persistence.NoticeCursor{})
	a.commit(kick("a1", 1000, "u"))
	b.commit(kick("b1", 1001, "u"))
	if ids, _, _ := partsScan(t, s, 5000); !slices.Equal(ids, []string{"a1", "b1"}) {
		t.Fatalf("both databases answering: %v", ids)
	}

	b.pause()
	b.commit(kick("b2", 6000, "u"))
	var got []string
	for i, now := range []int64{7000, 8000, 9000} {
		a.commit(kick("a"+string(rune('2'+i)), now-500, "u"))
		ids, res, took := partsScan(t, s, now)
		if took > wait+100*time.Millisecond {
			t.Fatalf("a scan took %v while b is paused, want about the part wait %v", took, wait)
		}
		if len(ids) != 1 || ids[0][0] != 'a' {
			t.Fatalf("scan %d while b is paused handed out %v, want a's new kick", i, ids)
		}
		got = append(got, ids...)
		if bound := (persistence.NoticeCursor{Num: 5000 - 1000}); bound.Less(res.Safe) {
			t.Fatalf("cursor %+v passed b's last safe position %+v while b's kick b2 is unread", res.Safe, bound)
		}
	}
	b.resume()
	time.Sleep(10 * time.Millisecond)
	ids, _, _ := partsScan(t, s, 10_000)
	got = append(got, ids...)
	for range 3 {
		ids, _, _ := partsScan(t, s, 10_500)
		got = append(got, ids...)
	}
	slices.Sort(got)
	if want := []string{"a2", "a3", "a4", "b2"}; !slices.Equal(got, want) {
		t.Fatalf("handed out %v across the pause, want %v (each once)", got, want)
	}

	// b fails: a goes on, b restarts from its own position and loses
	// nothing.
	b.down.Store(true)
	a.commit(kick("a5", 11_000, "u"))
	b.commit(kick("b3", 11_001, "u"))
	if ids, _, _ := partsScan(t, s, 12_000); !slices.Equal(ids, []string{"a5"}) {
		t.Fatalf("b failing: %v, want a5", ids)
	}
	b.down.Store(false)
	if ids, _, _ := partsScan(t, s, 12_500); !slices.Equal(ids, []string{"b3"}) {
		t.Fatalf("b back: %v, want b3", ids)
	}

	// Both failing is the scan's error.
	a.down.Store(true)
	b.down.Store(true)
	if _, err := s.Scan(context.Background(), 13_000, 10); err == nil {
		t.Fatal("no database answered, and the scan did not fail")
	}
}
