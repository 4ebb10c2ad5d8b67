package main

import (
	"cmp"
	"context"

	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	flag "github.com/spf13/pflag"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
)

// benchResult is what `roomctl bench` prints.
type benchResult struct {
	Mode        string  `json:"mode"`
	Members     int     `json:"members,omitempty"` // bigroom: members each room had before the run
	Rooms       int     `json:"rooms"`
	Concurrency int     `json:"concurrency"`
	Commands    int64   `json:"commands"`
	Errors      int64   `json:"errors"`
	Retried     int64   `json:"retried"`
	Seconds     float64 `json:"seconds"`
	PerSecond   float64 `json:"commands_per_second"`
	P50Ms       float64 `json:"p50_ms"`
	P99Ms       float64 `json:"p99_ms"`
	MaxMs       float64 `json:"max_ms"`
}

// Bench modes: what each worker sends.
const (
	// modeJoinLeave: one user per worker joining and leaving rooms in
	// turn; rooms keep a steady size.
	modeJoinLeave = "joinleave"
	// modeBigRoom: rooms are first filled to --members, then every command
	// is a join of a new user: the cost of a command in a big room.
	modeBigRoom = "bigroom"
	// modeHotRoom: every worker joins and leaves one room: one grain
	// serialises the whole load.
	modeHotRoom = "hotroom"
	// modeGetRoom and modeTicket are reads, spread over the rooms: GetRoom,
	// and GetJoinTicket of a member of each room (the ticket's cost next to the
	// plain read it is made from). A ticket run first joins one member to
	// each room (as bigroom's fill) and reads that member's ticket.
	modeGetRoom = "getroom"
	modeTicket  = "ticket"
)

// benchOpts are the flags of `roomctl bench`.
type benchOpts struct {
	mode, app, prefix   string
	rooms, conc, filled int
	dur                 time.Duration
	total               int64
}

func init() {
	var mode, app, prefix string
	var rooms, conc, members int
	var dur time.Duration
	var total int64
	register(&command{
		name:  "bench",
		usage: "load a running server (--mode joinleave|bigroom|hotroom|getroom|ticket); prints commands/s and latency",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&mode, "mode", modeJoinLeave, "joinleave: each worker is a user joining and leaving rooms; bigroom: fill rooms to --members, then join new users; hotroom: every worker joins and leaves one room; getroom: GetRoom; ticket: GetJoinTicket of the rooms' owner")
			fs.IntVar(&members, "members", 1000, "bigroom: members each room gets before the measured run")
			fs.StringVar(&app, "app", "bench", "app_code")
			fs.StringVar(&prefix, "room-prefix", "bench-", "room ids are <prefix><n>")
			fs.IntVar(&rooms, "rooms", 100, "rooms to spread the load over (created if missing)")
			fs.IntVar(&conc, "concurrency", 32, "concurrent workers (users)")
			fs.DurationVar(&dur, "duration", 10*time.Second, "how long to run")
			fs.Int64Var(&total, "commands", 0, "stop after this many commands (0 = run for --duration)")
		},
		run: func(ctx context.Context, e *env, _ *flag.FlagSet) error {
			if rooms <= 0 || conc <= 0 || dur <= 0 {
				return usagef("--rooms, --concurrency and --duration must be positive")
			}
			o := benchOpts{mode: mode, app: app, prefix: prefix, rooms: rooms, conc: conc, dur: dur, total: total}
			switch mode {
			case modeJoinLeave, modeGetRoom:
			case modeTicket:
				o.filled = 1 // the member whose ticket is read: bench-fill-<room>-0
			case modeHotRoom:
				o.rooms = 1
			case modeBigRoom:
				if members < 0 {
					return usagef("--members must not be negative")
				}
				o.filled = members
			default:
				return usagef("--mode %q: want joinleave, bigroom, hotroom, getroom or ticket", mode)
			}
			r, err := runBench(ctx, v1.NewRoomServiceClient(e.conn), o)
			if err != nil {
				return err
			}
			if e.json {
				return e.printJSON(r)
			}
			printBench(e.out, r)
			return nil
		},
	})
}

func runBench(ctx context.Context, rc v1.RoomServiceClient, o benchOpts) (benchResult, error) {
	app, prefix, rooms, conc, dur, total := o.app, o.prefix, o.rooms, o.conc, o.dur, o.total
	run := fmt.Sprintf("%x", time.Now().UnixNano())
	if err := createRooms(ctx, rc, o); err != nil {
		return benchResult{}, err
	}
	if err := fillRooms(ctx, rc, o, run); err != nil {
		return benchResult{}, err
	}
	// --duration, not the global --timeout, bounds the run; a command in
	// flight when the run ends still gets its own 5s to finish, so the end
	// of the run is not counted as errors.
	base := context.WithoutCancel(ctx)
	runCtx, cancel := context.WithTimeout(base, dur)
	defer cancel()
	var cmds, errs, retried atomic.Int64
	lat := make([][]time.Duration, conc)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user := fmt.Sprintf("bench-%s-%d", run, w)
			for k := 0; runCtx.Err() == nil; k++ {
				if total > 0 && cmds.Load() >= total {
					return
				}
				room, join := fmt.Sprint(prefix, (w+k/2)%rooms), k%2 == 0
				if o.mode == modeBigRoom {
					// A new user every command, spread over the rooms.
					room, user, join = fmt.Sprint(prefix, (w+k)%rooms), fmt.Sprintf("bench-%s-%d-%d", run, w, k), true
				}
				id := fmt.Sprintf("%s-%d-%d", run, w, k)
				t0 := time.Now()
				cmdCtx, cmdCancel := context.WithTimeout(base, 5*time.Second)
				err := withRetry(&retried, func() error {
					switch o.mode {
					case modeGetRoom:
						_, err := rc.GetRoom(cmdCtx, &v1.GetRoomRequest{AppCode: app, RoomId: room})
						return err
					case modeTicket:
						_, err := rc.GetJoinTicket(cmdCtx, &v1.GetJoinTicketRequest{AppCode: app, RoomId: room, UserId: fmt.Sprintf("bench-fill-%d-0", (w+k/2)%rooms)})
						return err
					}
					return benchCommand(cmdCtx, rc, app, room, user, id, join)
				})
				cmdCancel()
				if err != nil {
					if errs.Add(1) <= 3 {
						fmt.Fprintf(os.Stderr, "bench: %s %s: %v\n", room, id, err)
					}
					continue
				}
				cmds.Add(1)
				lat[w] = append(lat[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	all := slices.Concat(lat...)
	slices.Sort(all)
	pct := func(p float64) float64 {
		if len(all) == 0 {
			return 0
		}
		return float64(all[min(len(all)-1, int(p*float64(len(all))))].Microseconds()) / 1000
	}
	return benchResult{Mode: o.mode, Members: o.filled, Rooms: rooms, Concurrency: conc, Commands: cmds.Load(), Errors: errs.Load(), Retried: retried.Load(),
		Seconds: elapsed, PerSecond: float64(cmds.Load()) / elapsed, P50Ms: pct(0.50), P99Ms: pct(0.99), MaxMs: pct(1)}, nil
}

// withRetry calls call again while it answers Unavailable (up to 5 more
// times), counting retries: a retry sends the same command_id, as a real
// client would, so the command lands exactly once. It waits 50 ms, or
// the refusal's RetryInfo delay when that is longer (a node without its
// coordinator says one lease renewal), up to 2 s.
func withRetry(retried *atomic.Int64, call func() error) error {
	err := call()
	for tries := 0; err != nil && status.Code(err) == codes.Unavailable && tries < 5; tries++ {
		retried.Add(1)
		time.Sleep(min(max(50*time.Millisecond, retryDelay(err)), 2*time.Second))
		err = call()
	}
	return err
}

// retryDelay is the google.rpc.RetryInfo delay err's status carries, 0
// when none.
func retryDelay(err error) time.Duration {
	for _, d := range status.Convert(err).Details() {
		if r, ok := d.(*errdetails.RetryInfo); ok {
			return r.GetRetryDelay().AsDuration()
		}
	}
	return 0
}

// createRooms creates the rooms before a run, o.conc at a time, not
// measured (one at a time, 100,000 rooms took most of an hour). A room
// that exists counts as created.
func createRooms(ctx context.Context, rc v1.RoomServiceClient, o benchOpts) error {
	var next, retried atomic.Int64
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range min(o.conc, o.rooms) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(o.rooms); i = next.Add(1) - 1 {
				cmdCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
				err := withRetry(&retried, func() error {
					_, err := rc.CreateRoom(cmdCtx, &v1.CreateRoomRequest{CommandId: "bench-create", AppCode: o.app,
						RoomId: fmt.Sprint(o.prefix, i), UserId: "bench-owner", Name: "bench"})
					return err
				})
				cancel()
				if err != nil && status.Code(err) != codes.AlreadyExists {
					mu.Lock()
					firstErr = cmp.Or(firstErr, fmt.Errorf("create room %d: %w", i, rpcError(err)))
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}

// fillRooms joins o.filled users into every room before a bigroom run,
// o.conc at a time, not measured. Members already there count: a rerun
// against the same rooms adds only what is missing.
func fillRooms(ctx context.Context, rc v1.RoomServiceClient, o benchOpts, run string) error {
	if o.filled == 0 {
		return nil
	}
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range o.conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < o.rooms*o.filled; i += o.conc {
				room := fmt.Sprint(o.prefix, i%o.rooms)
				user := fmt.Sprintf("bench-fill-%d-%d", i%o.rooms, i/o.rooms) // one room each: a second join would move them
				cmdCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
				err := benchCommand(cmdCtx, rc, o.app, room, user, fmt.Sprintf("fill-%s-%d", run, i), true)
				cancel()
				if err != nil && status.Code(err) != codes.FailedPrecondition { // already a member: fine
					mu.Lock()
					firstErr = cmp.Or(firstErr, fmt.Errorf("fill %s with %s: %w", room, user, rpcError(err)))
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}

func benchCommand(ctx context.Context, rc v1.RoomServiceClient, app, room, user, id string, join bool) error {
	if join {
		_, err := rc.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: id, AppCode: app, RoomId: room, UserId: user})
		return err
	}
	_, err := rc.LeaveRoom(ctx, &v1.LeaveRoomRequest{CommandId: id, AppCode: app, RoomId: room, UserId: user})
	return err
}

func printBench(w io.Writer, r benchResult) {
	fmt.Fprintf(w, "mode %s, rooms %d (%d members before), concurrency %d, %.1fs\n", r.Mode, r.Rooms, r.Members, r.Concurrency, r.Seconds)
	fmt.Fprintf(w, "commands %d (%.0f/s), errors %d, retried %d\n", r.Commands, r.PerSecond, r.Errors, r.Retried)
	fmt.Fprintf(w, "latency p50 %.2fms  p99 %.2fms  max %.2fms\n", r.P50Ms, r.P99Ms, r.MaxMs)
}
