package roomgrain

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence/memdb"
)

// startViewNode is startLocalNode with the grain's lease and idle timeout
// set by the test.
func startViewNode(t *testing.T, lease Lease, idle time.Duration) *Client {
	t.Helper()
	room := configs.Default().Room
	if idle > 0 {
		room.IdleTimeout = idle
	}
	return startNode(t, Deps{Store: memdb.New(), Publisher: acceptAll{}, Gifts: fixedHeat(1), Config: room, Lease: lease})
}

func rcGetSize(size int32) *v1.RoomCommand {
	return &v1.RoomCommand{Command: &v1.RoomCommand_GetRoom{GetRoom: &v1.GetRoomRequest{AppCode: "app", RoomId: "r1", PageSize: size}}}
}

// viewAnswers reports whether the client would answer rc from the room's
// published view now, and with which reply.
func viewAnswers(t *testing.T, c *Client, rc *v1.RoomCommand) (*v1.CommandReply, bool) {
	t.Helper()
	pid := c.localPid("app/r1")
	if pid == nil {
		t.Fatal("the room's grain is not cached on its node")
	}
	resp, ok := c.readView(pid, rc)
	return resp.GetReply(), ok
}

// Read your writes through the view: writers join one room while readers
// read its first page as fast as they can (so the view is published again
// after nearly every commit); every writer's read after its join was
// acknowledged shows the room at or after that join, with the writer in
// it. The view must really answer (a read with no commit since the last
// one is answered from it), and a commit withdraws it before its answer.
func TestViewReadsYourWrites(t *testing.T) {
	c := startViewNode(t, nil, 0)
	ctx := context.Background()
	if _, err := c.Execute(ctx, rcCreate("create", "owner")); err != nil {
		t.Fatal(err)
	}
	const page = 1000
	stop := make(chan struct{})
	var readers sync.WaitGroup
	var reads atomic.Int64
	for range 4 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := c.Execute(ctx, rcGetSize(page)); err != nil {
					t.Error(err)
					return
				}
				reads.Add(1)
			}
		}()
	}
	const writers, each = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				user := fmt.Sprintf("u%d-%02d", w, i)
				joined, err := c.Execute(ctx, rcJoin("c-"+user, user))
				if err != nil {
					errs <- fmt.Errorf("%s: %w", user, err)
					continue
				}
				got, err := c.Execute(ctx, rcGetSize(page))
				switch {
				case err != nil:
					errs <- fmt.Errorf("read after %s's join: %w", user, err)
				case got.GetRoomSeq() < joined.GetRoomSeq():
					errs <- fmt.Errorf("read after %s's join at seq %d shows seq %d", user, joined.GetRoomSeq(), got.GetRoomSeq())
				case !slices.Contains(got.GetRoom().GetMembers(), user):
					errs <- fmt.Errorf("read after %s's join at seq %d (seq %d) does not list them", user, joined.GetRoomSeq(), got.GetRoomSeq())
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if reads.Load() == 0 {
		t.Fatal("the readers read nothing")
	}

	// Quiet now: a read publishes, the next is answered from the view.
	last, err := c.Execute(ctx, rcGetSize(page))
	if err != nil {
		t.Fatal(err)
	}
	got, ok := viewAnswers(t, c, rcGetSize(page))
	if !ok || got != last {
		t.Fatalf("the view does not answer a read with no commit since the last (answered %v, same reply %v)", ok, got == last)
	}
	if _, ok := viewAnswers(t, c, rcGetSize(7)); ok {
		t.Fatal("the view answered another page size than the one it holds")
	}
	tok := &v1.RoomCommand{Command: &v1.RoomCommand_GetRoom{GetRoom: &v1.GetRoomRequest{AppCode: "app", RoomId: "r1", PageSize: page, PageToken: "dTAtMDA"}}}
	if _, ok := viewAnswers(t, c, tok); ok {
		t.Fatal("the view answered a later page")
	}
	joined, err := c.Execute(ctx, rcJoin("c-late", "late"))
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := viewAnswers(t, c, rcGetSize(page)); ok {
		t.Fatalf("after an acknowledged join at seq %d the view still answers (seq %d)", joined.GetRoomSeq(), got.GetRoomSeq())
	}
	after, err := c.Execute(ctx, rcGetSize(page))
	if err != nil || after.GetRoomSeq() != joined.GetRoomSeq() || !slices.Contains(after.GetRoom().GetMembers(), "late") {
		t.Fatalf("read after the late join at seq %d: %v, seq %d", joined.GetRoomSeq(), err, after.GetRoomSeq())
	}
}

// One live copy: the view answers only while the node holds the room's
// lease at the epoch its answer was built under. Under another epoch (the
// room was taken over and may have changed) or without the lease, reads
// go to the grain, which reloads or refuses as it always has.
func TestViewNeedsTheLeaseItWasBuiltUnder(t *testing.T) {
	lease := &fakeLease{epoch: 1, ok: true}
	c := startViewNode(t, lease, 0)
	ctx := context.Background()
	if _, err := c.Execute(ctx, rcCreate("create", "owner")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Execute(ctx, rcGet()); err != nil {
		t.Fatal(err)
	}
	if _, ok := viewAnswers(t, c, rcGet()); !ok {
		t.Fatal("the view does not answer under the lease it was built under")
	}
	lease.set(2, true)
	if _, ok := viewAnswers(t, c, rcGet()); ok {
		t.Fatal("the view answered under a newer lease epoch")
	}
	lease.set(1, false)
	if _, ok := viewAnswers(t, c, rcGet()); ok {
		t.Fatal("the view answered without the lease")
	}
	lease.set(1, true)
	if _, ok := viewAnswers(t, c, rcGet()); !ok {
		t.Fatal("the view does not answer once the same lease holds again")
	}
}

// A stopped grain takes its view with it, and a room read only from its
// view stays active: the reads count as activity, as they did in its
// mailbox; once they stop, the room passivates at its idle timeout.
func TestViewLivesWithItsGrain(t *testing.T) {
	const idle = 400 * time.Millisecond
	c := startViewNode(t, nil, idle)
	ctx := context.Background()
	if _, err := c.Execute(ctx, rcCreate("create", "owner")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Execute(ctx, rcGet()); err != nil {
		t.Fatal(err)
	}
	pid := c.localPid("app/r1")
	if _, ok := viewAnswers(t, c, rcGet()); !ok {
		t.Fatal("no view after a read")
	}
	registered := func() bool {
		_, ok := c.Cluster.ActorSystem.ProcessRegistry.GetLocal(pid.Id + viewSuffix)
		return ok
	}
	// Reads for three idle timeouts, all from the view.
	for end := time.Now().Add(3 * idle); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if _, ok := viewAnswers(t, c, rcGet()); !ok {
			t.Fatal("the room stopped answering from its view while read (passivated as idle?)")
		}
	}
	if _, ok := c.Cluster.ActorSystem.ProcessRegistry.GetLocal(pid.Id); !ok {
		t.Fatal("a room read from its view passivated")
	}
	// No reads: it passivates, its view with it.
	deadline := time.Now().Add(10 * idle)
	for registered() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if registered() {
		t.Fatal("the view outlived its grain's idle timeout")
	}
	if _, ok := c.Cluster.ActorSystem.ProcessRegistry.GetLocal(pid.Id); ok {
		t.Fatal("the grain is still there after its view was withdrawn")
	}
}
