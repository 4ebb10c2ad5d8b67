package clustertest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
)

// App is the app code of every test room.
const App = "app"

// RoomIDs names n rooms.
func RoomIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("room-%03d", i)
	}
	return ids
}

// Retryable are the codes a client retries with the same command_id
// (grpcapi's mapping of ErrUnavailable, deadlines, and a node that is
// down or stopping).
func Retryable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Aborted:
		return true
	}
	return false
}

// RetryDelay is the delay of the google.rpc.RetryInfo err's status
// carries (0 when none): the harness's clients, like a well-behaved
// client, wait at least that long before they retry.
func RetryDelay(err error) time.Duration {
	for _, d := range status.Convert(err).Details() {
		if r, ok := d.(*errdetails.RetryInfo); ok {
			return r.GetRetryDelay().AsDuration()
		}
	}
	return 0
}

// Reason is the reason of the roomcell google.rpc.ErrorInfo err's status
// carries (the error's code name, such as NO_COORDINATOR), "" when none.
func Reason(err error) string {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == "roomcell" {
			return info.GetReason()
		}
	}
	return ""
}

// Ack is one acknowledged command.
type Ack struct {
	Room      string
	Seq       int64
	Duplicate bool // the ack came from a retry that found the first attempt's record
}

// Load sends JoinRoom commands (one new user each, so none breaks a rule)
// to random rooms through the nodes in turn, retrying retryable errors on
// the next node with the same command_id until RetryFor passes. With
// ReadYourWrites, each acknowledged join is read back with GetRoom
// through a random node: an answer older than the ack's seq, or one that
// does not list the user, is a stale read (counted, see StaleReads).
type Load struct {
	Nodes          []*Node
	Rooms          []string
	RetryFor       time.Duration
	ReadYourWrites bool

	mu       sync.Mutex
	acked    map[string]Ack // by command_id
	failed   map[string]error
	attempts atomic.Int64
	retried  atomic.Int64 // attempts that failed retryably
	byServer atomic.Int64 // of which a live node answered "retry" (room moving, fenced, deadline)
	retriedC atomic.Int64 // commands that needed more than one attempt
	reads    atomic.Int64 // read-your-writes reads answered
	stale    []string     // read-your-writes violations (under mu)
	stop     chan struct{}
	wg       sync.WaitGroup
}

// Start runs workers until Stop.
func (l *Load) Start(t testing.TB, workers int) {
	l.acked, l.failed, l.stop = map[string]Ack{}, map[string]error{}, make(chan struct{})
	if l.RetryFor == 0 {
		l.RetryFor = 30 * time.Second
	}
	for w := range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				id := fmt.Sprintf("w%d-%d", w, i)
				l.Send(t, w+i, id, l.Rooms[rand.IntN(len(l.Rooms))])
			}
		}()
	}
}

// Stop ends the workers after their in-flight command.
func (l *Load) Stop() {
	close(l.stop)
	l.wg.Wait()
}

// Send runs one command to completion (ack, rule error or retries
// exhausted), starting at node start.
func (l *Load) Send(t testing.TB, start int, commandID, room string) {
	req := &v1.JoinRoomRequest{CommandId: commandID, AppCode: App, RoomId: room, UserId: "u-" + commandID}
	deadline := time.Now().Add(l.RetryFor)
	backoff := 50 * time.Millisecond
	for attempt := 0; ; attempt++ {
		n := l.Nodes[(start+attempt)%len(l.Nodes)]
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		l.attempts.Add(1)
		sent := time.Now()
		rep, err := n.Rooms(t).JoinRoom(ctx, req)
		cancel()
		n.noteAnswer(sent, err)
		if err == nil {
			l.mu.Lock()
			l.acked[commandID] = Ack{Room: room, Seq: rep.GetRoomSeq(), Duplicate: rep.GetDuplicate()}
			l.mu.Unlock()
			if attempt > 0 {
				l.retriedC.Add(1)
			}
			if l.ReadYourWrites {
				l.readBack(t, commandID, room, req.UserId, rep.GetRoomSeq(), deadline)
			}
			return
		}
		if !Retryable(err) || time.Now().After(deadline) {
			l.mu.Lock()
			l.failed[commandID] = fmt.Errorf("via %s after %d attempts: %w", n.ID, attempt+1, err)
			l.mu.Unlock()
			return
		}
		l.retried.Add(1)
		if st, _ := status.FromError(err); strings.Contains(st.Message(), "retry with the same command_id") {
			l.byServer.Add(1)
		}
		time.Sleep(max(backoff, RetryDelay(err)))
		backoff = min(backoff*2, 500*time.Millisecond)
	}
}

// readBack reads the room through a random node after an acknowledged
// join and records a stale read if the answer predates the join.
func (l *Load) readBack(t testing.TB, commandID, room, user string, seq int64, deadline time.Time) {
	var read memberRead
	err := callRetrying(t, l.Nodes, deadline, func(ctx context.Context, c v1.RoomServiceClient) (err error) {
		read, err = readMember(ctx, c, room, user)
		return err
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err != nil:
		l.failed["read-"+commandID] = fmt.Errorf("read back %s: %w", room, err)
	case read.seq < seq || !read.listed:
		l.stale = append(l.stale, fmt.Sprintf("%s: read of %s after its join at seq %d answered seq %d (member listed: %v)",
			commandID, room, seq, read.seq, read.listed))
	default:
		l.reads.Add(1)
	}
}

// memberRead is what a read of a room says about one user: the seq of its
// first page and whether any page lists the user.
type memberRead struct {
	seq    int64
	listed bool
}

// readMember reads a room through one node and pages its members until
// user shows up or the pages end. GetRoom answers one page (100 members by
// default), so a room past that holds members the first page never names;
// ids are sorted and a token is the last id of its page, so a user present
// throughout is on some page even if the room changes between pages.
func readMember(ctx context.Context, c v1.RoomServiceClient, room, user string) (memberRead, error) {
	var read memberRead
	req := &v1.GetRoomRequest{AppCode: App, RoomId: room, PageSize: 1000}
	for page := 0; ; page++ {
		r, err := c.GetRoom(ctx, req)
		if err != nil {
			return memberRead{}, err
		}
		if page == 0 {
			read.seq = r.GetRoom().GetSeq()
		}
		if slices.Contains(r.GetRoom().GetMembers(), user) {
			read.listed = true
			return read, nil
		}
		if r.GetNextPageToken() == "" {
			return read, nil
		}
		req.PageToken = r.GetNextPageToken()
	}
}

// callRetrying runs one request through random nodes until it succeeds,
// fails with a non-retryable error, or deadline passes, backing off
// between attempts.
func callRetrying(t testing.TB, nodes []*Node, deadline time.Time, do func(ctx context.Context, c v1.RoomServiceClient) error) error {
	backoff := 50 * time.Millisecond
	for {
		n := nodes[rand.IntN(len(nodes))]
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		sent := time.Now()
		err := do(ctx, n.Rooms(t))
		cancel()
		n.noteAnswer(sent, err)
		if err == nil || !Retryable(err) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(max(backoff, RetryDelay(err)))
		backoff = min(backoff*2, 500*time.Millisecond)
	}
}

// Result is what a load run did.
type Result struct {
	Acked, Failed, Attempts, RetriedAttempts, RetriedCommands int64
	// ServerRetries are retried attempts a live node answered with
	// "retry" (Unavailable or DeadlineExceeded from roomcell itself); the
	// rest could not reach a node (down, restarting, stopping).
	ServerRetries int64
	Duplicates    int64
	// Reads and StaleReads count the read-your-writes reads answered and
	// those older than the reader's own acknowledged join.
	Reads, StaleReads int64
}

func (l *Load) Result() Result {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := Result{Acked: int64(len(l.acked)), Failed: int64(len(l.failed)), Attempts: l.attempts.Load(),
		RetriedAttempts: l.retried.Load(), RetriedCommands: l.retriedC.Load(), ServerRetries: l.byServer.Load(),
		Reads: l.reads.Load(), StaleReads: int64(len(l.stale))}
	for _, a := range l.acked {
		if a.Duplicate {
			r.Duplicates++
		}
	}
	return r
}

// Failures lists up to n failed commands.
func (l *Load) Failures(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for id, err := range l.failed {
		if len(out) == n {
			break
		}
		out = append(out, id+": "+err.Error())
	}
	return strings.Join(out, "\n")
}

// StaleReadErrors lists up to n read-your-writes violations.
func (l *Load) StaleReadErrors(n int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.stale[:min(n, len(l.stale))])
}

// Acked returns a copy of the acknowledged commands.
func (l *Load) Acked() map[string]Ack {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]Ack, len(l.acked))
	for k, v := range l.acked {
		out[k] = v
	}
	return out
}

// VerifyLog checks the command log against the acks: every acknowledged
// command is logged exactly once, at the seq its ack named, and every
// room's log is gapless from 1 (one writer per seq). With several room
// databases it reads them all: every room's log must be in the one
// database the shard map gives the room, none of it in another, and
// every database must hold rooms.
func (c *Cluster) VerifyLog(t testing.TB, acked map[string]Ack) {
	t.Helper()
	type entry struct {
		room string
		seq  int64
	}
	byCmd := map[string][]entry{}
	seqs := map[string][]int64{}
	roomsIn := map[*RoomDB]map[string]bool{}
	c.eachRoomDB(t, func(ctx context.Context, rdb *RoomDB) error {
		roomsIn[rdb] = map[string]bool{}
		rows, err := rdb.DB.QueryContext(ctx, "SELECT room_id, seq, command_id FROM room_command_log WHERE app_code = ?", App)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var room, cmd string
			var seq int64
			if err := rows.Scan(&room, &seq, &cmd); err != nil {
				return err
			}
			if want := c.RoomDBOf(room); want != rdb {
				t.Fatalf("room %s (seq %d, command %s) is logged in room database %s; the shard map puts it in %s", room, seq, cmd, rdb.Key, want.Key)
			}
			byCmd[cmd] = append(byCmd[cmd], entry{room, seq})
			seqs[room] = append(seqs[room], seq)
			roomsIn[rdb][room] = true
		}
		return rows.Err()
	})
	// Rooms spread by hash: with 20 rooms or more, a database holding
	// none means the nodes did not use the map (a 2^-19 chance for two).
	if len(c.RoomDBs) > 1 && len(seqs) >= 20 {
		for _, rdb := range c.RoomDBs {
			if len(roomsIn[rdb]) == 0 {
				t.Fatalf("room database %s holds none of the %d rooms", rdb.Key, len(seqs))
			}
		}
	}
	for id, a := range acked {
		es := byCmd[id]
		if len(es) != 1 || es[0].room != a.Room || es[0].seq != a.Seq {
			t.Fatalf("acknowledged command %s (room %s seq %d) is in the log as %v", id, a.Room, a.Seq, es)
		}
	}
	for room, ss := range seqs {
		sort.Slice(ss, func(i, j int) bool { return ss[i] < ss[j] })
		for i, s := range ss {
			if s != int64(i+1) {
				t.Fatalf("room %s log seqs %v: gap or duplicate at %d", room, ss, i)
			}
		}
	}
}

// WaitOutboxPublished waits until no room_outbox row is pending in any
// room database and returns how many rows there are. It fails once the
// pending count has not gone down for d, or after 10·d in all: a room's
// rows reach IM at most at the group rate (Tencent's 40 msgs/s), so a
// test that wrote 1 300 events into one room has a backlog that drains
// for over 30 s while nothing is wrong (TestMultiMemberProcessDuplicateActivation
// failed on a fixed 30 s deadline with 45 rows left, draining).
func (c *Cluster) WaitOutboxPublished(t testing.TB, d time.Duration) (total int) {
	t.Helper()
	start := time.Now()
	lastPending, lastProgress := -1, start
	for {
		var pending int
		total = 0
		c.eachRoomDB(t, func(ctx context.Context, rdb *RoomDB) error {
			var n, p int
			if err := rdb.DB.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(SUM(status = 'pending'), 0) FROM room_outbox").Scan(&n, &p); err != nil {
				return err
			}
			total, pending = total+n, pending+p
			return nil
		})
		if pending == 0 {
			return total
		}
		if lastPending < 0 || pending < lastPending {
			lastPending, lastProgress = pending, time.Now()
		}
		if time.Since(lastProgress) > d || time.Since(start) > 10*d {
			t.Fatalf("%d of %d outbox rows still pending after %s (no progress for %s)", pending, total,
				time.Since(start).Round(time.Second), time.Since(lastProgress).Round(time.Second))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// CreateRooms creates every room through the nodes in turn, with workers
// in parallel.
func CreateRooms(t testing.TB, nodes []*Node, rooms []string, workers int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(rooms))
	ch := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range ch {
				r := rooms[i]
				req := &v1.CreateRoomRequest{CommandId: "create-" + r, AppCode: App, RoomId: r, UserId: "owner", Name: r}
				var err error
				for attempt := range 10 {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					_, err = nodes[(i+attempt)%len(nodes)].Rooms(t).CreateRoom(ctx, req)
					cancel()
					if err == nil || !Retryable(err) {
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
				if err != nil {
					errs <- fmt.Errorf("create %s: %w", r, err)
				}
			}
		}()
	}
	for i := range rooms {
		ch <- i
	}
	close(ch)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// AllRoomsAnswer reads every room through the given nodes until each has
// answered once, and returns how long that took.
func AllRoomsAnswer(t testing.TB, nodes []*Node, rooms []string, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	var wg sync.WaitGroup
	var failed atomic.Value
	ch := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range ch {
				for attempt := 0; ; attempt++ {
					ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
					_, err := nodes[(i+attempt)%len(nodes)].Rooms(t).GetRoom(ctx, &v1.GetRoomRequest{AppCode: App, RoomId: rooms[i]})
					cancel()
					if err == nil {
						break
					}
					if time.Since(start) > d {
						failed.Store(fmt.Sprintf("room %s: %v", rooms[i], err))
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
		}()
	}
	for i := range rooms {
		ch <- i
	}
	close(ch)
	wg.Wait()
	if f := failed.Load(); f != nil {
		t.Fatalf("not every room answered within %s: %v", d, f)
	}
	return time.Since(start)
}
