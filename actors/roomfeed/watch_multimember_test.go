//go:build !race

// Two cluster members in one process (see multimember_test.go for why
// this file is built only without -race).

package roomfeed

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hyapp/roomcell/actors/roomgrain"
	"github.com/hyapp/roomcell/persistence/memdb"
)

// A watcher on one member follows a room owned by the other; the owner
// leaves (drained) or dies (killed): the stream ends with its resume seq,
// the watcher resumes on the member that is left, and the two parts
// together are the room's log, in order, without a gap or a duplicate.
func TestMultiMemberWatchResumesAcrossAnOwnerChange(t *testing.T) {
	for _, graceful := range []bool{true, false} {
		t.Run(fmt.Sprintf("graceful=%v", graceful), func(t *testing.T) {
			store := memdb.New()
			a, b := startTwoMembers(t, store)
			defer b.Stop(true)
			defer a.Stop(false)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cb := Client{&roomgrain.Client{Cluster: b.Cluster, AttemptTimeout: 2 * time.Second}}
			nb := &eventsNode{store: store, member: b, client: cb}
			// A room whose grain lives on a.
			roomID := ""
			for i := range 40 {
				id := fmt.Sprint("m", i)
				nb.do(t, createCmd(id, "c0"))
				if pid := b.Cluster.Get("app/"+id, roomgrain.Kind); pid != nil && pid.Address == a.Cluster.ActorSystem.Address() {
					roomID = id
					break
				}
			}
			if roomID == "" {
				t.Fatal("no room placed on member a")
			}
			w := &Watcher{Client: cb, CheckInterval: 300 * time.Millisecond}
			got := &collect{}
			ended := make(chan error, 1)
			go func() { ended <- w.Watch(ctx, "app", roomID, 0, got.send) }()
			seq := 1
			cmd := func() {
				seq++
				if seq%2 == 0 {
					nb.do(t, joinCmd(roomID, fmt.Sprint("c", seq), "bob"))
				} else {
					nb.do(t, leaveCmd(roomID, fmt.Sprint("c", seq), "bob"))
				}
			}
			for range 20 {
				cmd()
			}
			for got.last() < int64(seq) {
				if ctx.Err() != nil {
					t.Fatalf("watcher at %d of %d", got.last(), seq)
				}
				time.Sleep(10 * time.Millisecond)
			}
			go a.Stop(graceful)
			var we *WatchEndedError
			select {
			case err := <-ended:
				if !errors.As(err, &we) || we.ResumeAfter != got.last() {
					t.Fatalf("owner gone: the watch ended with %v (last sent %d)", err, got.last())
				}
				t.Logf("ended: %v", err)
			case <-time.After(30 * time.Second):
				t.Fatal("the watch outlived its room's owner")
			}
			// Resume on b while the room moves there and takes commands.
			done := make(chan error, 1)
			go func() {
				for {
					err := w.Watch(ctx, "app", roomID, we.ResumeAfter, got.send)
					if !errors.As(err, &we) {
						done <- err
						return
					}
					time.Sleep(50 * time.Millisecond) // the room is still moving
				}
			}()
			for range 20 {
				cmd()
			}
			for got.last() < int64(seq) {
				if ctx.Err() != nil {
					t.Fatalf("resumed watcher at %d of %d", got.last(), seq)
				}
				time.Sleep(10 * time.Millisecond)
			}
			cancel()
			<-done
			got.check(t, "across the owner change", logEventIDs(t, store, roomID, 0))
		})
	}
}
