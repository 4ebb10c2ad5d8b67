package grpcapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	pcluster "github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/hyapp/roomcell/actors/roomfeed"
	"github.com/hyapp/roomcell/actors/roomgrain"
	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/cluster"
	grainkind "github.com/hyapp/roomcell/cluster/kind"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/grpcapi"
	"github.com/hyapp/roomcell/persistence/memdb"
)

// watchClientEnv, when set, makes the test binary the watch benchmark's
// client process instead of running tests (TestMain): the watchers run
// in a process of their own, so the server's CPU is read alone.
const watchClientEnv = "ROOMCELL_WATCH_CLIENT"

func TestMain(m *testing.M) {
	if spec := os.Getenv(watchClientEnv); spec != "" {
		os.Exit(watchClientProcess(spec))
	}
	os.Exit(m.Run())
}

// BenchmarkHotRoomGRPCWatchers: one hot room written at a paced 3,000
// commands/s for 3 s (8 writers, one event a command) while N WatchRoom
// streams follow it over gRPC from a client process of their own (10
// connections; batch: several room_seqs per message). Every watcher must
// receive every event, gapless and in order (resuming where a stream
// ends, as the client protocol says), or the run fails. Reported: the
// write rate with the watchers ÷ without (target ≥ 0.5), the server's
// CPU (getrusage of this process, the writes' own CPU taken out by the
// run without watchers) per stream message and per event delivered to a
// watcher (target ≤ 1 µs a message), messages and cuts, and the client
// process's CPU per event delivered (it shares the server's cores).
// ROOMCELL_HOT_WATCHERS="100,1000" runs other counts (default 1000).
// ROOMCELL_WATCH_CLIENT_CPUS=0 runs the client on CPU 0 (taskset); run
// the benchmark itself under taskset -c 1 to give each a core.
func BenchmarkHotRoomGRPCWatchers(b *testing.B) {
	counts := []int{1000}
	if env := os.Getenv("ROOMCELL_HOT_WATCHERS"); env != "" {
		counts = nil
		for _, f := range strings.Split(env, ",") {
			if n, err := strconv.Atoi(f); err == nil && n > 0 {
				counts = append(counts, n)
			}
		}
	}
	for _, watchers := range counts {
		b.Run(fmt.Sprintf("watchers=%d", watchers), func(b *testing.B) {
			for b.Loop() {
				base := hotGRPCRoom(b, 0)
				with := hotGRPCRoom(b, watchers)
				extra := with.cpu - base.cpu
				b.ReportMetric(base.rate, "written/s-alone")
				b.ReportMetric(base.p99.Seconds()*1000, "p99-ms-alone")
				b.ReportMetric(with.p99.Seconds()*1000, "p99-ms-watched")
				b.ReportMetric(with.rate, "written/s-watched")
				b.ReportMetric(with.rate/base.rate, "rate-watched/alone")
				b.ReportMetric(float64(with.res.Messages), "messages")
				b.ReportMetric(float64(with.res.Events)/float64(max(with.res.Messages, 1)), "events/message")
				b.ReportMetric(float64(extra.Nanoseconds())/float64(max(with.res.Messages, 1)), "server-ns/message")
				b.ReportMetric(float64(extra.Nanoseconds())/float64(max(with.res.Events, 1)), "server-ns/event-delivered")
				b.ReportMetric(float64(with.res.Cuts), "cuts")
				b.ReportMetric(float64(with.res.CPU)/float64(max(with.res.Events, 1)), "client-ns/event-delivered")
			}
		})
	}
}

type hotGRPCRun struct {
	rate float64       // commands written a second
	p99  time.Duration // of the writers' commands
	cpu  time.Duration // server CPU from the first write until every watcher had the head
	res  watchClientResult
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func hotGRPCRoom(b *testing.B, watchers int) hotGRPCRun {
	const (
		writers  = 8
		rate     = 3000
		writeFor = 3 * time.Second
		app      = "app"
		roomID   = "hot"
	)
	quiet := slog.New(slog.DiscardHandler)
	cfg := configs.Default()
	cfg.Cluster.Port = 0
	deps := roomgrain.Deps{Store: memdb.New(), Publisher: nopPublisher{}, Gifts: roomgrain.FreeGifts(1), Config: cfg.Room, Logger: quiet,
		Observers: []roomgrain.NewObserver{roomfeed.New(roomfeed.Config{StoreTimeout: cfg.Room.StoreTimeout}).Observe()}}
	m, err := cluster.Start(cluster.Options{Config: cfg.Cluster, Kinds: []*pcluster.Kind{grainkind.New(roomgrain.Kind, roomgrain.GrainProps(deps))}, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Stop(false)
	client := &roomgrain.Client{Cluster: m.Cluster, AttemptTimeout: 5 * time.Second}
	watcher := &roomfeed.Watcher{Client: roomfeed.Client{Client: client}}
	defer watcher.Close()
	srv, _ := grpcapi.NewServer(grpcapi.Options{Logger: quiet})
	rs := grpcapi.NewRoomServer(client, quiet, 5*time.Second)
	rs.SetEvents(grpcapi.RoomEventsOf(roomfeed.Client{Client: client}, watcher), 100000)
	grpcapi.RegisterRoomService(srv, rs)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	do := func(rc *roomcellv1.RoomCommand) int64 {
		r, err := client.Execute(ctx, rc)
		if err != nil {
			b.Fatalf("command: %v", err)
		}
		return r.RoomSeq
	}
	start := do(&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_CreateRoom{CreateRoom: &roomcellv1.CreateRoomRequest{
		CommandId: "c0", AppCode: app, RoomId: roomID, UserId: "owner", Name: "n"}}})

	var child *exec.Cmd
	var childIn io.WriteCloser
	var childOut *bufio.Reader
	if watchers > 0 {
		child = exec.Command(os.Args[0], "-test.run=^$")
		if cpus := os.Getenv("ROOMCELL_WATCH_CLIENT_CPUS"); cpus != "" {
			child = exec.Command("taskset", "-c", cpus, os.Args[0], "-test.run=^$")
		}
		child.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%s,%s,%d,%d", watchClientEnv, lis.Addr(), app, roomID, start, watchers))
		child.Stderr = os.Stderr
		if childIn, err = child.StdinPipe(); err != nil {
			b.Fatal(err)
		}
		out, err := child.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		childOut = bufio.NewReader(out)
		if err := child.Start(); err != nil {
			b.Fatal(err)
		}
		defer child.Wait()
		if line, err := childOut.ReadString('\n'); err != nil || strings.TrimSpace(line) != "ready" {
			b.Fatalf("watch client: %q %v", line, err)
		}
	}

	cpu0 := cpuTime()
	begin := time.Now()
	var writing sync.WaitGroup
	var failed atomic.Int64
	took := make([][]time.Duration, writers)
	for k := range writers {
		writing.Add(1)
		go func() {
			defer writing.Done()
			every := time.Second * writers / rate
			next := time.Now()
			user := fmt.Sprint("u", k)
			for i := 0; time.Since(begin) < writeFor; i++ {
				id := fmt.Sprintf("w%d-%d", k, i)
				rc := &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_JoinRoom{JoinRoom: &roomcellv1.JoinRoomRequest{CommandId: id, AppCode: app, RoomId: roomID, UserId: user}}}
				if i%2 == 1 {
					rc = &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_LeaveRoom{LeaveRoom: &roomcellv1.LeaveRoomRequest{CommandId: id, AppCode: app, RoomId: roomID, UserId: user}}}
				}
				t0 := time.Now()
				if _, err := client.Execute(ctx, rc); err != nil {
					failed.Add(1)
				}
				took[k] = append(took[k], time.Since(t0))
				next = next.Add(every)
				time.Sleep(time.Until(next))
			}
		}()
	}
	writing.Wait()
	wrote := time.Since(begin)
	if failed.Load() > 0 {
		b.Fatalf("%d writes failed", failed.Load())
	}
	head := do(&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_GetRoom{GetRoom: &roomcellv1.GetRoomRequest{AppCode: app, RoomId: roomID}}})
	all := slices.Concat(took...)
	slices.Sort(all)
	run := hotGRPCRun{rate: float64(head-start) / wrote.Seconds(), p99: all[len(all)*99/100]}
	if child != nil {
		fmt.Fprintf(childIn, "%d\n", head)
		line, err := childOut.ReadString('\n')
		if err != nil {
			b.Fatalf("watch client result: %v", err)
		}
		if err := json.Unmarshal([]byte(line), &run.res); err != nil {
			b.Fatalf("watch client result %q: %v", line, err)
		}
		childIn.Close()
		if run.res.Bad != "" {
			b.Fatalf("watch client: %s", run.res.Bad)
		}
		if run.res.Behind > 0 {
			b.Fatalf("%d watchers did not reach the head %d", run.res.Behind, head)
		}
		if want := (head - start) * int64(watchers); run.res.Events != want {
			b.Fatalf("watchers received %d events, want %d (every event once to each)", run.res.Events, want)
		}
	}
	run.cpu = cpuTime() - cpu0
	return run
}

type watchClientResult struct {
	Messages, Events, Cuts, Behind int64
	CPU                            int64 // the client process's, ns, from ready to the result
	Bad                            string
}

// watchClientProcess runs the benchmark's watchers: spec is
// "addr,app,room,after,watchers". It prints "ready" once every stream
// is accepted, reads the head to reach from stdin, and prints its
// result as JSON when every watcher has it (or after a minute).
func watchClientProcess(spec string) int {
	f := strings.Split(spec, ",")
	if len(f) != 5 {
		fmt.Fprintln(os.Stderr, "bad spec", spec)
		return 2
	}
	addr, app, roomID := f[0], f[1], f[2]
	after, _ := strconv.ParseInt(f[3], 10, 64)
	watchers, _ := strconv.Atoi(f[4])
	const conns = 10
	clients := make([]roomcellv1.RoomServiceClient, conns)
	for i := range clients {
		// The replies are read as bytes (rawCodec) and only their seqs
		// looked at: the client shares the server's cores, and decoding
		// every event for 1,000 watchers would measure the client.
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawCodec{base: encoding.GetCodecV2(grpcproto.Name)})))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer conn.Close()
		clients[i] = roomcellv1.NewRoomServiceClient(conn)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var messages, events, cuts atomic.Int64
	var bad atomic.Value
	fail := func(format string, args ...any) { bad.CompareAndSwap(nil, fmt.Sprintf(format, args...)) }
	last := make([]atomic.Int64, watchers)
	var accepted sync.WaitGroup
	for i := range watchers {
		last[i].Store(after)
		accepted.Add(1)
		go func() {
			first := true
			for ctx.Err() == nil {
				stream, err := clients[i%conns].WatchRoom(ctx, watchRequest(app, roomID, last[i].Load()))
				if err == nil {
					_, err = stream.Header()
				}
				if first {
					first = false
					accepted.Done()
				}
				for err == nil {
					var r rawWatchReply
					if err = stream.RecvMsg(&r); err != nil {
						break
					}
					messages.Add(1)
					roomSeq, seqs, perr := r.seqs()
					if perr != nil {
						fail("watcher %d: %v", i, perr)
					}
					seq := last[i].Load()
					for _, s := range seqs {
						if s != seq+1 {
							fail("watcher %d: event of seq %d after %d", i, s, seq)
						}
						seq = s
					}
					if roomSeq != seq {
						fail("watcher %d: message of seq %d ends with the event of %d", i, roomSeq, seq)
					}
					events.Add(int64(len(seqs)))
					last[i].Store(seq)
				}
				if ctx.Err() != nil {
					return
				}
				resume, ok := grpcapi.ResumeAfterSeq(err)
				if !ok {
					fail("watcher %d: %v", i, err)
					return
				}
				if resume != last[i].Load() {
					fail("watcher %d: told to resume after %d, has %d", i, resume, last[i].Load())
				}
				cuts.Add(1)
				if os.Getenv("ROOMCELL_WATCH_VERBOSE") != "" {
					fmt.Fprintln(os.Stderr, "watcher", i, "resumes after", resume, err)
				}
			}
		}()
	}
	accepted.Wait()
	cpu0 := cpuTime()
	fmt.Println("ready")
	var head int64
	if _, err := fmt.Fscan(os.Stdin, &head); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	deadline := time.Now().Add(time.Minute)
	behind := int64(0)
	for {
		behind = 0
		for i := range last {
			if last[i].Load() < head {
				behind++
			}
		}
		if behind == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	res := watchClientResult{Messages: messages.Load(), Events: events.Load(), Cuts: cuts.Load(), Behind: behind, CPU: int64(cpuTime() - cpu0)}
	if v := bad.Load(); v != nil {
		res.Bad = v.(string)
	}
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
	return 0
}

func watchRequest(app, roomID string, after int64) *roomcellv1.WatchRoomRequest {
	return &roomcellv1.WatchRoomRequest{AppCode: app, RoomId: roomID, AfterRoomSeq: after, Batch: os.Getenv("ROOMCELL_WATCH_BATCH") != "0"}
}

// rawWatchReply is a WatchRoomReply as it came: the benchmark's client
// reads its seqs without decoding its events.
type rawWatchReply struct{ b []byte }

// seqs is the reply's room_seq and each event's room_seq, in order.
func (r *rawWatchReply) seqs() (roomSeq int64, events []int64, err error) {
	b := r.b
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, nil, protowire.ParseError(n)
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return 0, nil, protowire.ParseError(n)
			}
			roomSeq, b = int64(v), b[n:]
		case num == 2 && typ == protowire.BytesType:
			ev, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return 0, nil, protowire.ParseError(n)
			}
			b = b[n:]
			// RoomLogEvent.room_seq is its field 1.
			num, typ, n = protowire.ConsumeTag(ev)
			if n < 0 || num != 1 || typ != protowire.VarintType {
				return 0, nil, fmt.Errorf("event without its room_seq first")
			}
			v, m := protowire.ConsumeVarint(ev[n:])
			if m < 0 {
				return 0, nil, protowire.ParseError(m)
			}
			events = append(events, int64(v))
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return 0, nil, protowire.ParseError(n)
			}
			b = b[n:]
		}
	}
	return roomSeq, events, nil
}

// rawCodec gives a *rawWatchReply its bytes and leaves every other
// message to base.
type rawCodec struct{ base encoding.CodecV2 }

func (c rawCodec) Name() string { return c.base.Name() }

func (c rawCodec) Marshal(v any) (mem.BufferSlice, error) { return c.base.Marshal(v) }

func (c rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if r, ok := v.(*rawWatchReply); ok {
		r.b = data.Materialize()
		return nil
	}
	return c.base.Unmarshal(data, v)
}
