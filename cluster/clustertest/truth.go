package clustertest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
)

// Truth checks what clients are told, not only what is stored. Each
// worker runs cycles with a user of its own: JoinRoom, GetRoom, LeaveRoom,
// each through a random node, retrying retryable errors with the same
// command_id. A correct single live copy per room never answers:
//   - a GetRoom older than the caller's own acknowledged join (stale
//     read), or one that does not list the user it just joined;
//   - "not a member" (or any rule error) to the LeaveRoom of a user whose
//     join was acknowledged (wrong rejection).
//
// A 15 s SIGSTOP showed both. Acks go to VerifyLog like
// Load's.
type Truth struct {
	Nodes    []*Node
	Rooms    []string
	RetryFor time.Duration

	mu     sync.Mutex
	acked  map[string]Ack
	errs   []string
	stale  atomic.Int64
	wrong  atomic.Int64
	failed atomic.Int64
	cycles atomic.Int64
	stop   chan struct{}
	wg     sync.WaitGroup
}

// TruthResult is what a Truth run saw.
type TruthResult struct {
	Cycles, StaleReads, WrongRejections, Failed int64
}

func (tr *Truth) Start(t testing.TB, workers int) {
	tr.acked, tr.stop = map[string]Ack{}, make(chan struct{})
	if tr.RetryFor == 0 {
		tr.RetryFor = 30 * time.Second
	}
	for w := range workers {
		tr.wg.Add(1)
		go func() {
			defer tr.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-tr.stop:
					return
				default:
				}
				tr.cycle(t, fmt.Sprintf("t%d-%d", w, i), tr.Rooms[rand.IntN(len(tr.Rooms))])
			}
		}()
	}
}

func (tr *Truth) Stop() { close(tr.stop); tr.wg.Wait() }

func (tr *Truth) Result() TruthResult {
	return TruthResult{Cycles: tr.cycles.Load(), StaleReads: tr.stale.Load(), WrongRejections: tr.wrong.Load(), Failed: tr.failed.Load()}
}

// Errors lists up to n of the violations and failures seen.
func (tr *Truth) Errors(n int) []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.errs[:min(n, len(tr.errs))])
}

func (tr *Truth) Acked() map[string]Ack {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	out := make(map[string]Ack, len(tr.acked))
	for k, v := range tr.acked {
		out[k] = v
	}
	return out
}

func (tr *Truth) note(counter *atomic.Int64, format string, args ...any) {
	counter.Add(1)
	tr.mu.Lock()
	if len(tr.errs) < 100 {
		tr.errs = append(tr.errs, fmt.Sprintf(format, args...))
	}
	tr.mu.Unlock()
}

// call retries one request over random nodes until it succeeds, fails
// with a non-retryable error, or RetryFor passes.
func (tr *Truth) call(t testing.TB, do func(ctx context.Context, c v1.RoomServiceClient) error) error {
	return callRetrying(t, tr.Nodes, time.Now().Add(tr.RetryFor), do)
}

func (tr *Truth) cycle(t testing.TB, id, room string) {
	user := "u-" + id
	var joined *v1.CommandReply
	err := tr.call(t, func(ctx context.Context, c v1.RoomServiceClient) (err error) {
		joined, err = c.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: "join-" + id, AppCode: App, RoomId: room, UserId: user})
		return err
	})
	if err != nil {
		tr.note(&tr.failed, "%s join %s: %v", id, room, err)
		return
	}
	tr.ack("join-"+id, room, joined)
	var read memberRead
	err = tr.call(t, func(ctx context.Context, c v1.RoomServiceClient) (err error) {
		read, err = readMember(ctx, c, room, user)
		return err
	})
	switch {
	case err != nil:
		tr.note(&tr.failed, "%s read %s: %v", id, room, err)
		return
	case read.seq < joined.GetRoomSeq() || !read.listed:
		tr.note(&tr.stale, "%s: read of %s after its join at seq %d answered seq %d (member listed: %v)",
			id, room, joined.GetRoomSeq(), read.seq, read.listed)
	}
	var left *v1.CommandReply
	err = tr.call(t, func(ctx context.Context, c v1.RoomServiceClient) (err error) {
		left, err = c.LeaveRoom(ctx, &v1.LeaveRoomRequest{CommandId: "leave-" + id, AppCode: App, RoomId: room, UserId: user})
		return err
	})
	switch {
	case err != nil && status.Code(err) == codes.FailedPrecondition:
		tr.note(&tr.wrong, "%s: leave of %s after its acknowledged join rejected: %v", id, room, err)
	case err != nil:
		tr.note(&tr.failed, "%s leave %s: %v", id, room, err)
	default:
		tr.ack("leave-"+id, room, left)
		tr.cycles.Add(1)
	}
}

func (tr *Truth) ack(commandID, room string, r *v1.CommandReply) {
	tr.mu.Lock()
	tr.acked[commandID] = Ack{Room: room, Seq: r.GetRoomSeq(), Duplicate: r.GetDuplicate()}
	tr.mu.Unlock()
}
