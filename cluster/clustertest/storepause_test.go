//go:build !race

package clustertest

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
)

// The store gate under a frozen database, measured per attempt: what the
// clients of a room database saw while its MariaDB was SIGSTOPped.
//
// storePauseDeadline is each attempt's deadline, the request deadline
// of a client; an attempt that reaches it "hung". storeRefusedWithin is
// how fast a write sent during the pause must be answered (refused or
// done); storeGateBound how soon after the pause each node's gate of the
// paused database must have closed (its log line), storeGateOpenBound
// how soon after the resume it must have opened again.
const (
	storePauseFor       = 10 * time.Second
	storePauseDeadline  = 3 * time.Second
	storeRefusedWithin  = time.Second
	storeGateBound      = 500 * time.Millisecond
	storeGateOpenBound  = time.Second
	storePauseWriters   = 16
	storePauseReaders   = 8
	storePauseRoomCount = 200
)

// storeAttempt is one attempt of the pause clients.
type storeAttempt struct {
	room   string
	write  bool
	at     time.Time
	took   time.Duration
	code   codes.Code
	reason string
}

// storeClients run JoinRooms (each retried with its command_id until it
// is acknowledged or fails for good, every attempt under the request
// deadline) and GetRooms (one attempt each) through random nodes, and
// keep every attempt.
type storeClients struct {
	nodes []*Node
	rooms []string
	// writerRooms, when set, are the rooms writer w writes to (default
	// all): a writer retrying a refused write to a paused database's room
	// writes nothing else meanwhile.
	writerRooms func(w int) []string

	mu       sync.Mutex
	attempts []storeAttempt
	acked    map[string]Ack
	failed   []string
	stop     chan struct{}
	wg       sync.WaitGroup
}

func (s *storeClients) start(t *testing.T) {
	s.acked, s.stop = map[string]Ack{}, make(chan struct{})
	for w := range storePauseWriters {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			rooms := s.rooms
			if s.writerRooms != nil {
				rooms = s.writerRooms(w)
			}
			for i := 0; s.running(); i++ {
				s.write(t, fmt.Sprintf("sp%d-%d", w, i), rooms[rand.IntN(len(rooms))])
			}
		}()
	}
	for range storePauseReaders {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			for s.running() {
				room := s.rooms[rand.IntN(len(s.rooms))]
				s.attempt(t, room, false, func(ctx context.Context, c v1.RoomServiceClient) (*v1.CommandReply, error) {
					_, err := c.GetRoom(ctx, &v1.GetRoomRequest{AppCode: App, RoomId: room})
					return nil, err
				})
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
}

func (s *storeClients) running() bool {
	select {
	case <-s.stop:
		return false
	default:
		return true
	}
}

func (s *storeClients) halt() { close(s.stop); s.wg.Wait() }

// write runs one JoinRoom to its ack, retrying retryable answers (after
// their retry hint) for up to a minute.
func (s *storeClients) write(t *testing.T, id, room string) {
	req := &v1.JoinRoomRequest{CommandId: id, AppCode: App, RoomId: room, UserId: "u-" + id}
	until := time.Now().Add(time.Minute)
	for {
		rep, err := s.attempt(t, room, true, func(ctx context.Context, c v1.RoomServiceClient) (*v1.CommandReply, error) {
			return c.JoinRoom(ctx, req)
		})
		if err == nil {
			s.mu.Lock()
			s.acked[id] = Ack{Room: room, Seq: rep.GetRoomSeq(), Duplicate: rep.GetDuplicate()}
			s.mu.Unlock()
			return
		}
		if !Retryable(err) || time.Now().After(until) {
			s.mu.Lock()
			s.failed = append(s.failed, fmt.Sprintf("%s (%s): %v", id, room, err))
			s.mu.Unlock()
			return
		}
		time.Sleep(max(50*time.Millisecond, RetryDelay(err)))
	}
}

func (s *storeClients) attempt(t *testing.T, room string, write bool, do func(context.Context, v1.RoomServiceClient) (*v1.CommandReply, error)) (*v1.CommandReply, error) {
	n := s.nodes[rand.IntN(len(s.nodes))]
	ctx, cancel := context.WithTimeout(context.Background(), storePauseDeadline)
	at := time.Now()
	rep, err := do(ctx, n.Rooms(t))
	took := time.Since(at)
	cancel()
	s.mu.Lock()
	s.attempts = append(s.attempts, storeAttempt{room: room, write: write, at: at, took: took, code: status.Code(err), reason: Reason(err)})
	s.mu.Unlock()
	return rep, err
}

// storeFigures sums the attempts sent in a window, for one side.
type storeFigures struct {
	writes, writesOK, writesOverBound, writesHung, storeDown int
	reads, readsFailed, readsOverBound                       int
	slowestWrite, slowestRead                                time.Duration
	codes                                                    map[string]int
	readErrs                                                 []string
}

func (f storeFigures) String() string {
	return fmt.Sprintf("writes %d (%d done, %d refused ROOM_STORE_DOWN, %d over %s, %d hung to the %s deadline, slowest %s); reads %d (%d failed, %d over %s, slowest %s); answers by code %v",
		f.writes, f.writesOK, f.storeDown, f.writesOverBound, storeRefusedWithin, f.writesHung, storePauseDeadline, f.slowestWrite.Round(time.Millisecond),
		f.reads, f.readsFailed, f.readsOverBound, storeRefusedWithin, f.slowestRead.Round(time.Millisecond), f.codes)
}

// figures sums the attempts sent in [from, to) to the rooms in keep.
func (s *storeClients) figures(from, to time.Time, keep func(room string) bool) storeFigures {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := storeFigures{codes: map[string]int{}}
	for _, a := range s.attempts {
		if a.at.Before(from) || !a.at.Before(to) || !keep(a.room) {
			continue
		}
		name := a.code.String()
		if a.reason != "" {
			name += " " + a.reason
		}
		f.codes[name]++
		if a.write {
			f.writes++
			f.slowestWrite = max(f.slowestWrite, a.took)
			if a.code == codes.OK {
				f.writesOK++
			}
			if a.reason == "ROOM_STORE_DOWN" {
				f.storeDown++
			}
			if a.took > storeRefusedWithin {
				f.writesOverBound++
			}
			if a.took >= storePauseDeadline-100*time.Millisecond {
				f.writesHung++
			}
			continue
		}
		f.reads++
		f.slowestRead = max(f.slowestRead, a.took)
		if a.code != codes.OK {
			f.readsFailed++
			if len(f.readErrs) < 10 {
				f.readErrs = append(f.readErrs, fmt.Sprintf("%s at +%s: %s %s after %s", a.room, a.at.Sub(from).Round(time.Millisecond), a.code, a.reason, a.took.Round(time.Millisecond)))
			}
		}
		if a.took > storeRefusedWithin {
			f.readsOverBound++
		}
	}
	return f
}

// gateEvents are the times a node logged its store gate closing or
// opening at or after since, for the room database db ("" matches any:
// a node of one room database does not name it).
func gateEvents(t *testing.T, n *Node, since time.Time, msg, db string) []time.Time {
	t.Helper()
	var out []time.Time
	for _, line := range strings.Split(n.LogGrep(since, msg), "\n") {
		if line == "" {
			continue
		}
		var rec struct {
			Time   time.Time `json:"time"`
			RoomDB string    `json:"room_db"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("%s: log line %q: %v", n.ID, line, err)
		}
		if db == "" || rec.RoomDB == db {
			out = append(out, rec.Time)
		}
	}
	return out
}

const (
	gateClosedMsg = "room store unreachable"
	gateOpenMsg   = "room store answers again"
)

// checkGate asserts that the nodes' gates of db closed within
// storeGateBound of the pause and opened within storeGateOpenBound of
// the resume, and never opened in between, and returns the slowest close
// and open. A node whose rooms made no call to db during the pause (it
// owns none of the rooms written) has nothing to close on; at least one
// must have closed.
func checkGate(t *testing.T, nodes []*Node, db string, paused, resumed time.Time) (closeAfter, openAfter time.Duration) {
	t.Helper()
	closers := 0
	for _, n := range nodes {
		closed := gateEvents(t, n, paused.Add(-time.Second), gateClosedMsg, db)
		opened := gateEvents(t, n, paused, gateOpenMsg, db)
		if len(closed) == 0 {
			t.Logf("%s: its store gate of %q did not close (no call of its rooms waited on it)", n.ID, db)
			continue
		}
		closers++
		c := closed[0].Sub(paused)
		closeAfter = max(closeAfter, c)
		t.Logf("%s: gate of %q closed %s after the pause began (%d closes), opened %v after the resume",
			n.ID, db, c.Round(time.Millisecond), len(closed), sinceAll(opened, resumed))
		if c > storeGateBound {
			t.Errorf("%s: the store gate of %q closed %s after the pause began; want within %s", n.ID, db, c, storeGateBound)
		}
		if len(opened) == 0 {
			t.Errorf("%s: the store gate of %q never opened after the resume", n.ID, db)
			continue
		}
		if opened[0].Before(resumed) {
			t.Errorf("%s: the store gate of %q opened %s before the resume, while its database was frozen", n.ID, db, resumed.Sub(opened[0]))
		}
		o := opened[len(opened)-1].Sub(resumed)
		openAfter = max(openAfter, o)
		if o > storeGateOpenBound {
			t.Errorf("%s: the store gate of %q opened %s after the resume; want within %s", n.ID, db, o, storeGateOpenBound)
		}
	}
	if closers == 0 {
		t.Errorf("no node's store gate of %q closed during the pause", db)
	}
	return closeAfter, openAfter
}

func sinceAll(ts []time.Time, ref time.Time) []string {
	out := make([]string, len(ts))
	for i, at := range ts {
		out[i] = at.Sub(ref).Round(time.Millisecond).String()
	}
	return out
}

// storePauseRun is the common run: a cluster under the pause clients,
// pause frozen for storePauseFor, resumed, and the clients kept on until
// every room answers writes again.
func storePauseRun(t *testing.T, c *Cluster, writerRooms func(rooms []string) func(w int) []string, pause, resume func()) (cl *storeClients, paused, resumed time.Time) {
	rooms := RoomIDs(storePauseRoomCount)
	CreateRooms(t, c.Nodes, rooms, 8)
	cl = &storeClients{nodes: c.Nodes, rooms: rooms}
	if writerRooms != nil {
		cl.writerRooms = writerRooms(rooms)
	}
	cl.start(t)
	halted := false
	t.Cleanup(func() {
		if !halted {
			cl.halt()
		}
	})
	time.Sleep(4 * time.Second) // every room active and writing
	pause()
	paused = time.Now()
	time.Sleep(storePauseFor)
	resume()
	resumed = time.Now()
	time.Sleep(6 * time.Second) // writes flow again; retried ones land
	cl.halt()
	halted = true
	cl.mu.Lock()
	defer cl.mu.Unlock()
	t.Logf("pause clients: %d attempts, %d commands acknowledged", len(cl.attempts), len(cl.acked))
	if len(cl.failed) != 0 {
		sort.Strings(cl.failed)
		t.Errorf("%d writes failed for good:\n%s", len(cl.failed), strings.Join(cl.failed[:min(10, len(cl.failed))], "\n"))
	}
	return cl, paused, resumed
}

// A node's only room database frozen for 10 s (SIGSTOP of its mariadbd)
// under 16 writers and 8 readers through every node: the nodes' store
// gates close within 0.5 s of the pause, so no write sent during the
// pause waits over 1 s (none reaches the 3 s deadline: each is refused
// with ROOM_STORE_DOWN, or was caught in flight and abandoned), every
// read is answered from the rooms' state, the gates open within 1 s of
// the resume, and no acknowledged write is lost or doubled (the writes
// whose outcome the pause made unknown are settled by the room's reload
// and the command_id).
func TestMultiMemberDatabasePauseRefusedAtOnce(t *testing.T) {
	srv := mysqltest.StartServer(t)
	c := New(t, Options{Nodes: 3, BinDir: binDir, MySQLDSN: srv.DSN, RoomDBs: 1, Edit: func(_ int, nc *NodeConfig) {
		nc.Presence = map[string]any{"stale_after": "10m"}
	}})
	cl, paused, resumed := storePauseRun(t, c, nil, srv.Pause, srv.Resume)
	all := func(string) bool { return true }
	f := cl.figures(paused, resumed, all)
	t.Logf("during the pause: %s", f)
	if f.writesOverBound != 0 || f.writesHung != 0 {
		t.Errorf("%d writes sent during the pause took over %s (%d hung to the deadline); want every one refused or done within it",
			f.writesOverBound, storeRefusedWithin, f.writesHung)
	}
	if f.storeDown == 0 {
		t.Errorf("no write sent during the pause was refused with ROOM_STORE_DOWN")
	}
	if f.readsFailed != 0 || f.readsOverBound != 0 {
		t.Errorf("%d reads sent during the pause failed, %d took over %s; want all answered:\n%s",
			f.readsFailed, f.readsOverBound, storeRefusedWithin, strings.Join(f.readErrs, "\n"))
	}
	closeAfter, openAfter := checkGate(t, c.Nodes, "", paused, resumed)
	c.VerifyLog(t, cl.acked)
	t.Logf("row: | MariaDB paused %s | %d | %s | %s | %d of %d | %d |", storePauseFor, f.writesHung,
		closeAfter.Round(time.Millisecond), openAfter.Round(time.Millisecond), f.readsFailed, f.reads, len(cl.acked))
}

// Two room databases on two servers of the test's own, the second's
// frozen for 10 s, half the writers on each database's rooms: the first
// database's rooms see nothing (every write done, none over 1 s, no
// refusal, its gate does not close during the pause); the paused
// database's rooms answer every read from their state and refuse writes
// within 1 s; its gates close within 0.5 s of the pause and open within
// 1 s of the resume; nothing acknowledged is lost or doubled.
func TestMultiMemberRoomDatabasePausedAlone(t *testing.T) {
	// Each database on a server of the test's own: the shared one is
	// loaded by other tests (databases made and dropped) and stalls for
	// moments of its own, which its gate rightly takes for a stall.
	first, srv := mysqltest.StartServer(t), mysqltest.StartServer(t)
	c := New(t, Options{Nodes: 3, BinDir: binDir, RoomDBs: 2, MySQLDSN: first.DSN, RoomDBServer: srv.DSN, Edit: func(_ int, nc *NodeConfig) {
		nc.Presence = map[string]any{"stale_after": "10m"}
	}})
	paused0 := c.RoomDBs[1].Key
	inPaused := func(room string) bool { return c.RoomDBOf(room).Key == paused0 }
	// Half the writers write to each database's rooms.
	split := func(rooms []string) func(w int) []string {
		var in, out []string
		for _, r := range rooms {
			if inPaused(r) {
				in = append(in, r)
			} else {
				out = append(out, r)
			}
		}
		return func(w int) []string {
			if w%2 == 0 {
				return out
			}
			return in
		}
	}
	cl, paused, resumed := storePauseRun(t, c, split, srv.Pause, srv.Resume)
	other := cl.figures(paused, resumed, func(room string) bool { return !inPaused(room) })
	frozen := cl.figures(paused, resumed, inPaused)
	t.Logf("during the pause, the other database's rooms: %s", other)
	t.Logf("during the pause, the paused database's rooms: %s", frozen)
	if other.writes == 0 || other.writesOK != other.writes || other.writesOverBound != 0 || other.readsFailed != 0 || other.readsOverBound != 0 {
		t.Errorf("the rooms of the database that answered saw the other's pause: %s\n%s", other, strings.Join(other.readErrs, "\n"))
	}
	if frozen.writesOverBound != 0 || frozen.writesHung != 0 || frozen.storeDown == 0 {
		t.Errorf("writes to the paused database's rooms: %d over %s, %d hung, %d refused ROOM_STORE_DOWN; want all refused or done within it",
			frozen.writesOverBound, storeRefusedWithin, frozen.writesHung, frozen.storeDown)
	}
	if frozen.readsFailed != 0 || frozen.readsOverBound != 0 {
		t.Errorf("%d reads of the paused database's rooms failed, %d took over %s; want all answered:\n%s",
			frozen.readsFailed, frozen.readsOverBound, storeRefusedWithin, strings.Join(frozen.readErrs, "\n"))
	}
	closeAfter, openAfter := checkGate(t, c.Nodes, paused0, paused, resumed)
	for _, n := range c.Nodes {
		var during int
		closed := gateEvents(t, n, time.Time{}, gateClosedMsg, c.RoomDBs[0].Key)
		for _, at := range closed {
			if !at.Before(paused) && at.Before(resumed) {
				during++
			}
		}
		t.Logf("%s: the store gate of %q closed %d times during the run, %d during the other's pause", n.ID, c.RoomDBs[0].Key, len(closed), during)
		if during != 0 {
			t.Errorf("%s: the store gate of %q, which answered, closed during the other database's pause", n.ID, c.RoomDBs[0].Key)
		}
	}
	c.VerifyLog(t, cl.acked)
	t.Logf("row: | one of two room databases paused %s | %d | %s | %s | %d of %d (other database: %d of %d) | %d |", storePauseFor,
		frozen.writesHung+other.writesHung, closeAfter.Round(time.Millisecond), openAfter.Round(time.Millisecond),
		frozen.readsFailed, frozen.reads, other.readsFailed, other.reads, len(cl.acked))
}
