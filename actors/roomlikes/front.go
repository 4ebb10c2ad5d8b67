package roomlikes

import (
	"hash/maphash"
	"reflect"
	"sync"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hyapp/roomcell/actors/roomgrain"
	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/room"
)

// front is a liked room's front (roomgrain.OpenFront): this node's room
// client hands it the room's likes, and it decides each on the caller's
// goroutine, against the room as its last commit published it (view),
// what the room's goroutine would: the node holds the room's lease under
// the epoch its state was loaded under, the room exists and is open, the
// user is a member and not banned. A like that passes goes to the likes
// goroutine as one the room let through, which also finds its
// command_id among neither the room's recent commands nor the one the
// room is deciding now (liker.like); any other goes to the grain with
// its sender, which decides it as before (and explains a refusal). The room still checks each liker
// again when their window is committed (room.LikeTally.Close): a user
// who left or was banned since their like is not counted.
type front struct{ lk *liker }

func (f *front) SendUserMessage(_ *actor.PID, message any) {
	_, msg, sender := actor.UnwrapEnvelope(message)
	rc, ok := msg.(*v1.RoomCommand)
	if ok && rc.GetLikeRoom() != nil && f.lk.take(sender, rc) {
		return
	}
	f.lk.root.RequestWithCustomSender(f.lk.room, msg, sender)
}

func (f *front) SendSystemMessage(*actor.PID, any) {}
func (f *front) Stop(*actor.PID)                   {}

// take lets a like through at the front to the likes goroutine, which
// decides it (liker.like); false: the room decides it. Nothing here waits
// but for a commit changing the room (viewMu): the thousands of callers
// of a liked room read the view at once, and each hands its like over a
// channel (a lock taken by them all, its holders queued behind each
// other, held up the room's own commits by hundreds of milliseconds).
func (lk *liker) take(to *actor.PID, rc *v1.RoomCommand) bool {
	l := rc.GetLikeRoom()
	if k := lk.r.Key(); l.GetAppCode() != k.AppCode || l.GetRoomId() != k.RoomID {
		return false
	}
	now := lk.r.Now().UnixMilli()
	lk.viewMu.RLock()
	defer lk.viewMu.RUnlock()
	v := &lk.view
	if !v.takes || v.closed || room.CheckLiker(v.room, l.GetUserId(), now) != nil || !lk.r.Holds(v.epoch) {
		return false
	}
	m := likeIn{to: to, rc: rc, nowMs: now, front: true}
	// Handed over under the read lock, so that none is once the room
	// closed the front (the likes goroutine answers those still queued
	// when it stops); never waited for (a full queue sends the like to
	// the room), so the room never waits for the likes goroutine.
	select {
	case lk.in <- m:
		return true
	default:
		return false
	}
}

// hash is a command_id's key among the recent ids: two ids of one hash
// send a like to the room, which decides it by the ids themselves.
func (lk *liker) hash(commandID string) uint64 { return maphash.String(lk.seed, commandID) }

// recentIDs is the room's recent command ids, hashed: the newest
// roomgrain.RecentCommands ids committed, as the room keeps its own
// (Room.RecentID), so that every id the room holds is here.
type recentIDs struct {
	set   map[uint64]struct{}
	order []uint64 // oldest first
}

// reset: the room's recent ids are ids (the front opens, a load).
func (r *recentIDs) reset(lk *liker, ids []string) {
	r.set, r.order = make(map[uint64]struct{}, len(ids)), r.order[:0]
	for _, id := range ids {
		r.add(lk, id)
	}
}

func (r *recentIDs) add(lk *liker, id string) {
	if id == "" {
		return
	}
	h := lk.hash(id)
	if _, ok := r.set[h]; ok {
		return
	}
	if len(r.order) >= roomgrain.RecentCommands {
		delete(r.set, r.order[0])
		r.order = r.order[1:]
	}
	r.order = append(r.order, h)
	r.set[h] = struct{}{}
}

func (r *recentIDs) has(h uint64) bool {
	_, ok := r.set[h]
	return ok
}

// receiptsEncoder keeps the room's newest receipts encoded for its
// snapshot (roomgrain.ReceiptsEncoder), on a goroutine of its own: each
// window's row replaces the receipts map (never changed in place), and
// the newest one handed is encoded once the one before is done.
type receiptsEncoder struct {
	mu      sync.Mutex
	next    map[string]room.LikeReceipts // newest handed, not yet encoded
	nextOf  unsafe.Pointer
	have    []byte // the encoding of the map at haveOf
	haveOf  unsafe.Pointer
	running bool
}

// want hands the encoder the room's receipts now.
func (e *receiptsEncoder) want(rs map[string]room.LikeReceipts) {
	if rs == nil {
		return
	}
	of := reflect.ValueOf(rs).UnsafePointer()
	e.mu.Lock()
	defer e.mu.Unlock()
	if of == e.haveOf || of == e.nextOf {
		return
	}
	e.next, e.nextOf = rs, of
	if !e.running {
		e.running = true
		go e.run()
	}
}

func (e *receiptsEncoder) run() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for e.next != nil {
		rs, of := e.next, e.nextOf
		e.next, e.nextOf = nil, nil
		e.mu.Unlock()
		b := room.EncodeLikeReceipts(rs)
		e.mu.Lock()
		e.have, e.haveOf = b, of
	}
	e.running = false
}

// encoded is rs's encoding when it is ready.
func (e *receiptsEncoder) encoded(rs map[string]room.LikeReceipts) []byte {
	of := reflect.ValueOf(rs).UnsafePointer()
	e.mu.Lock()
	defer e.mu.Unlock()
	if of != e.haveOf {
		return nil
	}
	return e.have
}

// EncodedLikeReceipts: the receipts as the likes goroutine encoded them
// after the window that made them, when it is done.
func (o *observer) EncodedLikeReceipts(rs map[string]room.LikeReceipts) []byte {
	if o.enc == nil {
		return nil
	}
	return o.enc.encoded(rs)
}
