package presence

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hyapp/roomcell/actors/directory"
	"github.com/hyapp/roomcell/actors/supervise"
	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/internal/promset"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/room"
)

// WorkerName is the actor's name under the supervisor and the `worker`
// log field.
const WorkerName = "presence_stale"

// Directory is what the worker reads and repairs; persistence.Directory
// satisfies it.
type Directory interface {
	StalePresenceRooms(ctx context.Context, keys []persistence.RoomKey, beforeMs int64, limit int) ([][]persistence.Presence, error)
	ClearUserRoom(ctx context.Context, key persistence.RoomKey, userID string) error
}

// Deps is everything the worker uses. Directory, Hosted, Rooms and a
// complete Config (as Load gives it, or configs.WithDefaults) are required.
type Deps struct {
	Directory Directory
	Hosted    *directory.Hosted
	// Rooms sends the leaves (a *roomgrain.Client in production).
	Rooms  directory.Commander
	Config configs.PresenceConfig
	NodeID string
	Logger *slog.Logger // default slog.Default()
	// Timeout bounds one directory call or one leave (default 5s).
	Timeout time.Duration
	Clock   func() time.Time
	Metrics *Metrics // nil: not counted
}

// checked refuses missing dependencies and a Config that is not complete
// (the error names its key); it applies no configuration default, only the
// fallbacks that are not configuration.
func (d Deps) checked() (Deps, error) {
	if d.Directory == nil || d.Hosted == nil || d.Rooms == nil {
		return d, errors.New("presence: Directory, Hosted and Rooms are required")
	}
	if err := d.Config.Validate(); err != nil {
		return d, err
	}
	supervise.Fallbacks(&d.Logger, &d.Clock)
	if d.Timeout <= 0 {
		d.Timeout = 5 * time.Second
	}
	return d, nil
}

// Result counts what one scan did.
type Result struct {
	Rooms   int // hosted rooms scanned
	Stale   int // stale presence entries found
	Left    int // users taken out of their room
	Cleared int // orphan entries (user no longer in the room) cleared
	Failed  int // leaves or clears that failed; the next scan retries
	// Errors counts rooms whose presence could not be read.
	Errors int
}

// LeaveCommandID is the command_id of the heartbeat_timeout leave of user
// in key, last seen at lastSeenMs: a scan that finds the same entry again
// sends the same id, and a user who heartbeated since gets a new one.
func LeaveCommandID(key persistence.RoomKey, user string, lastSeenMs int64) string {
	h := sha256.Sum256([]byte(key.AppCode + "\x00" + key.RoomID + "\x00" + user + "\x00" + strconv.FormatInt(lastSeenMs, 10)))
	return room.HeartbeatTimeoutIDPrefix + hex.EncodeToString(h[:16])
}

// ScanOnce is one scan without an actor: for each hosted room (starting at
// index start, wrapping, so a busy room cannot starve the others when
// batch_size runs out) it reads the members last seen at or before
// now-stale_after and sends each a LeaveRoom. It stops early when ctx is
// cancelled, between rooms or leaves. It returns where the next scan
// should start.
//
// A user who heartbeats between the read and the leave is still taken out
// (the window is one directory round trip after stale_after of silence);
// their next heartbeat answers "not a member" and the client rejoins, as
// after a kick.
func ScanOnce(ctx context.Context, deps Deps, start int) (Result, int, error) {
	d, err := deps.checked()
	if err != nil {
		return Result{}, start, err
	}
	var res Result
	rooms := d.Hosted.Rooms()
	if len(rooms) == 0 {
		return res, 0, nil
	}
	start %= len(rooms)
	n := len(rooms)
	// In scan order, rotated in place (rooms is this scan's own copy).
	slices.Reverse(rooms[:start])
	slices.Reverse(rooms[start:])
	slices.Reverse(rooms)
	cutoff := d.Clock().Add(-d.Config.StaleAfter).UnixMilli()
	budget := d.Config.BatchSize
	done := 0 // rooms of the scan order visited
	// The rooms are read readBatch at a time: one directory call (one
	// Redis round trip) per batch, not one per room, so a node with 100k
	// rooms makes ~400 calls a scan instead of 100k.
	for lo := 0; lo < n && ctx.Err() == nil && budget > 0; lo += readBatch {
		batch := rooms[lo:min(lo+readBatch, n)]
		cctx, cancel := context.WithTimeout(ctx, d.Timeout)
		stale, err := d.Directory.StalePresenceRooms(cctx, batch, cutoff, budget)
		cancel()
		if err != nil {
			res.Rooms += len(batch)
			res.Errors += len(batch)
			done = lo + len(batch)
			d.Metrics.scanError()
			d.Logger.Warn("presence: reading stale members failed; next scan retries", "worker", WorkerName,
				"rooms", len(batch), "first_app_code", batch[0].AppCode, "first_room_id", batch[0].RoomID, "error", err)
			continue
		}
		for j, key := range batch {
			if ctx.Err() != nil || budget <= 0 {
				break
			}
			done = lo + j + 1
			res.Rooms++
			// Each room was read with the budget left before the batch:
			// the later ones stop at what is left now.
			for _, p := range stale[j] {
				if ctx.Err() != nil || budget <= 0 {
					break
				}
				budget--
				res.Stale++
				d.leave(ctx, key, p, &res)
			}
		}
	}
	next := (start + done) % n
	return res, next, nil
}

// readBatch is how many rooms one directory read covers.
const readBatch = 256

func (d Deps) leave(ctx context.Context, key persistence.RoomKey, p persistence.Presence, res *Result) {
	id := LeaveCommandID(key, p.UserID, p.LastSeenMs)
	cctx, cancel := context.WithTimeout(ctx, d.Timeout)
	reply, err := d.Rooms.Execute(cctx, &v1.RoomCommand{Command: &v1.RoomCommand_LeaveRoom{LeaveRoom: &v1.LeaveRoomRequest{
		CommandId: id, AppCode: key.AppCode, RoomId: key.RoomID, UserId: p.UserID, Reason: room.ReasonHeartbeatTimeout}}})
	cancel()
	attrs := []any{"worker", WorkerName, "app_code", key.AppCode, "room_id", key.RoomID,
		"user_id", p.UserID, "last_seen_ms", p.LastSeenMs, "command_id", id}
	switch {
	case err == nil && !reply.GetDuplicate():
		res.Left++
		d.Metrics.outcome("left")
		d.Logger.Info("presence: stale member left the room", attrs...)
		return
	case err == nil, errors.Is(err, room.ErrNotMember), errors.Is(err, errclass.NotFound), errors.Is(err, room.ErrRoomClosed):
		// An earlier scan's leave (a duplicate) or the room no longer has
		// them: the entry is an orphan, its clear pending in the room's
		// directory worker or lost while the directory was away.
		cctx, cancel := context.WithTimeout(ctx, d.Timeout)
		err = d.Directory.ClearUserRoom(cctx, key, p.UserID)
		cancel()
		if err == nil {
			res.Cleared++
			d.Metrics.outcome("cleared")
			return
		}
	}
	res.Failed++
	d.Metrics.outcome("failed")
	d.Logger.Warn("presence: stale member not taken out; next scan retries", append(attrs, "error", err)...)
}

// Metrics are the worker's Prometheus instruments. A nil *Metrics records
// nothing.
type Metrics struct {
	Scans      prometheus.Counter
	ScanErrors prometheus.Counter
	Leaves     *prometheus.CounterVec // by result: left, cleared, failed
}

// NewMetrics creates the instruments and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	s := promset.New(reg, "presence")
	m := &Metrics{
		Scans:      s.Counter("roomcell_presence_stale_scans_total", "Scans of the presence stale worker."),
		ScanErrors: s.Counter("roomcell_presence_stale_scan_errors_total", "Rooms whose presence the stale worker could not read."),
		Leaves: s.CounterVec("roomcell_presence_stale_members_total",
			"Stale members handled by the stale worker, by result (left: LeaveRoom heartbeat_timeout; cleared: orphan entry; failed: retried next scan).",
			"result"),
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	for _, r := range []string{"left", "cleared", "failed"} {
		m.Leaves.WithLabelValues(r) // at zero from the start
	}
	return m, nil
}

func (m *Metrics) scan() {
	if m != nil {
		m.Scans.Inc()
	}
}

func (m *Metrics) scanError() {
	if m != nil {
		m.ScanErrors.Inc()
	}
}

func (m *Metrics) outcome(result string) {
	if m != nil {
		m.Leaves.WithLabelValues(result).Inc()
	}
}

// ScanResult is a scan's outcome, what the worker's RunNow returns.
type ScanResult struct {
	Result Result
	Err    error
}

// round is one incarnation's scan for the shared poller shell; the
// round-robin position over the hosted rooms starts afresh per
// incarnation.
func round(d Deps) supervise.Round[ScanResult] {
	next := 0
	return func(ctx context.Context) (time.Duration, ScanResult) {
		d.Metrics.scan()
		res, n, err := ScanOnce(ctx, d, next)
		next = n
		if err != nil {
			d.Logger.Error("presence: scan failed", "worker", WorkerName, "error", err)
		}
		return d.Config.ScanInterval, ScanResult{Result: res, Err: err}
	}
}

// Start validates deps (presence.stale_after shorter than scan_interval is
// an error naming the key) and spawns the worker as the child
// "presence_stale" of sup, on the shared poller shell (actors/supervise):
// under a worker Supervisor it is restarted after any number of panics
// with backoff, counted in roomcell_worker_restarts_total{worker} and
// listed on /readyz while it waits. The first scan runs one scan_interval
// after start, so rooms re-registering on activation seed their members'
// presence first. It does not look at Config.On(): the caller decides.
// RunNow on the poller runs a scan and waits for it (tests, operators; the
// next scan is one scan_interval after it). Its Stop cancels the scan in
// progress (between leaves; a leave in flight gets its timeout): call it
// before the cluster leaves and before the directory closes.
func Start(sup *supervise.Supervisor, deps Deps) (*supervise.Poller[ScanResult], error) {
	d, err := deps.checked()
	if err != nil {
		return nil, err
	}
	return supervise.StartPoller(sup, supervise.PollerSpec[ScanResult]{Name: WorkerName, FirstDelay: d.Config.ScanInterval,
		New: func() supervise.Round[ScanResult] { return round(d) }})
}
