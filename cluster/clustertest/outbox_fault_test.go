//go:build !race

package clustertest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/delivery/imfake"
	"github.com/hyapp/roomcell/delivery/roomim"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
	"github.com/hyapp/roomcell/room"
)

// outboxFault is one fault of the outbox run: it started at start and
// the cluster was back at recovered.
type outboxFault struct {
	name             string
	start, recovered time.Time
	// restarted is when a killed node was ready again (zero for a pause).
	restarted time.Time
}

// outboxFaultRepeats is how many times the outbox fault test pauses the
// database and kills a node: once each by default, three times with
// ROOMCELL_OUTBOX_FAULT_REPEATS=3 (make chaos).
func outboxFaultRepeats(t *testing.T) int {
	if v := os.Getenv("ROOMCELL_OUTBOX_FAULT_REPEATS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("ROOMCELL_OUTBOX_FAULT_REPEATS=%q: want a positive number", v)
		}
		return n
	}
	return 1
}

// Three roomcell processes (every role, the relay included) on a MariaDB
// of the test's own and an etcd of the test's own, 200 rooms under
// continuous JoinRoom load with read-your-writes reads, all publishing to
// one fake Tencent IM. The database is SIGSTOPped for 10 s and resumed,
// then a node is SIGKILLed and started again, each under the load (once
// each; ROOMCELL_OUTBOX_FAULT_REPEATS=3 for the long form). Asserted:
//   - no acknowledged command lost or doubled (VerifyLog), none failed,
//     no read-your-writes read stale;
//   - every outbox row published, and every row's event at the fake IM;
//   - at the fake IM, each room's events in room order (counting each
//     event at its first arrival: clients drop repeats by event_id);
//   - no row reached IM more than 10 s after the later of its write and
//     the end of the fault it lived through;
//   - no GetRoom answered during the pause was stale (its seq below a
//     write acknowledged before the pause).
func TestMultiMemberOutboxCatchesUpAfterDatabasePauseAndKill(t *testing.T) {
	const (
		pauseFor = 10 * time.Second
		late     = 10 * time.Second
		settle   = 8 * time.Second // load on the recovered cluster between faults
	)
	repeats := outboxFaultRepeats(t)
	run := startOutboxRun(t)
	c, rooms, load := run.c, run.rooms, run.load

	var faults []outboxFault
	var pauseReads pauseReadCount
	for r := range repeats {
		// The database, frozen for 10 s.
		before := maxAckedSeq(load.Acked())
		readers := pauseReads.start(t, c.Nodes, rooms, before)
		start := time.Now()
		run.srv.Pause()
		time.Sleep(pauseFor)
		run.srv.Resume()
		resumed := time.Now()
		readers()
		answered := AllRoomsAnswer(t, c.Nodes, rooms, 30*time.Second)
		t.Logf("pause %d: every room answered %s after the resume", r+1, answered.Round(time.Millisecond))
		checkPauseCalls(t, c.Nodes, start, resumed)
		faults = append(faults, outboxFault{name: fmt.Sprintf("pause %d", r+1), start: start, recovered: resumed})
		time.Sleep(settle)

		// A node, SIGKILLed and started again.
		f, _, _ := run.killAndRestart(t, c.Nodes[(r+2)%len(c.Nodes)], fmt.Sprintf("kill %d", r+1))
		faults = append(faults, f)
		time.Sleep(settle)
	}
	run.finish(t, faults, late, func() {
		t.Logf("GetRoom during the pauses: %d answered (%d stale: seq below a write acknowledged before the pause), %d refused or timed out (%v; %d rooms)",
			pauseReads.answered.Load(), pauseReads.stale.Load(), pauseReads.refused.Load(), pauseReads.why, len(pauseReads.refusedRooms))
		if n := pauseReads.stale.Load(); n != 0 {
			t.Errorf("%d GetRoom answers during the pause were stale:\n%s", n, strings.Join(pauseReads.errors(), "\n"))
		}
	})
}

// A node SIGKILLed under load and started again while the load runs
// (its shards come back to it): every room answers through the others
// within 3 s of the kill and again within 3 s of the restarted node's
// readiness (its rooms moving back), no acknowledged command is lost or
// doubled, and no outbox row reaches IM more than 10 s after the later of
// its write and the failover, the rows written while the victim restarts
// and its rooms move back included (they are measured from their write).
func TestMultiMemberProcessKillRestartOutboxUnderLoad(t *testing.T) {
	const (
		late   = 10 * time.Second
		bound  = 3 * time.Second
		settle = 8 * time.Second
	)
	run := startOutboxRun(t)
	f, afterKill, afterRestart := run.killAndRestart(t, run.c.Nodes[1], "kill")
	if afterKill > bound {
		t.Errorf("every room answered %s after the kill; want within %s", afterKill.Round(time.Millisecond), bound)
	}
	if afterRestart > bound {
		t.Errorf("every room answered %s after the restarted node was ready; want within %s", afterRestart.Round(time.Millisecond), bound)
	}
	time.Sleep(settle)
	run.finish(t, []outboxFault{f}, late, nil)
}

// outboxRun is the outbox fault tests' cluster: three roomcell processes
// (every role, the relay included) on a MariaDB of the test's own and an
// etcd of the test's own, 200 rooms under continuous JoinRoom load with
// read-your-writes reads, all publishing to one fake Tencent IM.
type outboxRun struct {
	srv     *mysqltest.Server
	fake    *imfake.Server
	c       *Cluster
	rooms   []string
	load    *Load
	stopped bool
}

func startOutboxRun(t *testing.T) *outboxRun {
	srv := mysqltest.StartServer(t)
	ec := StartEtcdCluster(t, 3)
	fake, err := imfake.Start("127.0.0.1:0", imfake.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fake.Close() })
	im := fake.ClientConfig()
	c := New(t, Options{Nodes: 3, BinDir: binDir, MySQLDSN: srv.DSN, EtcdCluster: ec, Edit: func(_ int, nc *NodeConfig) {
		// The load's users never heartbeat; presence would take them out.
		nc.Presence = map[string]any{"stale_after": "10m"}
		nc.IM = map[string]any{"enabled": true, "sdk_app_id": im.SDKAppID, "secret_key": im.SecretKey,
			"admin_identifier": im.AdminIdentifier, "base_url": im.BaseURL, "timeout": "4s",
			"rate_per_second": 100000}
	}})
	run := &outboxRun{srv: srv, fake: fake, c: c, rooms: RoomIDs(200)}
	CreateRooms(t, c.Nodes, run.rooms, 8)
	run.load = &Load{Nodes: c.Nodes, Rooms: run.rooms, RetryFor: 90 * time.Second, ReadYourWrites: true}
	run.load.Start(t, 12)
	t.Cleanup(func() {
		if !run.stopped {
			run.load.Stop()
		}
	})
	time.Sleep(3 * time.Second)
	return run
}

// killAndRestart SIGKILLs victim, waits until every room answered through
// the others (afterKill: from the kill), starts it again and waits until
// it is ready and every room answered (afterRestart: from its readiness).
func (r *outboxRun) killAndRestart(t *testing.T, victim *Node, name string) (f outboxFault, afterKill, afterRestart time.Duration) {
	start := time.Now()
	victim.Kill()
	others := slices.DeleteFunc(slices.Clone(r.c.Nodes), func(n *Node) bool { return n == victim })
	afterKill = AllRoomsAnswer(t, others, r.rooms, 30*time.Second)
	back := time.Now()
	victim.Start(t)
	ready := victim.WaitReady(t, 60*time.Second)
	afterRestart = AllRoomsAnswer(t, r.c.Nodes, r.rooms, 30*time.Second)
	t.Logf("%s (%s): every room answered through the others %s after the kill; restarted, ready %s after start, every room answered %s after that",
		name, victim.ID, afterKill.Round(time.Millisecond), ready.Round(time.Millisecond), afterRestart.Round(time.Millisecond))
	return outboxFault{name: name, start: start, recovered: back, restarted: time.Now()}, afterKill, afterRestart
}

// finish stops the load and checks it (nothing failed, lost, doubled or
// stale; more, when given, runs then), then waits for the outbox and
// checks every row's delivery against faults.
func (r *outboxRun) finish(t *testing.T, faults []outboxFault, late time.Duration, more func()) {
	r.load.Stop()
	r.stopped = true
	lres := r.load.Result()
	t.Logf("load: %d acknowledged, %d read back, %d needed a retry, %d answered as duplicates",
		lres.Acked, lres.Reads, lres.RetriedCommands, lres.Duplicates)
	if lres.Failed != 0 {
		t.Errorf("%d commands or reads failed for good:\n%s", lres.Failed, r.load.Failures(5))
	}
	if lres.StaleReads != 0 {
		t.Errorf("%d read-your-writes reads were stale:\n%s", lres.StaleReads, strings.Join(r.load.StaleReadErrors(10), "\n"))
	}
	r.c.VerifyLog(t, r.load.Acked())
	if more != nil {
		more()
	}
	total := r.c.WaitOutboxPublished(t, 30*time.Second)
	checkOutboxDelivery(t, r.c, r.fake, faults, total, late)
}

// checkPauseCalls: while the database is frozen, the nodes' store gates
// close within half a second of the first stalled call and abandon the
// calls waiting on it, so no attempt sent during the pause waits for the
// 3 s store timeout (none takes over 1 s); the attempts over 0.5 s (the
// ones caught in flight by the pause) are counted and reported.
func checkPauseCalls(t *testing.T, nodes []*Node, from, to time.Time) {
	t.Helper()
	all, overHalf, overOne, hung := 0, 0, 0, 0
	var slowest time.Duration
	byCode := map[codes.Code]int{}
	for _, n := range nodes {
		for _, c := range n.Calls(from, to) {
			all++
			byCode[c.Code]++
			slowest = max(slowest, c.Took)
			switch {
			case c.Took >= 2500*time.Millisecond:
				hung++
				fallthrough
			case c.Took > time.Second:
				overOne++
				fallthrough
			case c.Took > 500*time.Millisecond:
				overHalf++
			}
		}
	}
	t.Logf("attempts sent during the database pause: %d (by code %v), %d over 0.5 s, %d over 1 s, %d hung to the deadline (slowest %s)",
		all, byCode, overHalf, overOne, hung, slowest.Round(time.Millisecond))
	if overOne != 0 {
		t.Errorf("%d attempts sent during the database pause took over 1 s (%d hung to the deadline, slowest %s): the store gate closes within 0.5 s",
			overOne, hung, slowest)
	}
}

// maxAckedSeq is the highest acknowledged seq of each room.
func maxAckedSeq(acked map[string]Ack) map[string]int64 {
	out := map[string]int64{}
	for _, a := range acked {
		out[a.Room] = max(out[a.Room], a.Seq)
	}
	return out
}

// pauseReadCount counts GetRoom calls sent while the database is frozen:
// answered, refused, and stale (an answer whose seq is below a write
// acknowledged before the pause began: with the database frozen no later
// write can be acknowledged, so that bound is the room's newest).
type pauseReadCount struct {
	answered, refused, stale atomic.Int64
	mu                       sync.Mutex
	errs                     []string
	// why counts the refusals by code and reason; refusedRooms the rooms
	// refused at least once (an attempt is retried every 50 ms, so the
	// count of refusals depends on how fast they come).
	why          map[string]int
	refusedRooms map[string]bool
}

// start runs 8 readers of random rooms through random nodes (1 s
// deadline each) until the returned stop is called.
func (p *pauseReadCount) start(t *testing.T, nodes []*Node, rooms []string, acked map[string]int64) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				room := rooms[rand.IntN(len(rooms))]
				n := nodes[rand.IntN(len(nodes))]
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				r, err := n.Rooms(t).GetRoom(ctx, &v1.GetRoomRequest{AppCode: App, RoomId: room})
				cancel()
				if err != nil {
					p.refused.Add(1)
					p.mu.Lock()
					if p.why == nil {
						p.why, p.refusedRooms = map[string]int{}, map[string]bool{}
					}
					p.why[fmt.Sprintf("%s %s", status.Code(err), Reason(err))]++
					p.refusedRooms[room] = true
					p.mu.Unlock()
					time.Sleep(50 * time.Millisecond)
					continue
				}
				p.answered.Add(1)
				if seq := r.GetRoom().GetSeq(); seq < acked[room] {
					p.stale.Add(1)
					p.mu.Lock()
					if len(p.errs) < 10 {
						p.errs = append(p.errs, fmt.Sprintf("%s via %s: seq %d, a write at seq %d was acknowledged before the pause", room, n.ID, seq, acked[room]))
					}
					p.mu.Unlock()
				}
			}
		}()
	}
	return func() { close(done); wg.Wait() }
}

func (p *pauseReadCount) errors() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.errs)
}

// outboxRow is one room_outbox row as the check reads it.
type outboxRow struct {
	room               string
	seq                int64
	created, marked    time.Time
	status, resolvedBy string
	eventType          string
}

// checkOutboxDelivery reads every outbox row and the fake IM's messages:
// every row published and at IM, each room's events in room order there,
// and the rows that reached IM more than late after the later of their
// write and the recovery of the fault they lived through.
func checkOutboxDelivery(t *testing.T, c *Cluster, fake *imfake.Server, faults []outboxFault, total int, late time.Duration) {
	t.Helper()
	rows := map[string]outboxRow{}
	c.eachRoomDB(t, func(ctx context.Context, rdb *RoomDB) error {
		q, err := rdb.DB.QueryContext(ctx, "SELECT event_id, room_id, room_seq, created_at_ms, COALESCE(published_at_ms, 0), status, COALESCE(resolved_by, ''), event_type FROM room_outbox")
		if err != nil {
			return err
		}
		defer q.Close()
		for q.Next() {
			var id string
			var r outboxRow
			var created, marked int64
			if err := q.Scan(&id, &r.room, &r.seq, &created, &marked, &r.status, &r.resolvedBy, &r.eventType); err != nil {
				return err
			}
			r.created, r.marked = time.UnixMilli(created), time.UnixMilli(marked)
			rows[id] = r
		}
		return q.Err()
	})
	if len(rows) != total {
		t.Fatalf("read %d outbox rows, counted %d", len(rows), total)
	}

	msgs := fake.Messages()
	if len(msgs) > 0 && msgs[0].ID != 1 {
		t.Fatalf("the fake IM dropped its oldest records (first kept id %d): the run sent more than it keeps", msgs[0].ID)
	}
	first := map[string]time.Time{}  // event id → first arrival at IM
	lastSeq := map[string][2]int64{} // room → (seq, index) of its last new event at IM
	outOfOrder, repeats, unknown := 0, 0, 0
	var orderErrs []string
	for _, m := range msgs {
		for _, id := range m.EventIDs {
			if _, seen := first[id]; seen {
				repeats++
				continue
			}
			first[id] = m.At
			r, ok := rows[id]
			if !ok {
				unknown++
				continue
			}
			pos := [2]int64{r.seq, eventIndex(id)}
			if prev, ok := lastSeq[r.room]; ok && (pos[0] < prev[0] || pos[0] == prev[0] && pos[1] <= prev[1]) {
				outOfOrder++
				if len(orderErrs) < 10 {
					orderErrs = append(orderErrs, fmt.Sprintf("%s: %s reached IM after seq %d.%d", r.room, id, prev[0], prev[1]))
				}
			}
			lastSeq[r.room] = pos
		}
	}

	var notPublished, resolved, missing, lateRows, groups int
	var worst time.Duration
	var worstID, worstFault string
	var markedLate int // by the store's published_at_ms (the mark after the send) instead
	buckets := map[time.Duration]int{time.Second: 0, 5 * time.Second: 0, late: 0}
	lateByFault, over1ByFault, over5ByFault := map[string]int{}, map[string]int{}, map[string]int{}
	var slow []string // up to 10 rows over 5 s, for the log
	for id, r := range rows {
		if r.status != "published" {
			notPublished++
		}
		if r.resolvedBy != "" {
			resolved++
		}
		if r.eventType == room.TypeRoomCreated {
			// Its delivery is the room's group at IM, not a message.
			if _, ok := fake.Group(roomim.GroupID(App, r.room)); !ok {
				missing++
			}
			groups++
			continue
		}
		at, ok := first[id]
		if !ok {
			missing++
			continue
		}
		ref, fault := r.created, "none"
		for _, f := range faults {
			// A row written before the fault ended and still unsent when it
			// began lived through it: its clock starts at the recovery.
			if r.created.Before(f.recovered) && at.After(f.start) && f.recovered.After(ref) {
				ref, fault = f.recovered, f.name
			}
		}
		d := at.Sub(ref)
		for b := range buckets {
			if d > b {
				buckets[b]++
			}
		}
		if d > time.Second {
			over1ByFault[fault]++
		}
		if d > 5*time.Second {
			over5ByFault[fault]++
			if len(slow) < 10 {
				slow = append(slow, fmt.Sprintf("%s written %s, at IM %s (%s after %s; fault: %s)", id,
					r.created.Format("15:04:05.000"), at.Format("15:04:05.000"), d.Round(time.Millisecond), ref.Format("15:04:05.000"), fault))
			}
		}
		if d > late {
			lateRows++
			lateByFault[fault]++
		}
		if d > worst {
			worst, worstID, worstFault = d, id, fault
		}
		if r.marked.Sub(ref) > late {
			markedLate++
		}
	}
	t.Logf("outbox: %d rows (%d RoomCreated: a group at IM), %d not published, %d resolved (skipped/parked), %d never at IM; at IM: %d messages, %d repeated events, %d events of no row, %d out of room order",
		len(rows), groups, notPublished, resolved, missing, len(msgs), repeats, unknown, outOfOrder)
	t.Logf("first arrival at IM after the later of the write and the fault's recovery: > 1 s: %d (by fault: %v), > 5 s: %d (by fault: %v), > %s: %d (by fault: %v; %d by published_at_ms); worst %s (%s, fault: %s)",
		buckets[time.Second], over1ByFault, buckets[5*time.Second], over5ByFault, late, lateRows, lateByFault, markedLate, worst.Round(time.Millisecond), worstID, worstFault)
	if len(slow) > 0 {
		t.Logf("rows over 5 s:\n%s", strings.Join(slow, "\n"))
	}
	for _, f := range faults {
		t.Logf("%s: %s → %s (%s); restarted node ready %s", f.name, f.start.Format("15:04:05.000"), f.recovered.Format("15:04:05.000"),
			f.recovered.Sub(f.start).Round(time.Millisecond), f.restarted.Format("15:04:05.000"))
	}
	if notPublished != 0 || missing != 0 {
		t.Errorf("%d outbox rows not published, %d never reached IM", notPublished, missing)
	}
	if outOfOrder != 0 {
		t.Errorf("%d events reached IM out of room order:\n%s", outOfOrder, strings.Join(orderErrs, "\n"))
	}
	if lateRows != 0 {
		t.Errorf("%d outbox rows reached IM more than %s after the later of their write and the recovery (worst %s)", lateRows, late, worst)
	}
}

// eventIndex is the last field of an event id (app:room:seq:i), the
// event's place among its command's events.
func eventIndex(id string) int64 {
	i := strings.LastIndexByte(id, ':')
	n, _ := strconv.ParseInt(id[i+1:], 10, 64)
	return n
}
