package directory

// The directory worker: runs a room's directory work in order, off the
// command path, on its own queue (roomgrain.Serial).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/room"

	"github.com/hyapp/roomcell/actors/roomgrain"
	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/persistence"
)

// joinTimes is a room's committed membership as the directory sees it:
// State.Members, where a join of a user who already is a member (a no-op
// for the room) moves their join time forward in rejoined. That join was
// acknowledged too and is the user's newest choice: a leave caused by an
// older join elsewhere must not end it. rejoined lives only as long as the
// activation (it is not room state).
//
// members is the grain's own State.Members, which the grain changes in
// place once a command is stored, between the link's Applying and
// Committed, which hold mu; the worker reads under mu. The room's
// goroutine reads without the lock (it is the only writer).
type joinTimes struct {
	mu       sync.RWMutex
	members  map[string]int64
	rejoined map[string]int64 // replaced, never changed
}

// at returns the user's join time and whether they are a member.
func (j *joinTimes) at(user string) (int64, bool) {
	j.mu.RLock()
	defer j.mu.RUnlock()
	at, ok := j.members[user]
	if !ok {
		return 0, false
	}
	return max(at, j.rejoined[user]), true
}

// all returns every member's join time.
func (j *joinTimes) all() map[string]int64 {
	j.mu.RLock()
	defer j.mu.RUnlock()
	out := maps.Clone(j.members)
	for u, at := range j.rejoined {
		if _, ok := out[u]; ok {
			out[u] = max(out[u], at)
		}
	}
	return out
}

func (j *joinTimes) setRejoined(rejoined map[string]int64) {
	j.mu.Lock()
	j.rejoined = rejoined
	j.mu.Unlock()
}

// worker runs a room's directory work in order, off the command path.
// Its fields are its queue's (run): only work on it touches them.
type worker struct {
	run roomgrain.Serial
	// link is the worker's link: the node's settings, the room's key and
	// logger, the backlog count, the grain's newest committed membership
	// (joins: read it through its methods, the grain changes it) and the
	// merged entry and refresh. Pointers of the worker's own to each were
	// 40 bytes of every active room.
	link *link
	// Listing writes are paced (Deps.ListingGap): lastListedNs is
	// when the last one was made (Unix ns), due is set while a write is
	// scheduled for the end of the gap (the entry stays in link.entry
	// meanwhile, so the grain queues no more update steps and newer
	// entries merge into it).
	lastListedNs int64
	due          *time.Timer
}

// current reports whether the join of user at joinedAtMs is still the
// user's membership here. Work runs after the commit that asked for it, and
// two rooms' work is not ordered: by then the user may have left (and
// joined elsewhere), and acting on the old join would overwrite the
// directory entry of the room they are in now and evict them from it.
// join looks again after its write, which closes the gap between the two.
func (w *worker) current(user string, joinedAtMs int64) bool {
	at, ok := w.link.joins.at(user)
	return ok && at == joinedAtMs
}

// work runs a batch of the grain's steps, in order.
func (w *worker) work(steps []func(w *worker)) {
	defer w.link.backlog.Add(-1)
	for _, step := range steps {
		step(w)
	}
}

// listingDue is the write held back by the gap, at its end (not counted
// in the backlog: the grain did not queue it).
func (w *worker) listingDue() {
	w.due = nil
	w.writeEntry()
}

func (w *worker) call() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), w.link.deps.Timeout)
}

func (w *worker) failed(op string, err error, attrs ...any) {
	w.link.deps.Metrics.failed(op)
	w.link.room.Log().Warn("directory: "+op+" failed; the room's next refresh repairs it", append(attrs, "error", err)...)
}

func (w *worker) heartbeat(user string, nowMs int64) {
	ctx, cancel := w.call()
	defer cancel()
	if err := w.link.deps.Directory.Heartbeat(ctx, w.link.room.Key(), user, nowMs); err != nil {
		w.failed("heartbeat", err, "user_id", user)
	}
}

func (w *worker) join(user string, joinedAtMs int64, joinCommandID string) {
	if !w.current(user, joinedAtMs) {
		return // the leave that ended it is queued behind and clears up
	}
	ctx, cancel := w.call()
	defer cancel()
	prev, err := w.link.deps.Directory.SetUserRoom(ctx, w.link.room.Key(), user, joinedAtMs)
	if err != nil {
		w.failed("set_user_room", err, "user_id", user)
		return
	}
	if prev.RoomID == "" {
		return
	}
	// Every displaced room is displaced by exactly one swap, and only its
	// displacer settles it (one room per user). The check above is not
	// atomic with the write: the user may have left here, or joined prev,
	// in between. Looking again after the write is enough, because the
	// commit that ended this join published the membership before its
	// reply, so before any later join elsewhere could be written.
	held := w.current(user, joinedAtMs)
	if prev.JoinedAtMs < joinedAtMs || (prev.JoinedAtMs == joinedAtMs && held) {
		w.leave(prev.RoomID, user, leaveID("join", joinedAtMs, w.link.room.Key().RoomID, joinCommandID, user))
		return
	}
	// prev holds the newer join (its write landed first), or this join
	// ended before its write did: prev gets its entry back. A stale entry
	// of this room goes first, so the claim sees no entry or a newer one.
	if !held {
		if err := w.link.deps.Directory.ClearUserRoom(ctx, w.link.room.Key(), user); err != nil {
			w.failed("clear_user_room", err, "user_id", user)
			return
		}
	}
	prevKey := persistence.RoomKey{AppCode: w.link.room.Key().AppCode, RoomID: prev.RoomID}
	c, err := w.link.deps.Directory.ClaimUserRoom(ctx, prevKey, user, prev.JoinedAtMs)
	if err != nil {
		w.failed("claim_user_room", err, "user_id", user)
		return
	}
	w.settle(prev.RoomID, prev.JoinedAtMs, c)
}

// settle sends the leave a claim of roomID's join at joinedAtMs calls for:
// won over another room's older join, that room lets go; lost to a join as
// new or newer, roomID lets go. The ids are the same whichever room's
// worker made the claim, so the rooms dedupe each other's resends.
func (w *worker) settle(roomID string, joinedAtMs int64, c persistence.Claim) {
	switch {
	case c.Won && c.Other != "":
		w.leave(c.Other, c.UserID, leaveID("won", joinedAtMs, roomID, fmt.Sprint(joinedAtMs), c.UserID))
	case !c.Won:
		w.leave(roomID, c.UserID, leaveID("lost", joinedAtMs, roomID, fmt.Sprint(joinedAtMs), c.UserID))
	}
}

func (w *worker) clear(user string) {
	ctx, cancel := w.call()
	defer cancel()
	if err := w.link.deps.Directory.ClearUserRoom(ctx, w.link.room.Key(), user); err != nil {
		w.failed("clear_user_room", err, "user_id", user)
	}
}

func (w *worker) removeRoom() {
	w.link.entry.Store(nil) // a held-back entry must not list the room again
	ctx, cancel := w.call()
	defer cancel()
	if err := w.link.deps.Directory.RemoveRoom(ctx, w.link.room.Key()); err != nil {
		w.failed("remove_room", err)
	}
}

// update writes the newest listing entry; the grain queues one update
// step while none is waiting, so entries of commands committed meanwhile
// merge into this one. Within ListingGap of the last write it leaves the
// entry waiting and writes it at the end of the gap instead.
func (w *worker) update() {
	if w.due != nil {
		return // the scheduled write takes the newest entry
	}
	if wait := w.link.deps.ListingGap - time.Duration(time.Now().UnixNano()-w.lastListedNs); wait > 0 {
		w.due = time.AfterFunc(wait, func() { w.run.Post(w.listingDue) })
		return
	}
	w.writeEntry()
}

func (w *worker) writeEntry() {
	u := w.link.entry.Swap(nil)
	if u == nil {
		return
	}
	w.lastListedNs = time.Now().UnixNano()
	ctx, cancel := w.call()
	defer cancel()
	rc, err := w.link.deps.Directory.UpdateRoom(ctx, u.e)
	if err != nil {
		w.failed("update_room", err)
		return
	}
	w.rank(rc, u.e.Heat, u.seq)
}

func (w *worker) rank(rc persistence.RankChange, heat, seq int64) {
	if rc.Prev > 0 && rc.Prev != rc.Rank {
		w.link.rankChanged(seq, rc, heat)
	}
}

func (w *worker) sync(s persistence.RoomSync, seq int64) {
	w.link.syncQueued.Store(false)
	// A held-back entry no newer than the one synced must not overwrite
	// it at the end of the gap.
	if u := w.link.entry.Load(); u != nil && u.seq <= seq {
		w.link.entry.CompareAndSwap(u, nil)
	}
	ctx, cancel := w.call()
	defer cancel()
	rc, claims, err := w.link.deps.Directory.SyncRoom(ctx, s)
	if err != nil {
		w.failed("sync_room", err)
		return
	}
	w.rank(rc, s.Entry.Heat, seq)
	for _, c := range claims {
		// A lost claim makes this room let go through its own mailbox,
		// like any leave.
		w.settle(w.link.room.Key().RoomID, s.Members[c.UserID], c)
	}
}

// leave tells room to let user go, from a goroutine: the worker must not
// wait on another grain, and the leave may go to this very room. The
// command_id is deterministic, so a leave resent by a later refresh or
// retried here is deduplicated by the room; a user no longer in the room
// (or a leave refused as stale) ends it. Retries are bounded: a leave that
// never lands is redone by the next refresh of either room.
func (w *worker) leave(roomID, user, commandID string) {
	rooms, m, log := w.link.deps.Rooms, w.link.deps.Metrics, w.link.room.Log()
	if rooms == nil {
		m.leave("failed")
		log.Warn("directory: no cluster to send a switched_room leave through", "to_room_id", roomID, "user_id", user)
		return
	}
	rc := &v1.RoomCommand{Command: &v1.RoomCommand_LeaveRoom{LeaveRoom: &v1.LeaveRoomRequest{
		CommandId: commandID, AppCode: w.link.room.Key().AppCode, RoomId: roomID, UserId: user, Reason: room.ReasonSwitchedRoom}}}
	go func() {
		backoff := 200 * time.Millisecond
		var err error
		for range 3 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err = rooms.Execute(ctx, rc)
			cancel()
			switch {
			case err == nil:
				m.leave("left")
				return
			case errors.Is(err, errclass.Precondition), errors.Is(err, errclass.NotFound):
				m.leave("noop") // not a member any more, room closed or gone, or back here
				return
			case !errors.Is(err, errclass.Unavailable):
				m.leave("failed")
				log.Warn("directory: switched_room leave refused", "to_room_id", roomID, "user_id", user, "error", err)
				return
			}
			time.Sleep(backoff)
			backoff *= 4
		}
		m.leave("failed")
		log.Warn("directory: switched_room leave did not land; the next refresh resends it", "to_room_id", roomID, "user_id", user, "error", err)
	}()
}

// leaveID is the command_id of a directory-driven leave, derived from the
// facts that caused it: the same facts give the same id (so rooms dedupe
// resends) and it passes CheckID (no ':' or '/', at most 57 bytes). upTo,
// readable back with leaveBound, is the newest join time the leave may
// end: the join time of the room that displaced the user.
func leaveID(kind string, upTo int64, parts ...string) string {
	h := sha256.New()
	h.Write([]byte(kind))
	for _, p := range parts {
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	return room.DirectoryIDPrefix + kind + "-" + strconv.FormatInt(upTo, 10) + "-" + hex.EncodeToString(h.Sum(nil))[:32]
}

// leaveBound reads upTo back from a leaveID.
func leaveBound(commandID string) (int64, bool) {
	parts := strings.Split(commandID, "-")
	if len(parts) != 4 || parts[0] != "dir" {
		return 0, false
	}
	upTo, err := strconv.ParseInt(parts[2], 10, 64)
	return upTo, err == nil
}
