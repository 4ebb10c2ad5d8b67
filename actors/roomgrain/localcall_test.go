package roomgrain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	pcluster "github.com/asynkron/protoactor-go/cluster"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/cluster"
	grainkind "github.com/hyapp/roomcell/cluster/kind"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
)

// acceptAll takes every event at once (the IM side is not what these
// tests look at).
type acceptAll struct{}

func (acceptAll) PublishRoomEvent(context.Context, persistence.Envelope) error { return nil }

// stallingStore holds appends between hold and release: a room whose
// grain is busy and cannot answer.
type stallingStore struct {
	*memdb.Store
	mu    sync.Mutex
	stall chan struct{} // non-nil: appends wait for it to close
}

func (s *stallingStore) Append(ctx context.Context, a persistence.Append) error {
	s.mu.Lock()
	stall := s.stall
	s.mu.Unlock()
	if stall != nil {
		<-stall
	}
	return s.Store.Append(ctx, a)
}

func (s *stallingStore) hold() {
	s.mu.Lock()
	s.stall = make(chan struct{})
	s.mu.Unlock()
}

func (s *stallingStore) release() {
	s.mu.Lock()
	close(s.stall)
	s.stall = nil
	s.mu.Unlock()
}

// startLocalNode is a single cluster member serving room grains over
// store, and a client on it.
func startLocalNode(t *testing.T, store Store) *Client {
	t.Helper()
	return startNode(t, Deps{Store: store, Publisher: acceptAll{}, Gifts: fixedHeat(1), Config: configs.Default().Room})
}

// startNode is a single cluster member serving room grains with deps,
// and a client on it.
func startNode(t *testing.T, deps Deps) *Client {
	t.Helper()
	cfg := configs.Default()
	cfg.Cluster.Port = 0
	m, err := cluster.Start(cluster.Options{Config: cfg.Cluster, Kinds: []*pcluster.Kind{grainkind.New(Kind, GrainProps(deps))}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Stop(false) })
	return &Client{Cluster: m.Cluster, AttemptTimeout: 5 * time.Second}
}

func joinedUser(t *testing.T, reply *v1.CommandReply) string {
	t.Helper()
	if len(reply.GetEvents()) != 1 {
		t.Fatalf("join reply has %d events", len(reply.GetEvents()))
	}
	p := reply.GetEvents()[0].GetPayload()
	i := strings.Index(p, `"user_id":"`)
	if i < 0 {
		t.Fatalf("join event without user_id: %s", p)
	}
	rest := p[i+len(`"user_id":"`):]
	return rest[:strings.IndexByte(rest, '"')]
}

// Many callers at once through one client to a grain of its own node
// (the direct path, localcall.go): each gets its own command's answer,
// never another's, and every join is in the room.
func TestLocalRequestsGetTheirOwnAnswers(t *testing.T) {
	c := startLocalNode(t, memdb.New())
	ctx := context.Background()
	if _, err := c.Execute(ctx, rcCreate("create", "owner")); err != nil {
		t.Fatal(err)
	}
	if c.localPid("app/r1") == nil {
		t.Fatal("the room's grain is not in the PID cache after a command: the direct path is not taken")
	}
	const callers, each = 16, 25
	var wg sync.WaitGroup
	errs := make(chan error, callers*each)
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				user := fmt.Sprintf("u%d-%d", g, i)
				reply, err := c.Execute(ctx, rcJoin("c-"+user, user))
				if err != nil {
					errs <- fmt.Errorf("%s: %w", user, err)
					continue
				}
				if got := joinedUser(t, reply); got != user {
					errs <- fmt.Errorf("%s was answered with %s's join", user, got)
				}
				// A read between writes gets a GetRoom answer, not a join's.
				get, err := c.Execute(ctx, &v1.RoomCommand{Command: &v1.RoomCommand_GetRoom{GetRoom: &v1.GetRoomRequest{AppCode: "app", RoomId: "r1"}}})
				if err != nil || get.GetRoom() == nil || len(get.GetEvents()) != 0 || get.GetRoomSeq() < reply.GetRoomSeq() {
					errs <- fmt.Errorf("GetRoom after %s's join at seq %d: %v, seq %d, %d events", user, reply.GetRoomSeq(), err, get.GetRoomSeq(), len(get.GetEvents()))
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	get, err := c.Execute(ctx, &v1.RoomCommand{Command: &v1.RoomCommand_GetRoom{GetRoom: &v1.GetRoomRequest{AppCode: "app", RoomId: "r1"}}})
	if err != nil {
		t.Fatal(err)
	}
	if n := get.GetRoom().GetMemberCount(); n != callers*each+1 {
		t.Fatalf("room has %d members, want %d", n, callers*each+1)
	}
	c.replies.mu.Lock()
	left := len(c.replies.waiting)
	c.replies.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d requests still wait for an answer after all were answered", left)
	}
}

// A request sent directly to a grain that has stopped (its PID still
// cached) comes back from the dead letters at once: the client drops the
// cached PID and the retry activates the room again, well inside the
// attempt's timeout.
func TestLocalRequestToStoppedGrainIsRetried(t *testing.T) {
	c := startLocalNode(t, memdb.New())
	ctx := context.Background()
	if _, err := c.Execute(ctx, rcCreate("create", "owner")); err != nil {
		t.Fatal(err)
	}
	old := c.localPid("app/r1")
	if old == nil {
		t.Fatal("no cached local grain")
	}
	if err := c.Cluster.ActorSystem.Root.StopFuture(old).Wait(); err != nil {
		t.Fatal(err)
	}
	c.Cluster.PidCache.Set("app/r1", Kind, old) // as if its stop had not reached the cache yet
	start := time.Now()
	reply, err := c.Execute(ctx, rcJoin("c-late", "late"))
	if err != nil {
		t.Fatalf("join after the grain stopped: %v", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("answered after %v: the dead letter was not seen (attempt timeout 5s)", took)
	}
	if got := joinedUser(t, reply); got != "late" {
		t.Fatalf("answered with %s's join", got)
	}
	if now := c.localPid("app/r1"); now == nil || now.Equal(old) {
		t.Fatalf("cached grain %v, want a new activation (old %v)", now, old)
	}
}

// ExecuteWithin bounds the whole call by within, where the caller's
// context has no deadline of its own (grpcapi's command timeout): a room
// whose grain cannot answer is refused as unavailable after about
// within, not after the client's 5 s default. The answer it sends once
// it can is dropped, and the next request gets its own.
func TestExecuteWithinBoundsTheCall(t *testing.T) {
	store := &stallingStore{Store: memdb.New()}
	c := startLocalNode(t, store)
	c.AttemptTimeout = 200 * time.Millisecond
	ctx := context.Background()
	if _, err := c.Execute(ctx, rcCreate("create", "owner")); err != nil {
		t.Fatal(err)
	}
	store.hold()
	start := time.Now()
	_, err := c.ExecuteWithin(ctx, rcJoin("c-held", "held"), 700*time.Millisecond)
	took := time.Since(start)
	store.release()
	if !errors.Is(err, errclass.Unavailable) {
		t.Fatalf("held join: %v, want unavailable", err)
	}
	if took < 600*time.Millisecond || took > 2*time.Second {
		t.Fatalf("held join refused after %v, want about 700ms", took)
	}
	reply, err := c.ExecuteWithin(ctx, rcJoin("c-next", "next"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := joinedUser(t, reply); got != "next" {
		t.Fatalf("next join answered with %s's join", got)
	}
}
