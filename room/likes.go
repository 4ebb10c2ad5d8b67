package room

import (
	"cmp"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/hyapp/roomcell/errclass"
)

// Likes at live-room rates. A like is never a log row or an IM message of
// its own: the grain gathers a window of LikeRoom commands and decides
// them together (DecideLikes), writing one RoomLiked (the window's count,
// the room's new total, the top likers) and one RoomLikeReceipts (what
// makes a retried like recognisable) in one log row, and answers the
// window's likes once that row is stored. A single LikeRoom decided
// alone (Decide, the property test) is a window of one.
const CmdLikeRoom = "LikeRoom"

// Limits of likes.
const (
	// MaxLikeCount bounds one LikeRoom's count: a client gathers taps
	// into one call, and a forged count cannot move the total far.
	MaxLikeCount = 100
	// MaxLikeUsers: a RoomLiked names at most this many likers (the
	// window's top ones); the rest are summed in Others, so the IM
	// message stays small in a room of any size.
	MaxLikeUsers = 10
	// MaxLikeReceipts: the likes of each user the room recognises a
	// retry of (the newest ones) ...
	MaxLikeReceipts = 16
	// LikeReceiptMs: ... of a user who liked within this long. A retry
	// older than either is counted again, so a client retries a lost
	// answer soon (the client library does within seconds).
	LikeReceiptMs = 2 * 60 * 1000
)

// LikesIDPrefix starts the command_id of a window's log row (the room's
// own; a client's like keeps its id in the receipts).
const LikesIDPrefix = "likes-"

// Likes returns the room's running like total.
func (s State) Likes() int64 { return s.x().Likes }

// LikeReceipts are one user's recent likes: when they last liked and a
// receipt per like (likeReceipt), oldest first.
type LikeReceipts struct {
	LastMs int64    `json:"last_ms"`
	IDs    []string `json:"ids"`
}

// likeReceipt identifies one like request in the room's state: a 64-bit
// hash of its command_id (the id itself may be 128 bytes, and a room
// keeps thousands) and the count it asked for, which tells a retry from
// another like under a reused id.
func likeReceipt(commandID string, count int64) string {
	return LikeID(commandID) + ":" + strconv.FormatInt(count, 10)
}

// LikeID is the part of a like's receipt that names its command_id.
func LikeID(commandID string) string {
	sum := sha256.Sum256([]byte(commandID))
	return hex.EncodeToString(sum[:8])
}

// LikeReceiptOf is the receipt c's like leaves.
func LikeReceiptOf(c Command) string { return likeReceipt(c.CommandID, c.LikeCount) }

// LikeRef is whose like a receipt is, and the receipt.
type LikeRef struct{ UserID, Receipt string }

// LikeIDs indexes the room's receipts by LikeID: a command_id that named
// a like of one user is refused for another user's like or another
// command (the grain asks; the receipts are kept per user).
func LikeIDs(s State) map[string]LikeRef { return LikeIDsIn(s.x().LikeReceipts) }

// LikeIDsIn is LikeIDs of a state's receipts map (never changed in place:
// each window's row replaces it, so it may be read on another goroutine).
func LikeIDsIn(rs map[string]LikeReceipts) map[string]LikeRef {
	n := 0
	for _, r := range rs {
		n += len(r.IDs)
	}
	idx := make(map[string]LikeRef, n)
	for u, r := range rs {
		for _, rc := range r.IDs {
			id, _, _ := strings.Cut(rc, ":")
			idx[id] = LikeRef{UserID: u, Receipt: rc}
		}
	}
	return idx
}

// LikeHeld reports whether the room still holds ref's receipt (receipts
// are forgotten after LikeReceiptMs, and past a user's newest
// MaxLikeReceipts).
func LikeHeld(s State, ref LikeRef) bool { return LikeHeldIn(s.x().LikeReceipts, ref) }

// LikeHeldIn is LikeHeld of a state's receipts map.
func LikeHeldIn(rs map[string]LikeReceipts, ref LikeRef) bool {
	return slices.Contains(rs[ref.UserID].IDs, ref.Receipt)
}

// LikeConflict reports whether c may not be counted under its command_id
// because the id named another request: ref is the like it named (the
// same user and count: a retry, no conflict).
func LikeConflict(c Command, ref LikeRef) error {
	if ref.UserID == c.UserID && ref.Receipt == likeReceipt(c.CommandID, c.LikeCount) {
		return nil
	}
	return errclass.Errorf(errclass.Exists, "command_id %q was already used for another LikeRoom", c.CommandID)
}

func checkLike(c Command) error {
	if c.LikeCount < 1 || c.LikeCount > MaxLikeCount {
		return errclass.Invalidf("count must be between 1 and %d, got %d", MaxLikeCount, c.LikeCount)
	}
	return nil
}

// decideLikeRoom decides one like alone: a window of one.
func decideLikeRoom(s State, c Command) ([]Event, error) {
	w := NewLikeWindow()
	if out, _ := w.add(s, c, LikeID(c.CommandID)); out.Err != nil {
		return nil, out.Err
	}
	evs, refused := w.Close(s, c.NowMs)
	return evs, refused[c.UserID]
}

// CheckLike is the rules one like must pass, without counting it (nor
// looking at retries): the grain refuses at once what they refuse, and
// its window decides the like again at its end.
func CheckLike(s State, c Command) error {
	if _, err := validate(c); err != nil {
		return err
	}
	if c.Type != CmdLikeRoom {
		return errclass.Invalidf("%s is not a LikeRoom", c.Type)
	}
	return likeRefused(s, c, c.NowMs)
}

// CheckLiker is the rules a user's likes must pass in the room now: the
// room open, the user a member and not banned. The grain asks it of each
// like as it arrives (map lookups: the rest of a like's decision is made
// off the room's goroutine, LikeWindow.Put), and the window's end asks it
// again of each liker (LikeTally.Close).
func CheckLiker(s State, userID string, nowMs int64) error {
	return likeRefused(s, Command{UserID: userID}, nowMs)
}

// likeRefused: the room open, the user a member and not banned.
func likeRefused(s State, c Command, nowMs int64) error {
	switch {
	case !s.Exists:
		return ErrRoomNotFound
	case s.Status == StatusClosed:
		return ErrRoomClosed
	case s.BannedAt(c.UserID, nowMs):
		return ErrBanned
	case !s.IsMember(c.UserID):
		return ErrNotMember
	}
	return nil
}

// LikeOutcome is what became of one like of a window: counted (zero),
// a retry of a like counted before (Recorded: nothing more is counted),
// or refused (Err).
type LikeOutcome struct {
	Recorded bool
	Err      error
}

// LikeRecorded reports whether the room already counted c (a retry):
// ok with a nil error. A like under the same command_id with another
// count is errclass.Exists: an id names one request.
func LikeRecorded(s State, c Command) (ok bool, err error) {
	id := LikeID(c.CommandID)
	return recordedAs(s, c, id, id+":"+strconv.FormatInt(c.LikeCount, 10))
}

// recordedAs is LikeRecorded of c, whose LikeID and receipt are given.
func recordedAs(s State, c Command, id, want string) (ok bool, err error) {
	r, found := s.x().LikeReceipts[c.UserID]
	if !found {
		return false, nil
	}
	for _, have := range r.IDs {
		if have == want {
			return true, nil
		}
		if h, _, _ := strings.Cut(have, ":"); h == id {
			return false, errclass.Errorf(errclass.Exists, "command_id %q was already used for a LikeRoom with another count", c.CommandID)
		}
	}
	return false, nil
}

// DecideLikes decides a window of LikeRoom commands against s at nowMs:
// the events of the likes it counts (none when it counts none) and an
// outcome per command. Each like passes the rules LikeRoom alone passes
// (the room open, the user a member and not banned); a retry of a like
// counted before, in an earlier window or this one, counts nothing. It
// is a LikeWindow given every like at nowMs, then closed.
func DecideLikes(s State, cmds []Command, nowMs int64) ([]Event, []LikeOutcome) {
	w := NewLikeWindow()
	out := make([]LikeOutcome, len(cmds))
	for i, c := range cmds {
		c.NowMs = nowMs
		out[i], _ = w.Add(s, c)
	}
	evs, refused := w.Close(s, nowMs)
	for i, c := range cmds {
		if err := refused[c.UserID]; err != nil && out[i].Err == nil {
			out[i] = LikeOutcome{Err: err}
		}
	}
	return evs, out
}

// LikeWindow is a window of likes decided as they arrive (Add), so that
// closing it (Close) costs the window's likers, not its likes: a room
// liked thousands of times a second closes a window in well under a
// millisecond, and the commands queued behind it are not held up.
type LikeWindow struct {
	users map[string]*windowLiker
	seen  map[string]LikeRef // LikeID → the like counted under it here
	count int64
}

// windowLiker is one user's likes in a window, receipts in arrival order.
type windowLiker struct {
	count    int64
	receipts []string
}

// NewLikeWindow is an empty window.
func NewLikeWindow() *LikeWindow {
	return &LikeWindow{users: map[string]*windowLiker{}, seen: map[string]LikeRef{}}
}

// Count is the likes the window counts so far.
func (w *LikeWindow) Count() int64 { return w.count }

// Refs is the window's likes by LikeID. It is the window's own: read it,
// never change it.
func (w *LikeWindow) Refs() map[string]LikeRef { return w.seen }

// Ref is the like counted in the window under a LikeID, if any.
func (w *LikeWindow) Ref(id string) (LikeRef, bool) {
	ref, ok := w.seen[id]
	return ref, ok
}

// Add decides c against s at c.NowMs and the likes added before it:
// refused (Err), a retry of a like counted before (Recorded; inWindow
// when it was counted in this window, so it is answered with it), or
// counted in the window (the zero outcome). Close assumes s's receipts
// are the ones the window's likes were added against: only a window's
// own row changes them.
func (w *LikeWindow) Add(s State, c Command) (out LikeOutcome, inWindow bool) {
	return w.AddAs(s, c, LikeID(c.CommandID))
}

// AddAs is Add of c whose LikeID(c.CommandID) the caller holds: the hash
// is most of a like's cost, and the grain looks the id up first.
func (w *LikeWindow) AddAs(s State, c Command, id string) (out LikeOutcome, inWindow bool) {
	if _, err := validate(c); err != nil {
		return LikeOutcome{Err: err}, false
	}
	if c.Type != CmdLikeRoom {
		return LikeOutcome{Err: errclass.Invalidf("%s is not a LikeRoom", c.Type)}, false
	}
	return w.add(s, c, id)
}

// add is Add of a valid LikeRoom whose LikeID is id.
func (w *LikeWindow) add(s State, c Command, id string) (out LikeOutcome, inWindow bool) {
	if !s.Exists || s.Status == StatusClosed {
		return LikeOutcome{Err: likeRefused(s, c, c.NowMs)}, false
	}
	receipt := id + ":" + strconv.FormatInt(c.LikeCount, 10)
	rec, err := recordedAs(s, c, id, receipt)
	switch {
	case err != nil:
		return LikeOutcome{Err: err}, false
	case rec:
		return LikeOutcome{Recorded: true}, false
	}
	if prev, ok := w.seen[id]; ok {
		if err := LikeConflict(c, prev); err != nil {
			return LikeOutcome{Err: err}, false
		}
		return LikeOutcome{Recorded: true}, true
	}
	if err := likeRefused(s, c, c.NowMs); err != nil {
		return LikeOutcome{Err: err}, false
	}
	w.put(c, id, receipt)
	return LikeOutcome{}, false
}

// Put adds c, whose LikeID is id, to the window without the room: its
// caller checked the user (CheckLiker) and the room's receipts (a retry
// of a like counted in an earlier window is not put), so only c itself
// and the window's own likes are decided here. Close decides the likers
// against the room at the window's end, as for Add.
func (w *LikeWindow) Put(c Command, id string) (out LikeOutcome, inWindow bool) {
	if _, err := validate(c); err != nil {
		return LikeOutcome{Err: err}, false
	}
	if c.Type != CmdLikeRoom {
		return LikeOutcome{Err: errclass.Invalidf("%s is not a LikeRoom", c.Type)}, false
	}
	receipt := id + ":" + strconv.FormatInt(c.LikeCount, 10)
	if prev, ok := w.seen[id]; ok {
		if err := LikeConflict(c, prev); err != nil {
			return LikeOutcome{Err: err}, false
		}
		return LikeOutcome{Recorded: true}, true
	}
	w.put(c, id, receipt)
	return LikeOutcome{}, false
}

// put counts a like the window decided.
func (w *LikeWindow) put(c Command, id, receipt string) {
	w.seen[id] = LikeRef{UserID: c.UserID, Receipt: receipt}
	u := w.users[c.UserID]
	if u == nil {
		u = &windowLiker{}
		w.users[c.UserID] = u
	}
	u.count += c.LikeCount
	u.receipts = append(u.receipts, receipt)
	w.count += c.LikeCount
}

// Close ends the window against s at nowMs: the events of its likes
// (none when it counts none), and the users whose likes it refuses now
// (they left, were banned, or the room closed since they liked). The
// window is not used after.
func (w *LikeWindow) Close(s State, nowMs int64) ([]Event, map[string]error) {
	return w.Tally().Close(s, nowMs)
}

// LikeTally is an ended window's likes in the order its event names
// them, made off the room's goroutine (Tally), so that closing it
// against the room (Close) costs a rules check per liker.
type LikeTally struct {
	users []talliedLiker // most likes first, equal counts by user id
	count int64
	// receipts: each liker's, the newest MaxLikeReceipts (applying the
	// event keeps no more, so a longer list would only make the row
	// bigger and replay the same).
	receipts map[string][]string
	packed   []byte // Encode's
}

type talliedLiker struct {
	id    string
	count int64
}

// Tally ends the window: its likers sorted and its receipts gathered.
// The window is not used after; Refs stays readable.
func (w *LikeWindow) Tally() *LikeTally {
	t := &LikeTally{users: make([]talliedLiker, 0, len(w.users)), count: w.count, receipts: make(map[string][]string, len(w.users))}
	for u, l := range w.users {
		t.users = append(t.users, talliedLiker{id: u, count: l.count})
		t.receipts[u] = l.receipts[max(0, len(l.receipts)-MaxLikeReceipts):]
	}
	slices.SortFunc(t.users, func(a, b talliedLiker) int {
		// Most likes first; equal counts by user id, so the event is the
		// same whatever order the window's likes came in.
		return cmp.Or(cmp.Compare(b.count, a.count), cmp.Compare(a.id, b.id))
	})
	return t
}

// Encode packs the tally's receipts as its RoomLikeReceipts is stored,
// so that encoding the event on the room's goroutine copies them (used
// when Close refuses nobody). Call it before Close, off the room.
func (t *LikeTally) Encode() {
	if p, ok := appendPackedUsers(nil, t.receipts); ok && len(t.receipts) > 0 {
		t.packed = p
	}
}

// Count is the likes the tally holds, before Close refuses any.
func (t *LikeTally) Count() int64 { return t.count }

// Close decides the tally against s at nowMs, as LikeWindow.Close. The
// tally is not used after.
func (t *LikeTally) Close(s State, nowMs int64) ([]Event, map[string]error) {
	var refused map[string]error
	count := t.count
	liked := RoomLiked{Likers: len(t.users)}
	for _, u := range t.users {
		if err := likeRefused(s, Command{UserID: u.id}, nowMs); err != nil {
			if refused == nil {
				refused = map[string]error{}
			}
			refused[u.id] = err
			count -= u.count
			liked.Likers--
			delete(t.receipts, u.id)
			continue
		}
		if len(liked.Users) < MaxLikeUsers {
			liked.Users = append(liked.Users, LikeUser{UserID: u.id, Count: u.count})
		}
	}
	if count == 0 {
		return nil, refused
	}
	liked.Count, liked.Total, liked.Others = count, s.Likes()+count, count
	for _, u := range liked.Users {
		liked.Others -= u.Count
	}
	receipts := RoomLikeReceipts{AtMs: nowMs, Users: t.receipts}
	if refused == nil {
		receipts.packed = t.packed
	}
	return []Event{liked, receipts}, refused
}

// RoomLiked: a window's likes. Count is the window's, Total the room's
// after it; Users the window's top likers (most first, at most
// MaxLikeUsers), Others the likes of the rest, Likers how many users
// liked in the window.
type RoomLiked struct {
	Count  int64      `json:"count"`
	Total  int64      `json:"total"`
	Likers int        `json:"likers"`
	Users  []LikeUser `json:"users"`
	Others int64      `json:"others,omitempty"`
}

// LikeUser is one liker's likes in a window.
type LikeUser struct {
	UserID string `json:"user_id"`
	Count  int64  `json:"count"`
}

func (RoomLiked) EventType() string { return TypeRoomLiked }
func (e RoomLiked) apply(s *State) {
	if e.Total != s.Likes() {
		s.mx().Likes = e.Total
	}
}

// RoomLikeReceipts: the receipts of a window's counted likes by user, at
// the window's time. Applying it forgets users who have not liked for
// LikeReceiptMs and keeps each user's newest MaxLikeReceipts. Its JSON
// packs each user's receipts (packReceipts); rows written with a list of
// receipt strings ("users") decode as well.
type RoomLikeReceipts struct {
	AtMs  int64               `json:"at_ms"`
	Users map[string][]string `json:"users"`
	// packed is Users as MarshalJSON writes them, when the window's
	// tally packed them off the room's goroutine (LikeTally.Encode).
	packed []byte
}

// likeReceiptsJSON is RoomLikeReceipts as stored: Packed when every
// receipt packs, else Users as they are.
type likeReceiptsJSON struct {
	AtMs   int64               `json:"at_ms"`
	Users  map[string][]string `json:"users,omitempty"`
	Packed map[string]string   `json:"packed,omitempty"`
}

// EncodedJSON is the event's JSON when its receipts were packed off the
// room's goroutine (LikeTally.Encode), else nil (Encoded).
func (e RoomLikeReceipts) EncodedJSON() []byte {
	if e.packed == nil {
		return nil
	}
	b := strconv.AppendInt(append(make([]byte, 0, 64+len(e.packed)), `{"at_ms":`...), e.AtMs, 10)
	return append(append(append(b, `,"packed":`...), e.packed...), '}')
}

func (e RoomLikeReceipts) MarshalJSON() ([]byte, error) {
	if b := e.EncodedJSON(); b != nil {
		return b, nil
	}
	b := strconv.AppendInt(append(make([]byte, 0, 64), `{"at_ms":`...), e.AtMs, 10)
	if len(e.Users) == 0 {
		return append(b, `,"users":{}}`...), nil // as a window of none always was
	}
	packed, ok := appendPackedUsers(nil, e.Users)
	if !ok {
		return json.Marshal(likeReceiptsJSON{AtMs: e.AtMs, Users: e.Users})
	}
	return append(append(append(b, `,"packed":`...), packed...), '}'), nil
}

// appendPackedUsers appends the JSON object of each user's receipts
// packed, by hand (encoding/json's reflection over a map of lists took
// twice as long); ok false when a receipt does not pack.
func appendPackedUsers(b []byte, users map[string][]string) ([]byte, bool) {
	b = append(b, '{')
	for i, u := range slices.Sorted(maps.Keys(users)) {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(appendJSONString(b, u), `:"`...)
		var ok bool
		if b, ok = appendPacked(b, users[u]); !ok {
			return b, false
		}
		b = append(b, '"')
	}
	return append(b, '}'), true
}

// appendJSONString appends s as a JSON string: as it is when it needs no
// escaping (a user id), else as encoding/json writes it.
func appendJSONString(b []byte, s string) []byte {
	for i := range len(s) {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	return append(append(append(b, '"'), s...), '"')
}

func (e *RoomLikeReceipts) UnmarshalJSON(b []byte) error {
	var in likeReceiptsJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	e.AtMs, e.Users = in.AtMs, in.Users
	if in.Packed == nil {
		return nil
	}
	if e.Users == nil {
		e.Users = make(map[string][]string, len(in.Packed))
	}
	for u, p := range in.Packed {
		rs, err := unpackReceipts(p)
		if err != nil {
			return fmt.Errorf("like receipts of %q: %w", u, err)
		}
		e.Users[u] = rs
	}
	return nil
}

// likeReceiptsStored is LikeReceipts as a snapshot may hold it: the
// receipt strings (as written: encoding/json writes them faster than a
// packed form is made and checked, and a snapshot is written every
// hundred commands), or packed.
type likeReceiptsStored struct {
	LastMs int64    `json:"last_ms"`
	IDs    []string `json:"ids,omitempty"`
	Packed *string  `json:"packed,omitempty"`
}

func (r *LikeReceipts) UnmarshalJSON(b []byte) error {
	var in likeReceiptsStored
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	r.LastMs, r.IDs = in.LastMs, in.IDs
	if in.Packed != nil {
		ids, err := unpackReceipts(*in.Packed)
		if err != nil {
			return err
		}
		r.IDs = ids
	}
	return nil
}

// A packed receipt is 9 bytes: the 8 of its LikeID and its count (at
// most MaxLikeCount, one byte); a user's receipts are their records in
// order, base64 (12 characters a receipt where the strings take 21 with
// their quotes).
const packedReceipt = 9

// packReceipts packs rs; ok false when one is not a receipt likeReceipt
// makes (it is then stored as it is).
func packReceipts(rs []string) (string, bool) {
	b, ok := appendPacked(make([]byte, 0, len(rs)*12), rs)
	return string(b), ok
}

// appendPacked appends rs packed and base64-encoded to b.
func appendPacked(b []byte, rs []string) ([]byte, bool) {
	var rec [packedReceipt]byte
	var raw [MaxLikeReceipts * packedReceipt]byte
	buf := raw[:0]
	for _, r := range rs {
		id, count, ok := strings.Cut(r, ":")
		if !ok || len(id) != 16 {
			return b, false
		}
		for i := range 8 {
			hi, lo := unhex(id[2*i]), unhex(id[2*i+1])
			if hi > 15 || lo > 15 {
				return b, false
			}
			rec[i] = hi<<4 | lo
		}
		n, err := strconv.ParseUint(count, 10, 8)
		if err != nil || n == 0 || strconv.FormatUint(n, 10) != count {
			return b, false
		}
		rec[8] = byte(n)
		buf = append(buf, rec[:]...)
	}
	return base64.RawStdEncoding.AppendEncode(b, buf), true
}

// unhex is a lower-case hex digit's value; 16 for anything else.
func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	}
	return 16
}

// unpackReceipts is the receipts packReceipts packed.
func unpackReceipts(p string) ([]string, error) {
	b, err := base64.RawStdEncoding.DecodeString(p)
	if err != nil || len(b)%packedReceipt != 0 {
		return nil, fmt.Errorf("packed like receipts: %d bytes, not records of %d (%v)", len(b), packedReceipt, err)
	}
	rs := make([]string, 0, len(b)/packedReceipt)
	for i := 0; i < len(b); i += packedReceipt {
		rs = append(rs, hex.EncodeToString(b[i:i+8])+":"+strconv.Itoa(int(b[i+8])))
	}
	return rs, nil
}

func (RoomLikeReceipts) EventType() string { return TypeRoomLikeReceipts }
func (e RoomLikeReceipts) apply(s *State) {
	if len(e.Users) == 0 && s.x().LikeReceipts == nil {
		return
	}
	x := s.mx()
	// Copy on write: a state's clone shares the map (Extra.clone).
	next := make(map[string]LikeReceipts, len(x.LikeReceipts)+len(e.Users))
	for u, r := range x.LikeReceipts {
		if r.LastMs >= e.AtMs-LikeReceiptMs {
			next[u] = r
		}
	}
	for u, ids := range e.Users {
		next[u] = LikeReceipts{LastMs: e.AtMs, IDs: newestReceipts(next[u].IDs, ids)}
	}
	x.LikeReceipts = next
}

// newestReceipts is the last MaxLikeReceipts of old followed by add, in
// a new slice (old may be shared with a clone of the state), copying no
// more than it keeps.
func newestReceipts(old, add []string) []string {
	add = add[max(0, len(add)-MaxLikeReceipts):]
	old = old[max(0, len(old)+len(add)-MaxLikeReceipts):]
	return append(append(make([]string, 0, len(old)+len(add)), old...), add...)
}
