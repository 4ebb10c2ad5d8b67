package memdb

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hyapp/roomcell/persistence"
)

// Appends written together in one transaction still fail alone: many
// writers race for the same seqs, command ids and event ids of a few
// rooms, and each (room, seq), command_id and event_id has exactly one
// winner, whose rows are all stored, while no loser wrote anything.
func TestGroupedAppendsFailAlone(t *testing.T) {
	s := New()
	const writers, rooms, seqs = 32, 4, 40
	var wins [rooms][seqs + 1]atomic.Int32
	var idWins sync.Map // command_id -> winner count
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rooms * seqs {
				r, seq := i%rooms, int64(i/rooms+1)
				room := fmt.Sprintf("r%d", r)
				// Writers in pairs share command ids: a pair's second
				// append of an id must lose even at another seq.
				cmdID := fmt.Sprintf("c-%d-%d-%d", r, seq, w/2)
				ev := fmt.Sprintf("%s:%d:%d", room, seq, w%3) // event ids collide across writers
				a := persistence.Append{Command: persistence.CommandRecord{AppCode: "a", RoomID: room, Seq: seq, CommandID: cmdID,
					CommandType: "JoinRoom", CreatedAtMs: 1, Events: []persistence.Envelope{
						{EventID: ev, EventType: "RoomUserJoined", AppCode: "a", RoomID: room, RoomSeq: seq, CreatedAtMs: 1, Payload: []byte("{}")},
					}}}
				err := s.Append(t.Context(), a)
				switch {
				case err == nil:
					wins[r][seq].Add(1)
					n, _ := idWins.LoadOrStore(cmdID, new(atomic.Int32))
					n.(*atomic.Int32).Add(1)
				case !errors.Is(err, persistence.ErrConflict):
					t.Errorf("append %s seq %d: %v", room, seq, err)
				}
			}
		}()
	}
	wg.Wait()
	s.writes.mu.Lock()
	largest := s.writes.largest
	s.writes.mu.Unlock()
	if largest < 2 {
		t.Fatalf("no two appends were written together (largest group %d): the test did not test groups", largest)
	}
	t.Logf("largest group: %d appends", largest)
	events := 0
	for r := range rooms {
		key := persistence.RoomKey{AppCode: "a", RoomID: fmt.Sprintf("r%d", r)}
		log, err := s.LoadCommands(t.Context(), key, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(log) != seqs {
			t.Fatalf("room %s: %d log rows, want %d", key.RoomID, len(log), seqs)
		}
		for i, rec := range log {
			if rec.Seq != int64(i+1) || wins[r][rec.Seq].Load() != 1 {
				t.Fatalf("room %s seq %d: log row %d, %d winners", key.RoomID, rec.Seq, i, wins[r][rec.Seq].Load())
			}
			found, err := s.FindCommand(t.Context(), key, rec.CommandID)
			if err != nil || found.Seq != rec.Seq {
				t.Fatalf("FindCommand %s: %+v %v", rec.CommandID, found, err)
			}
			for _, e := range rec.Events {
				row, err := s.GetOutbox(t.Context(), e.EventID)
				if err != nil || row.Envelope.RoomSeq != rec.Seq {
					t.Fatalf("outbox row %s of seq %d: %+v %v", e.EventID, rec.Seq, row, err)
				}
				events++
			}
		}
	}
	idWins.Range(func(k, v any) bool {
		if n := v.(*atomic.Int32).Load(); n > 1 {
			t.Errorf("command_id %v won %d times", k, n)
		}
		return true
	})
	stats, err := s.OutboxStats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if int(stats.Pending) != events {
		t.Fatalf("%d pending outbox rows, the winners wrote %d events", stats.Pending, events)
	}
}

// A write that panics answers every op of its group with an error and
// leaves the group taking writes; an op that fails after it wrote has its
// group written again, an op per transaction, so the others still land.
func TestWriteGroupSurvivesPanicsAndDirtyOps(t *testing.T) {
	s := New()
	g := &s.writes
	if err := g.do(func(*groupTxn) error { panic("boom") }); !errors.Is(err, persistence.ErrUnavailable) {
		t.Fatalf("panicking write: %v", err)
	}
	snap := func(room string) writeOp {
		return func(b *groupTxn) error {
			return saveSnapshot(b.Txn, persistence.Snapshot{AppCode: "a", RoomID: room, Seq: 1, State: []byte("s")})
		}
	}
	dirty := func(b *groupTxn) error {
		if err := snap("dirty")(b); err != nil {
			return err
		}
		b.dirty = true
		return errors.New("failed after writing")
	}
	// One call leads; the others queue behind its write and are written
	// together.
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i == 3 {
				errs[i] = g.do(dirty)
				return
			}
			errs[i] = g.do(snap(fmt.Sprintf("r%d", i)))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if (i == 3) != (err != nil) {
			t.Fatalf("op %d: %v", i, err)
		}
		room := fmt.Sprintf("r%d", i)
		if i == 3 {
			room = "dirty"
		}
		_, err := s.LoadSnapshot(t.Context(), persistence.RoomKey{AppCode: "a", RoomID: room})
		if (i == 3) != errors.Is(err, persistence.ErrNotFound) {
			t.Fatalf("snapshot of op %d (%s): %v", i, room, err)
		}
	}
}

// A group's staged rows are found the same whether the checks scan them
// (up to stagedScan) or read the maps made past it: every staged seq,
// command_id and event_id is taken, and a neighbour of each (another
// room, seq, id or event) is not.
func TestGroupStagedRowsFoundByScanAndByMap(t *testing.T) {
	for _, n := range []int{0, 1, stagedScan - 1, stagedScan, stagedScan + 1, 3 * stagedScan} {
		b := &groupTxn{}
		for i := range n {
			c := &persistence.CommandRecord{AppCode: "a", RoomID: fmt.Sprintf("r%d", i%3), Seq: int64(i + 1), CommandID: fmt.Sprintf("c%d", i)}
			b.stageLog(c)
			b.stageOutbox(&outboxEntry{Envelope: &persistence.Envelope{EventID: fmt.Sprintf("e%d", i)}})
		}
		if mapped := b.seqs != nil; mapped != (n > stagedScan) || (b.eventIDs != nil) != mapped {
			t.Fatalf("%d rows: maps made %v, want %v", n, mapped, n > stagedScan)
		}
		for i := range n + 2 {
			room, staged := fmt.Sprintf("r%d", i%3), i < n
			id := fmt.Sprintf("c%d", i)
			// The seq and the id apart: neither answers for the other.
			if seq, cid := b.logStaged(&persistence.CommandRecord{AppCode: "a", RoomID: room, Seq: int64(i + 1), CommandID: "other"}); seq != staged || cid {
				t.Fatalf("%d rows: seq %d of %s staged %v (id %v), want %v (false)", n, i+1, room, seq, cid, staged)
			}
			if seq, cid := b.logStaged(&persistence.CommandRecord{AppCode: "a", RoomID: room, Seq: -1, CommandID: id}); cid != staged || seq {
				t.Fatalf("%d rows: command %s staged %v (seq %v), want %v (false)", n, id, cid, seq, staged)
			}
			for _, other := range []string{room + "x", "b"} {
				app, rm := "a", other
				if other == "b" {
					app, rm = "b", room
				}
				if seq, cid := b.logStaged(&persistence.CommandRecord{AppCode: app, RoomID: rm, Seq: int64(i + 1), CommandID: id}); seq || cid {
					t.Fatalf("%d rows: seq %d or %s found in %s/%s", n, i+1, id, app, rm)
				}
			}
			if got := b.eventStaged(fmt.Sprintf("e%d", i)); got != staged {
				t.Fatalf("%d rows: event e%d staged %v, want %v", n, i, got, staged)
			}
		}
	}
}
