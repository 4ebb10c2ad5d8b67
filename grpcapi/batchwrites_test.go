package grpcapi

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hyapp/roomcell/api/roomcellv1"
)

// countingListener counts the writes that reach its connections.
type countingListener struct {
	net.Listener
	writes *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{Conn: c, writes: l.writes}, nil
}

type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// getRoomWrites serves GetRoom answers of a 100-member room (~1.3 KB,
// above grpc-go's own batching threshold) to 32 concurrent callers, each
// asking for rooms of its own, and returns the server's writes per call.
// Every answer must be the one its call asked for: the room it named,
// all its members, in order.
func getRoomWrites(t *testing.T, batch bool) float64 {
	t.Helper()
	backend := &fakeBackend{reply: func(_ context.Context, cmd *roomcellv1.RoomCommand) (*roomcellv1.CommandReply, error) {
		id := cmd.GetGetRoom().GetRoomId()
		members := make([]string, 100)
		for i := range members {
			members[i] = fmt.Sprintf("%s-member-%03d", id, i)
		}
		return &roomcellv1.CommandReply{Room: &roomcellv1.RoomView{AppCode: "app1", RoomId: id, Members: members}}, nil
	}}
	var writes atomic.Int64
	wrap := func(l net.Listener) net.Listener {
		l = countingListener{Listener: l, writes: &writes}
		if batch {
			l = BatchWrites(l)
		}
		return l
	}
	c := serveRegisteredOn(t, NewRoomServer(backend, discardLogger(), 0), wrap)
	ctx := testCtx(t)
	// Connect first, so the count is of the calls' writes.
	if _, err := c.GetRoom(ctx, &roomcellv1.GetRoomRequest{AppCode: "app1", RoomId: "warm"}); err != nil {
		t.Fatal(err)
	}
	const callers, calls = 32, 100
	start := writes.Load()
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				id := fmt.Sprintf("r-%d-%d", g, i)
				r, err := c.GetRoom(ctx, &roomcellv1.GetRoomRequest{AppCode: "app1", RoomId: id})
				if err != nil {
					errs <- err
					return
				}
				ms := r.GetRoom().GetMembers()
				if r.GetRoom().GetRoomId() != id || len(ms) != 100 || ms[0] != id+"-member-000" || ms[99] != id+"-member-099" {
					errs <- fmt.Errorf("call for %s answered room %q with %d members", id, r.GetRoom().GetRoomId(), len(ms))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return float64(writes.Load()-start) / (callers * calls)
}

// TestBatchWritesJoinsLargeReplies: on one processor (the dev node's
// benchmark pins the server to one core), large answers of concurrent
// calls share writes through BatchWrites, where without it each goes in
// a write of its own; and every caller still gets its own answer intact
// (bytes and order untouched).
func TestBatchWritesJoinsLargeReplies(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	plain := getRoomWrites(t, false)
	batched := getRoomWrites(t, true)
	t.Logf("server writes per GetRoom: %.3f plain, %.3f with BatchWrites", plain, batched)
	// The race detector's scheduler yields on its own, so plain writes
	// batch there too: the counts are compared without it, the answers
	// (checked in getRoomWrites) always.
	if !raceBuild && batched > plain/2 {
		t.Fatalf("BatchWrites made %.3f writes per GetRoom, plain %.3f: want at most half", batched, plain)
	}
}
