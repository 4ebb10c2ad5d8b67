package roomlikes

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/hyapp/roomcell/actors/roomgrain"
	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/grpcapi"
	"github.com/hyapp/roomcell/room"
)

// likeRoomFixture is a room of members u0..u<members-1> on memdb, its
// publisher the IM clock.
func likeRoomFixture(b *testing.B, members int, obs ...roomgrain.NewObserver) (*fixture, *actor.PID, *imClock) {
	f := newFixture(b)
	im := &imClock{}
	f.deps.Publisher = im
	f.deps.Observers = obs
	pid := f.activate("app/r1")
	if _, err := f.do(pid, rcCreate("c0", "owner")); err != nil {
		b.Fatal(err)
	}
	for i := range members {
		if _, err := f.do(pid, rcJoin(fmt.Sprintf("j%d", i), fmt.Sprintf("u%d", i))); err != nil {
			b.Fatal(err)
		}
	}
	return f, pid, im
}

// BenchmarkLikesIntoOneRoom: likes acknowledged per second into one room
// on one node from 500 members. A like waits for its window (up to
// room.like_window, 500 ms), so a caller's rate is its calls in flight
// over the window: "count=1" has each member keep 10 calls of one like
// in flight (5,000 callers), "count=20" one call each that gathers 20
// taps (as a client does while its previous call waits). Reports
// likes/s, like rows and IM messages per second.
func BenchmarkLikesIntoOneRoom(b *testing.B) {
	for _, c := range []struct {
		perMember int
		count     int64
	}{{10, 1}, {20, 1}, {1, 20}} {
		b.Run(fmt.Sprintf("callers=%d,count=%d", 500*c.perMember, c.count), func(b *testing.B) {
			benchLikes(b, 500, c.perMember, c.count)
		})
	}
}

func benchLikes(b *testing.B, members, perMember int, count int64) {
	f, pid, im := likeRoomFixture(b, members)
	rowsBefore := likeRows(b, f.store, "r1")
	var next, acked atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for c := range members * perMember {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user := fmt.Sprintf("u%d", c%members)
			for {
				n := next.Add(count)
				if n > int64(b.N) {
					return
				}
				res, err := f.sys.Root.RequestFuture(f.likesTo(pid), rcLike(fmt.Sprintf("b-%d", n), user, count), 10*time.Second).Result()
				if err != nil {
					b.Error(err)
					return
				}
				if _, err := replyOf(res); err != nil {
					b.Error(err)
					return
				}
				acked.Add(count)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if got := f.mustDo(pid, rcGet()).GetRoom().GetLikes(); got != acked.Load() {
		b.Fatalf("room's likes %d, acknowledged %d", got, acked.Load())
	}
	rows := likeRows(b, f.store, "r1") - rowsBefore
	b.ReportMetric(float64(acked.Load())/elapsed.Seconds(), "likes/s")
	b.ReportMetric(float64(rows)/elapsed.Seconds(), "rows/s")
	b.ReportMetric(float64(im.maxPerSecond()), "max-im-msgs/s")
}

// roomClock is an observer that notes when the room began to decide
// each timed command (its Check: after the mailbox wait) and when it
// applied it (its Committed: after the append, before the answer
// travels back to its caller).
type roomClock struct {
	mu      sync.Mutex
	checked map[string]time.Time
	at      map[string]time.Time
}

func (c *roomClock) Check(cmd room.Command) error {
	c.note(c.checked, cmd)
	return nil
}

func (c *roomClock) Committed(cmd room.Command, _ []room.Event) { c.note(c.at, cmd) }

func (c *roomClock) note(m map[string]time.Time, cmd room.Command) {
	if cmd.Type == room.CmdJoinRoom || cmd.Type == room.CmdSendGift {
		c.mu.Lock()
		m[cmd.CommandID] = time.Now()
		c.mu.Unlock()
	}
}

// since is how long after t0 the room began to decide the command and
// applied it.
func (c *roomClock) since(id string, t0 time.Time) (checked, applied time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.checked[id].Sub(t0), c.at[id].Sub(t0)
}

func (*roomClock) Loaded()               {}
func (*roomClock) Passed(room.Command)   {}
func (*roomClock) Applying([]room.Event) {}
func (*roomClock) Tick()                 {}
func (*roomClock) Passivating()          {}
func (*roomClock) Stopped()              {}

// BenchmarkJoinGiftWhileLiking: the p50 and p99 of a join plus a gift in
// one room, quiet and while 500 members like it at 10,000 likes a second
// (each member two calls of one like every 100 ms, not waiting for the
// earlier ones; the members' ticks spread over the 100 ms). The control,
// "liking-elsewhere", sends the same likes to a room of another host in
// the same process: the timed room's p99 is then the process's share of
// the load alone. p99-room-ms is the room's own part of the same join
// and gift: from each one's send to the room applying it (its mailbox
// wait and its processing, the append included), without the answer's
// way back to the caller; p99-wait-ms the part of it before the room
// began to decide them (the mailbox wait, the room's goroutine
// scheduled). "liking-grpc-stream" and "liking-grpc-unary" send the
// same 10,000 likes a second as members' apps do, through a gRPC server
// in the same process (grpcapi, loopback TCP) in front of the room: each
// member a call of 4 taps every 200 ms over its LikeStream, or a
// LikeRoom call each (the client's side of gRPC is in the process too).
func BenchmarkJoinGiftWhileLiking(b *testing.B) {
	for _, mode := range []string{"quiet", "liking", "liking-elsewhere", "liking-grpc-stream", "liking-grpc-unary"} {
		liking := mode != "quiet"
		b.Run(mode, func(b *testing.B) {
			const members = 500
			clock := &roomClock{checked: map[string]time.Time{}, at: map[string]time.Time{}}
			f, pid, im := likeRoomFixture(b, members, func(roomgrain.Activation) roomgrain.Observer { return clock })
			likeF, likePID := f, pid
			if mode == "liking-elsewhere" {
				likeF, likePID, im = likeRoomFixture(b, members)
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var likes atomic.Int64
			var stopGRPC func()
			if via, ok := strings.CutPrefix(mode, "liking-grpc-"); ok {
				stopGRPC = grpcLikers(b, f, pid, members, via == "stream", &likes)
			} else if liking {
				for c := range members {
					wg.Add(1)
					go func() {
						defer wg.Done()
						tick := time.NewTicker(100 * time.Millisecond)
						defer tick.Stop()
						user := fmt.Sprintf("u%d", c)
						// Spread over the period, as clients are (not all
						// on one tick).
						time.Sleep(time.Duration(c) * 100 * time.Millisecond / members)
						tick.Reset(100 * time.Millisecond)
						for n := 0; ; n++ {
							select {
							case <-stop:
								return
							case <-tick.C:
							}
							// Two calls of one like each, not waiting for
							// the earlier ones' windows.
							for k := range 2 {
								wg.Add(1)
								go func() {
									defer wg.Done()
									res, err := likeF.sys.Root.RequestFuture(likeF.likesTo(likePID), rcLike(fmt.Sprintf("w-%d-%d-%d", c, n, k), user, 1), 10*time.Second).Result()
									if err == nil {
										if _, err = replyOf(res); err == nil {
											likes.Add(1)
										}
									}
								}()
							}
						}
					}()
				}
				time.Sleep(time.Second) // the load settles
			}
			took := make([]time.Duration, 0, b.N)
			inRoom := make([]time.Duration, 0, b.N)
			waited := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			start := time.Now()
			for i := range b.N {
				t0 := time.Now()
				if _, err := f.do(pid, rcJoin(fmt.Sprintf("x%d", i), fmt.Sprintf("x%d", i))); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if _, err := f.do(pid, rcGift(fmt.Sprintf("g%d", i), "owner", "u0")); err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(t0))
				joinWait, join := clock.since(fmt.Sprintf("x%d", i), t0)
				giftWait, gift := clock.since(fmt.Sprintf("g%d", i), t1)
				inRoom = append(inRoom, join+gift)
				waited = append(waited, joinWait+giftWait)
				time.Sleep(2 * time.Millisecond) // a caller's pace, not a flood
			}
			elapsed := time.Since(start)
			b.StopTimer()
			close(stop)
			wg.Wait()
			if stopGRPC != nil {
				stopGRPC() // every like sent answered, and counted
			}
			slices.Sort(took)
			slices.Sort(inRoom)
			slices.Sort(waited)
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
			b.ReportMetric(float64(inRoom[len(inRoom)*99/100].Microseconds())/1000, "p99-room-ms")
			b.ReportMetric(float64(waited[len(waited)*99/100].Microseconds())/1000, "p99-wait-ms")
			if liking {
				b.ReportMetric(float64(likes.Load())/(elapsed.Seconds()+1), "likes/s")
				b.ReportMetric(float64(im.maxPerSecond()), "max-im-msgs/s")
			}
		})
	}
}

// grpcLikers likes the fixture's room from members u0..u<members-1>
// through a gRPC server in this process (the room's front its backend),
// each a call of 4 taps every 200 ms: over its LikeStream, or a LikeRoom
// call each. It returns once the load settled (a second); stop ends it
// and waits for every like sent to be answered, counted into likes.
func grpcLikers(b *testing.B, f *fixture, pid *actor.PID, members int, stream bool, likes *atomic.Int64) (stop func()) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv, _ := grpcapi.NewServer(grpcapi.Options{Logger: slog.New(slog.DiscardHandler)})
	rs := grpcapi.NewRoomServer(frontBackend{f: f, pid: pid}, slog.New(slog.DiscardHandler), 10*time.Second)
	rs.SetLikeStreams(grpcapi.LikeStreamOptions{Max: members})
	v1.RegisterRoomServiceServer(srv, rs)
	go func() { _ = srv.Serve(lis) }()
	var clients []v1.RoomServiceClient
	var conns []*grpc.ClientConn
	for range 25 {
		conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		conns = append(conns, conn)
		clients = append(clients, v1.NewRoomServiceClient(conn))
	}
	const every, perCall = 200 * time.Millisecond, int64(4)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for m := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rc, user := clients[m%len(clients)], fmt.Sprintf("u%d", m)
			var s grpc.BidiStreamingClient[v1.LikeStreamRequest, v1.LikeStreamAck]
			var owed sync.WaitGroup
			if stream {
				var err error
				if s, err = rc.LikeStream(context.Background()); err != nil {
					b.Error(err)
					return
				}
				go func() {
					for {
						a, err := s.Recv()
						if err != nil {
							select {
							case <-done: // the end: its connection closed
							default:
								b.Errorf("%s's like stream: %v", user, err)
							}
							return
						}
						if a.GetGrpcCode() == 0 {
							likes.Add(perCall)
						}
						owed.Done()
					}
				}()
			}
			time.Sleep(time.Duration(m) * every / time.Duration(members))
			tick := time.NewTicker(every)
			defer tick.Stop()
			for n := 0; ; n++ {
				select {
				case <-done:
					owed.Wait()
					if s != nil {
						_ = s.CloseSend()
					}
					return
				case <-tick.C:
				}
				id := fmt.Sprintf("g-%d-%d", m, n)
				owed.Add(1)
				if stream {
					msg := &v1.LikeStreamRequest{CommandId: id, Count: perCall}
					if n == 0 {
						msg.AppCode, msg.RoomId, msg.UserId = "app", "r1", user
					}
					if err := s.Send(msg); err != nil {
						b.Error(err)
						owed.Done()
					}
					continue
				}
				go func() {
					defer owed.Done()
					if _, err := rc.LikeRoom(context.Background(), &v1.LikeRoomRequest{CommandId: id, AppCode: "app", RoomId: "r1", UserId: user, Count: perCall}); err == nil {
						likes.Add(perCall)
					}
				}()
			}
		}()
	}
	time.Sleep(time.Second) // the load settles
	return func() {
		close(done)
		wg.Wait()
		for _, c := range conns {
			c.Close()
		}
		srv.Stop()
	}
}

// frontBackend is a gRPC server's room backend going to the fixture's
// room as the node's room client does: its likes to the room's front.
type frontBackend struct {
	f   *fixture
	pid *actor.PID
}

func (fb frontBackend) Execute(ctx context.Context, cmd *v1.RoomCommand) (*v1.CommandReply, error) {
	res, err := fb.f.sys.Root.RequestFuture(fb.f.to(fb.pid, cmd), cmd, 10*time.Second).Result()
	if err != nil {
		return nil, err
	}
	return replyOf(res)
}
