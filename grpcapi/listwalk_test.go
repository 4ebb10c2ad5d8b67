package grpcapi

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
	"github.com/hyapp/roomcell/persistence/redis"
	"github.com/hyapp/roomcell/persistence/redis/redistest"
)

// heatDirectory is a directory the walk test can change heat in.
type heatDirectory interface {
	DirectoryReader
	UpdateRoom(ctx context.Context, e persistence.RoomEntry) (persistence.RankChange, error)
}

// A walk through ListRooms pages while gifts move heat lists every room
// that was ranked for the whole walk exactly once: 20 walks of 40 rooms
// in pages of 7 while another goroutine keeps reordering the ranking (an
// offset into the live ranking gave duplicates and misses here). Rooms
// created during a walk may or may not be listed; never twice.
func TestListRoomsWalkIsStableWhileHeatMoves(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) heatDirectory{
		"memdb": func(*testing.T) heatDirectory { return memdb.NewDirectory(memdb.DirectoryOptions{}) },
		"redis": func(t *testing.T) heatDirectory { return redis.Open(redistest.Config(t, ""), redis.Options{}) },
	} {
		t.Run(name, func(t *testing.T) {
			dir := open(t)
			ctx := testCtx(t)
			const rooms = 40
			entry := func(i int, heat int64) persistence.RoomEntry {
				return persistence.RoomEntry{AppCode: "walk", RoomID: fmt.Sprintf("r%02d", i), Name: "n", OwnerUserID: "o",
					MemberCount: 1, Heat: heat, UpdatedAtMs: 1}
			}
			for i := range rooms {
				if _, err := dir.UpdateRoom(ctx, entry(i, int64(i*10))); err != nil {
					t.Fatal(err)
				}
			}
			c := startDirServer(t, dir)
			var moves int
			var mu sync.Mutex
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { // the gifts: heat jumps up and down
				defer wg.Done()
				rng := rand.New(rand.NewPCG(1, 2))
				for extra := rooms; ; {
					select {
					case <-stop:
						return
					default:
					}
					if _, err := dir.UpdateRoom(ctx, entry(rng.IntN(rooms), rng.Int64N(1000))); err != nil {
						t.Error(err)
						return
					}
					if rng.IntN(20) == 0 { // a new room now and then
						if _, err := dir.UpdateRoom(ctx, entry(extra, rng.Int64N(1000))); err != nil {
							t.Error(err)
							return
						}
						extra++
					}
					mu.Lock()
					moves++
					mu.Unlock()
					time.Sleep(50 * time.Microsecond)
				}
			}()
			for walk := range 20 {
				seen := map[string]int{}
				token := ""
				for pages := 0; ; pages++ {
					r, err := c.ListRooms(ctx, &roomcellv1.ListRoomsRequest{AppCode: "walk", PageSize: 7, PageToken: token})
					if err != nil {
						t.Fatal(err)
					}
					for _, l := range r.Rooms {
						seen[l.RoomId]++
					}
					if token = r.NextPageToken; token == "" || pages > 100 {
						break
					}
					time.Sleep(time.Millisecond) // heat moves between pages
				}
				for id, n := range seen {
					if n > 1 {
						t.Errorf("walk %d listed %s %d times", walk, id, n)
					}
				}
				for i := range rooms {
					if seen[fmt.Sprintf("r%02d", i)] == 0 {
						t.Errorf("walk %d missed r%02d, ranked for the whole walk", walk, i)
					}
				}
			}
			close(stop)
			wg.Wait()
			if moves < 100 {
				t.Fatalf("only %d heat changes during the walks", moves)
			}
		})
	}
}

// A walk's token lives RoomsSnapshotTTL after its last page, then says
// to start again; a token naming no snapshot is refused the same way.
func TestListRoomsTokenExpires(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	dir := memdb.NewDirectory(memdb.DirectoryOptions{Clock: clock})
	ctx := testCtx(t)
	for i := range 5 {
		if _, err := dir.UpdateRoom(ctx, persistence.RoomEntry{AppCode: "exp", RoomID: fmt.Sprintf("r%d", i), Name: "n",
			OwnerUserID: "o", MemberCount: 1, Heat: int64(i), UpdatedAtMs: clock().UnixMilli()}); err != nil {
			t.Fatal(err)
		}
	}
	c := startDirServer(t, dir)
	page := func(tok string) (*roomcellv1.ListRoomsReply, error) {
		return c.ListRooms(ctx, &roomcellv1.ListRoomsRequest{AppCode: "exp", PageSize: 2, PageToken: tok})
	}
	r, err := page("")
	if err != nil || r.NextPageToken == "" {
		t.Fatalf("first page: %v %v", r, err)
	}
	mu.Lock()
	now = now.Add(RoomsSnapshotTTL - time.Second)
	mu.Unlock()
	if r, err = page(r.NextPageToken); err != nil || len(r.Rooms) != 2 {
		t.Fatalf("second page within the TTL: %v %v", r, err)
	}
	mu.Lock()
	now = now.Add(RoomsSnapshotTTL + time.Second)
	mu.Unlock()
	_, err = page(r.NextPageToken)
	if status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "list again from the first page") {
		t.Fatalf("expired token: %v", err)
	}
	if _, err = page("123456789.0"); status.Code(err) != codes.NotFound {
		t.Fatalf("unknown snapshot: %v", err)
	}
	if _, err = page("x.y"); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("forged token: %v", err)
	}
}
