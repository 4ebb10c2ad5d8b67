package memdb

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/hyapp/roomcell/persistence"
)

// The command_id fence and FindCommand read the command log's id map, kept
// beside the command log. It must follow the log exactly: an append that
// aborts leaves no entry (its command_id stays free), a purged row's entry
// goes with it, and racing appends of one command_id leave one winner that
// FindCommand returns.
func TestCommandIDsFollowTheLog(t *testing.T) {
	ctx := context.Background()
	s := New()
	key := persistence.RoomKey{AppCode: "a", RoomID: "r"}
	cmd := func(seq int64, id string, events ...string) persistence.Append {
		c := persistence.CommandRecord{AppCode: key.AppCode, RoomID: key.RoomID, Seq: seq, CommandID: id, CreatedAtMs: seq}
		for _, e := range events {
			c.Events = append(c.Events, persistence.Envelope{EventID: e, AppCode: key.AppCode, RoomID: key.RoomID, RoomSeq: seq, CreatedAtMs: seq})
		}
		return persistence.Append{Command: c}
	}
	if err := s.Append(ctx, cmd(1, "c1", "e1")); err != nil {
		t.Fatal(err)
	}
	// Aborted after the command_id fence passed: event_id e1 is taken.
	if err := s.Append(ctx, cmd(2, "c2", "e1")); !errors.Is(err, persistence.ErrConflict) {
		t.Fatalf("append reusing an event_id: %v, want ErrConflict", err)
	}
	if _, err := s.FindCommand(ctx, key, "c2"); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("FindCommand of an aborted append: %v, want ErrNotFound", err)
	}
	if err := s.Append(ctx, cmd(2, "c2", "e2")); err != nil {
		t.Fatalf("the aborted append's command_id must stay free: %v", err)
	}

	// Racing appends: 8 writers, each command_id offered by several.
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := map[[2]string]int64{} // room, command_id → seq
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for i := range 200 {
				k := persistence.RoomKey{AppCode: "race", RoomID: fmt.Sprint("room-", rng.IntN(3))}
				seq := int64(w*1000 + i + 1) // seqs never collide: only command_ids do
				id := fmt.Sprint("cmd-", rng.IntN(60))
				a := cmd(seq, id)
				a.Command.AppCode, a.Command.RoomID = k.AppCode, k.RoomID
				err := s.Append(ctx, a)
				switch {
				case err == nil:
					mu.Lock()
					if prev, dup := won[[2]string{k.RoomID, id}]; dup {
						t.Errorf("command_id %s of %s written twice (seq %d and %d)", id, k.RoomID, prev, seq)
					}
					won[[2]string{k.RoomID, id}] = seq
					mu.Unlock()
				case !errors.Is(err, persistence.ErrConflict):
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	for rid, seq := range won {
		got, err := s.FindCommand(ctx, persistence.RoomKey{AppCode: "race", RoomID: rid[0]}, rid[1])
		if err != nil || got.Seq != seq {
			t.Fatalf("FindCommand %v: seq %d %v, want the winner's %d", rid, got.Seq, err, seq)
		}
	}
	if n := len(s.log.ids); n != 2+len(won) {
		t.Fatalf("command_id map holds %d entries, the log %d rows", n, 2+len(won))
	}

	// Purge below a snapshot: the purged commands' ids go with their rows.
	if err := s.SaveSnapshot(ctx, persistence.Snapshot{AppCode: key.AppCode, RoomID: key.RoomID, Seq: 2}); err != nil {
		t.Fatal(err)
	}
	res, err := s.Purge(ctx, persistence.PurgeRequest{Table: persistence.PurgeCommandLog, CutoffMs: 3, Limit: 100})
	if err != nil || res.Rows != 2 {
		t.Fatalf("purge: %+v %v, want the 2 rows of room a/r", res, err)
	}
	if n := len(s.log.ids); n != len(won) {
		t.Fatalf("after the purge the command_id map holds %d entries, the log %d rows", n, len(won))
	}
	if _, err := s.FindCommand(ctx, key, "c1"); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("FindCommand of a purged command: %v, want ErrNotFound", err)
	}
}
