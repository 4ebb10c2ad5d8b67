package room_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/room"
)

func like(user string, count int64, opts ...opt) room.Command {
	return cmd(room.CmdLikeRoom, user, append([]opt{func(c *room.Command) { c.LikeCount = count }}, opts...)...)
}

func liked(count, total int64, users ...room.LikeUser) room.RoomLiked {
	return room.RoomLiked{Count: count, Total: total, Likers: len(users), Users: users}
}

func likeRules() []rule {
	aLiked := then(aRoom, like("alice", 3, commandID("l-1")))
	return []rule{
		{name: "like: a member's likes are counted", given: aRoom, cmd: like("alice", 5),
			want: []room.Event{liked(5, 5, room.LikeUser{UserID: "alice", Count: 5}),
				room.RoomLikeReceipts{AtMs: t0, Users: map[string][]string{"alice": {room.LikeReceiptFor("cmd-1", 5)}}}}},
		{name: "like: the total runs on", given: aLiked, cmd: like("bob", 2, commandID("l-2")),
			want: []room.Event{liked(2, 5, room.LikeUser{UserID: "bob", Count: 2}),
				room.RoomLikeReceipts{AtMs: t0, Users: map[string][]string{"bob": {room.LikeReceiptFor("l-2", 2)}}}}},
		{name: "like: a retry of a counted like counts nothing", given: aLiked, cmd: like("alice", 3, commandID("l-1"))},
		{name: "like: its id with another count is refused", given: aLiked, cmd: like("alice", 4, commandID("l-1")),
			err: errclass.Exists, class: errclass.Exists, msg: "l-1"},
		{name: "like: an outsider may not", given: aRoom, cmd: like("carol", 1), err: room.ErrNotMember, class: errclass.Precondition},
		{name: "like: a banned user may not", given: then(aRoom, banUser("owner", "alice", 60)), cmd: like("alice", 1),
			err: room.ErrBanned, class: errclass.Precondition},
		invalid("like: no count", aRoom, like("alice", 0), "count"),
		invalid("like: a count over the limit", aRoom, like("alice", room.MaxLikeCount+1), "count"),
		invalid("like: a negative count", aRoom, like("alice", -1), "count"),
	}
}

// A window: many likes decided together make one RoomLiked with the top
// likers and the rest summed, one receipt per counted like, and an
// outcome per like in the window's order.
func TestDecideLikesWindow(t *testing.T) {
	var members []room.Command
	for i := range room.MaxLikeUsers + 5 {
		members = append(members, join(fmt.Sprintf("u%02d", i)))
	}
	s := given(t, then(aRoom, append(members, like("alice", 7, commandID("old")))...)...)
	var window []room.Command
	for i := range room.MaxLikeUsers + 5 {
		// u00 likes most, u14 least; each user twice.
		n := int64(room.MaxLikeUsers + 5 - i)
		u := fmt.Sprintf("u%02d", i)
		window = append(window, like(u, n, commandID(u+"-a")), like(u, 1, commandID(u+"-b")))
	}
	window = append(window,
		like("alice", 7, commandID("old")),   // counted in an earlier window
		like("u00", 1, commandID("u00-b")),   // the same request twice in this window
		like("u00", 2, commandID("u00-a")),   // its id again with another count
		like("carol", 1, commandID("c-1")),   // not a member
		like("bob", 0, commandID("b-0")),     // invalid
		like("bob", 1, commandID("likes-9")), // validated as any like; the prefix is refused at the door
		like("bob", 3, commandID("u01-a")),   // another user's id in this window
	)
	evs, out := room.DecideLikes(s, window, t0+1000)
	n := room.MaxLikeUsers + 5
	for i := range 2 * n {
		if out[i] != (room.LikeOutcome{}) {
			t.Fatalf("like %d: %+v, want counted", i, out[i])
		}
	}
	if !out[2*n].Recorded || out[2*n].Err != nil || !out[2*n+1].Recorded {
		t.Fatalf("retries: %+v %+v", out[2*n], out[2*n+1])
	}
	if !errors.Is(out[2*n+6].Err, errclass.Exists) {
		t.Fatalf("another user's id: %+v", out[2*n+6])
	}
	if !errors.Is(out[2*n+2].Err, errclass.Exists) || !errors.Is(out[2*n+3].Err, room.ErrNotMember) || !errors.Is(out[2*n+4].Err, errclass.Invalid) {
		t.Fatalf("refusals: %+v", out[2*n+2:2*n+5])
	}
	var total int64
	for i := range n {
		total += int64(n-i) + 1
	}
	total++ // bob
	l := evs[0].(room.RoomLiked)
	if l.Count != total || l.Total != total+7 || l.Likers != n+1 || len(l.Users) != room.MaxLikeUsers {
		t.Fatalf("window %+v, want count %d", l, total)
	}
	var named int64
	for i, u := range l.Users {
		if want := fmt.Sprintf("u%02d", i); u.UserID != want || u.Count != int64(n-i)+1 {
			t.Fatalf("top %d: %+v, want %s", i, u, want)
		}
		named += u.Count
	}
	if named+l.Others != l.Count {
		t.Fatalf("named %d + others %d != %d", named, l.Others, l.Count)
	}
	r := evs[1].(room.RoomLikeReceipts)
	if got := r.Users["u03"]; !reflect.DeepEqual(got, []string{room.LikeReceiptFor("u03-a", int64(n-3)), room.LikeReceiptFor("u03-b", 1)}) || r.AtMs != t0+1000 {
		t.Fatalf("receipts of u03 %v at %d", got, r.AtMs)
	}
	// The same likes in another order decide the same RoomLiked (of a
	// reused id, whichever came first is counted).
	rev := make([]room.Command, 2*n)
	for i, c := range window[:2*n] {
		rev[2*n-1-i] = c
	}
	evs1, _ := room.DecideLikes(s, window[:2*n], t0+1000)
	evs2, _ := room.DecideLikes(s, rev, t0+1000)
	if !reflect.DeepEqual(evs1[0], evs2[0]) || evs1[0].(room.RoomLiked).Count != total-1 {
		t.Fatalf("order changed the event:\n%+v\n%+v", evs[0], evs2[0])
	}
	// Nothing counted: no events.
	if evs, _ := room.DecideLikes(s, []room.Command{like("carol", 1)}, t0); evs != nil {
		t.Fatalf("events for nothing counted: %+v", evs)
	}
}

// Receipts are bounded: a user's newest MaxLikeReceipts, and users who
// have not liked for LikeReceiptMs are forgotten (a retry of theirs
// would count again: the documented window).
func TestLikeReceiptsBounded(t *testing.T) {
	cmds := then(aRoom)
	for i := range room.MaxLikeReceipts + 3 {
		cmds = append(cmds, like("alice", 1, commandID(fmt.Sprintf("a-%d", i))))
	}
	cmds = append(cmds, like("bob", 1, commandID("b-1")))
	s := given(t, cmds...)
	if got := len(s.Extra.LikeReceipts["alice"].IDs); got != room.MaxLikeReceipts {
		t.Fatalf("alice keeps %d receipts, want %d", got, room.MaxLikeReceipts)
	}
	if ok, _ := room.LikeRecorded(s, like("alice", 1, commandID("a-0"))); ok {
		t.Fatal("the oldest receipt was kept")
	}
	if ok, _ := room.LikeRecorded(s, like("alice", 1, commandID(fmt.Sprintf("a-%d", room.MaxLikeReceipts+2)))); !ok {
		t.Fatal("the newest receipt was dropped")
	}
	if s.Likes() != room.MaxLikeReceipts+4 || room.Summary(s).Likes != s.Likes() {
		t.Fatalf("total %d, view %d", s.Likes(), room.Summary(s).Likes)
	}
	later := given(t, then(cmds, like("admin", 1, commandID("ad-1"), at(t0+room.LikeReceiptMs+1)))...)
	if _, ok := later.Extra.LikeReceipts["alice"]; ok {
		t.Fatalf("alice's receipts outlived %d ms: %+v", room.LikeReceiptMs, later.Extra.LikeReceipts)
	}
	if later.Likes() != s.Likes()+1 {
		t.Fatalf("forgetting receipts changed the total: %d", later.Likes())
	}
}

// A window decided as its likes arrive: each like is decided against the
// room when it comes (what the grain answers at once), and its end
// against the room then. A liker who left or was banned meanwhile has
// all their likes refused, in-window retries too; the others are counted
// as DecideLikes counts the same likes.
func TestLikeWindowDecidedAsLikesArrive(t *testing.T) {
	s := given(t, aRoom...)
	w := room.NewLikeWindow()
	adds := []room.Command{
		like("alice", 2, commandID("a-1"), at(t0+10)),
		like("bob", 5, commandID("b-1"), at(t0+20)),
		like("alice", 2, commandID("a-1"), at(t0+30)), // retry in the window
		like("bob", 1, commandID("b-2"), at(t0+40)),
		like("admin", 3, commandID("b-1"), at(t0+50)), // bob's id
		like("carol", 1, commandID("c-1"), at(t0+60)), // not a member
	}
	type res struct {
		out      room.LikeOutcome
		inWindow bool
	}
	var got []res
	for _, c := range adds {
		out, in := w.Add(s, c)
		got = append(got, res{out, in})
	}
	if got[0] != (res{}) || got[1] != (res{}) || got[3] != (res{}) || !got[2].out.Recorded || !got[2].inWindow {
		t.Fatalf("outcomes %+v", got)
	}
	if !errors.Is(got[4].out.Err, errclass.Exists) || !errors.Is(got[5].out.Err, room.ErrNotMember) || w.Count() != 8 {
		t.Fatalf("refusals %+v %+v, count %d", got[4], got[5], w.Count())
	}
	// bob leaves before the window ends: his likes are refused then.
	later := given(t, then(aRoom, leave("bob", at(t0+100)))...)
	evs, refused := w.Close(later, t0+500)
	if !errors.Is(refused["bob"], room.ErrNotMember) || len(refused) != 1 {
		t.Fatalf("refused at the end: %v", refused)
	}
	want := []room.Event{liked(2, 2, room.LikeUser{UserID: "alice", Count: 2}),
		room.RoomLikeReceipts{AtMs: t0 + 500, Users: map[string][]string{"alice": {room.LikeReceiptFor("a-1", 2)}}}}
	if !reflect.DeepEqual(evs, want) {
		t.Fatalf("events\n%+v\nwant\n%+v", evs, want)
	}
	// Nobody left: the same likes close as DecideLikes decides them.
	w2 := room.NewLikeWindow()
	for _, c := range adds {
		w2.Add(s, c)
	}
	evs2, refused2 := w2.Close(s, t0+500)
	evs3, _ := room.DecideLikes(s, adds, t0+500)
	if refused2 != nil || !reflect.DeepEqual(evs2, evs3) || evs2[0].(room.RoomLiked).Count != 8 {
		t.Fatalf("window %+v (refused %v), DecideLikes %+v", evs2, refused2, evs3)
	}
	// A room closed meanwhile refuses the window.
	closed := given(t, then(aRoom, closeRoom("owner", at(t0+100)))...)
	if evs, refused := room.NewLikeWindow().Close(closed, t0+500); evs != nil || refused != nil {
		t.Fatalf("empty window: %+v %v", evs, refused)
	}
	w3 := room.NewLikeWindow()
	w3.Add(s, adds[0])
	if evs, refused := w3.Close(closed, t0+500); evs != nil || !errors.Is(refused["alice"], room.ErrRoomClosed) {
		t.Fatalf("closed room: %+v %v", evs, refused)
	}
}

// A window put together off the room (Put: the liker and the receipts
// checked by the caller) closes as the same likes added against the room
// close: the same events, whatever order they came in. Put decides the
// like itself (its count) and the window's own likes (a retry, another
// request under a counted id); a user's likes past MaxLikeReceipts in one
// window leave only the newest receipts, as applying them keeps.
func TestLikeWindowPutAndTally(t *testing.T) {
	s := given(t, aRoom...)
	var adds []room.Command
	for i := range room.MaxLikeReceipts + 4 {
		adds = append(adds, like("alice", 1+int64(i%3), commandID(fmt.Sprintf("a-%d", i)), at(t0+int64(i))))
	}
	adds = append(adds, like("bob", 5, commandID("b-1")), like("bob", 2, commandID("b-2")))
	put, added, reversed, encoded := room.NewLikeWindow(), room.NewLikeWindow(), room.NewLikeWindow(), room.NewLikeWindow()
	for i, c := range adds {
		out, in := put.Put(c, room.LikeID(c.CommandID))
		if out != (room.LikeOutcome{}) || in {
			t.Fatalf("put %d: %+v %v", i, out, in)
		}
		added.Add(s, c)
		encoded.Put(c, room.LikeID(c.CommandID))
		last := adds[len(adds)-1-i]
		reversed.Put(last, room.LikeID(last.CommandID))
	}
	if out, in := put.Put(adds[0], room.LikeID(adds[0].CommandID)); !out.Recorded || !in {
		t.Fatalf("a retry put in its window: %+v %v", out, in)
	}
	reused := like("bob", 1, commandID("a-0"))
	if out, _ := put.Put(reused, room.LikeID("a-0")); !errors.Is(out.Err, errclass.Exists) {
		t.Fatalf("another user's like under a counted id: %+v", out)
	}
	if out, _ := put.Put(like("bob", 0, commandID("b-3")), room.LikeID("b-3")); !errors.Is(out.Err, errclass.Invalid) {
		t.Fatalf("a count of 0 put: %+v", out)
	}
	tally := put.Tally()
	evs, refused := tally.Close(s, t0+500)
	if refused != nil {
		t.Fatalf("refused %v", refused)
	}
	evs2, _ := added.Close(s, t0+500)
	if !reflect.DeepEqual(evs, evs2) {
		t.Fatalf("put then tallied\n%+v\nadded against the room\n%+v", evs, evs2)
	}
	if evs3, _ := reversed.Tally().Close(s, t0+500); !reflect.DeepEqual(evs3[0], evs[0]) {
		t.Fatalf("the same likes in reverse: %+v, want %+v", evs3[0], evs[0])
	}
	// Packed ahead of Close (off the room), the receipts are stored the
	// same.
	enc := encoded.Tally()
	enc.Encode()
	evs4, _ := enc.Close(s, t0+500)
	b1, err1 := json.Marshal(evs[1])
	b4, err4 := json.Marshal(evs4[1])
	if err1 != nil || err4 != nil || string(b1) != string(b4) || !reflect.DeepEqual(evs4[1].(room.RoomLikeReceipts).Users, evs[1].(room.RoomLikeReceipts).Users) {
		t.Fatalf("encoded ahead\n%s (%v)\nat the commit\n%s (%v)", b4, err4, b1, err1)
	}
	// The grain stores what was made ahead as it is (room.Encoded).
	if ahead, ok := evs4[1].(room.Encoded); !ok || string(ahead.EncodedJSON()) != string(b1) || evs[1].(room.Encoded).EncodedJSON() != nil {
		t.Fatalf("EncodedJSON of the event packed ahead: %s", ahead.EncodedJSON())
	}
	receipts := evs[1].(room.RoomLikeReceipts).Users
	var newest []string
	for _, c := range adds[4 : room.MaxLikeReceipts+4] {
		newest = append(newest, room.LikeReceiptOf(c))
	}
	if !reflect.DeepEqual(receipts["alice"], newest) || len(receipts["bob"]) != 2 {
		t.Fatalf("receipts %v, want alice's newest %d", receipts, room.MaxLikeReceipts)
	}
	// Applied, the events hold what applying every like's receipt holds.
	after := room.ApplyCommand(s, s.Seq+1, evs)
	for _, c := range adds[4:] {
		if ok, err := room.LikeRecorded(after, c); !ok || err != nil {
			t.Fatalf("%s not recorded after the window: %v", c.CommandID, err)
		}
	}
	if ok, _ := room.LikeRecorded(after, adds[0]); ok {
		t.Fatal("a receipt past the newest was kept")
	}
	// The liker checked again at the end: bob left.
	later := given(t, then(aRoom, leave("bob", at(t0+100)))...)
	w := room.NewLikeWindow()
	w.Put(adds[len(adds)-1], room.LikeID(adds[len(adds)-1].CommandID))
	if evs, refused := w.Tally().Close(later, t0+500); evs != nil || !errors.Is(refused["bob"], room.ErrNotMember) {
		t.Fatalf("a liker who left: %+v %v", evs, refused)
	}
	// Packed ahead, and one of two likers refused at the end: the row
	// holds the other's receipts only.
	w2 := room.NewLikeWindow()
	for _, c := range []room.Command{adds[0], adds[len(adds)-1]} {
		w2.Put(c, room.LikeID(c.CommandID))
	}
	t2 := w2.Tally()
	t2.Encode()
	evs5, refused := t2.Close(later, t0+500)
	b5, _ := json.Marshal(evs5[1])
	back, err := room.DecodeEvent(room.TypeRoomLikeReceipts, b5)
	if err != nil || !errors.Is(refused["bob"], room.ErrNotMember) || !reflect.DeepEqual(back.(room.RoomLikeReceipts).Users, map[string][]string{"alice": {room.LikeReceiptOf(adds[0])}}) {
		t.Fatalf("packed ahead, bob refused: %s (%v), refused %v", b5, err, refused)
	}
	if err := room.CheckLiker(later, "bob", t0+500); !errors.Is(err, room.ErrNotMember) {
		t.Fatalf("CheckLiker of a user who left: %v", err)
	}
	if err := room.CheckLiker(s, "alice", t0+500); err != nil {
		t.Fatalf("CheckLiker of a member: %v", err)
	}
}

// A window's receipts are stored packed (9 bytes a receipt, base64) in
// its row and decode to the same receipts; rows written with lists of
// receipt strings decode as before, and a receipt that does not pack is
// stored as it is. Snapshots hold the strings and read packed ones too.
func TestLikeReceiptsStoredPacked(t *testing.T) {
	var rs []string
	for i := range 3 * room.MaxLikeReceipts {
		rs = append(rs, room.LikeReceiptFor(fmt.Sprintf("l-%d", i), int64(1+i%room.MaxLikeCount)))
	}
	rs = append(rs, room.LikeReceiptFor("max", room.MaxLikeCount))
	e := room.RoomLikeReceipts{AtMs: t0, Users: map[string][]string{"alice": rs, "bob": rs[:1], "q\"<&>\\é\n": rs[2:4]}}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := json.Marshal(map[string]any{"at_ms": e.AtMs, "users": e.Users})
	if len(b)*10 > len(plain)*6 || !strings.Contains(string(b), `"packed"`) {
		t.Fatalf("packed %d bytes, as strings %d: %s", len(b), len(plain), b)
	}
	for name, enc := range map[string][]byte{"packed": b, "strings": plain} {
		got, err := room.DecodeEvent(room.TypeRoomLikeReceipts, enc)
		if err != nil || !reflect.DeepEqual(got, e) {
			t.Fatalf("%s: decoded %+v, %v; want %+v", name, got, err, e)
		}
	}
	odd := room.RoomLikeReceipts{AtMs: t0, Users: map[string][]string{"alice": {rs[0], "not-a-receipt"}}}
	if b, _ := json.Marshal(odd); !strings.Contains(string(b), "not-a-receipt") {
		t.Fatalf("a receipt that does not pack: %s", b)
	} else if got, err := room.DecodeEvent(room.TypeRoomLikeReceipts, b); err != nil || !reflect.DeepEqual(got, odd) {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	if _, err := room.DecodeEvent(room.TypeRoomLikeReceipts, []byte(`{"at_ms":1,"packed":{"alice":"AAAA"}}`)); err == nil {
		t.Fatal("a packed value of 3 bytes decoded")
	}
	// In a snapshot.
	s := room.ApplyCommand(given(t, aRoom...), 99, []room.Event{e})
	snap, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := room.UnmarshalState(snap)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []room.Command{like("alice", room.MaxLikeCount, commandID("max")), like("bob", 1, commandID("l-0"))} {
		if ok, err := room.LikeRecorded(back, c); !ok || err != nil {
			t.Fatalf("%s of %s not recorded after the snapshot: %v", c.CommandID, c.UserID, err)
		}
	}
	// A snapshot holds the receipt strings (encoding/json writes them
	// faster than a packed form is made and checked), and reads packed
	// ones too.
	if !reflect.DeepEqual(room.LikeIDs(back), room.LikeIDs(s)) || strings.Contains(string(snap), `"packed"`) {
		t.Fatalf("receipts after the snapshot differ (packed: %v)", strings.Contains(string(snap), `"packed"`))
	}
	var packed room.LikeReceipts
	if err := json.Unmarshal([]byte(`{"last_ms":7,"packed":"`+strings.Split(strings.Split(string(b), `"alice":"`)[1], `"`)[0]+`"}`), &packed); err != nil ||
		packed.LastMs != 7 || !reflect.DeepEqual(packed.IDs, rs) {
		t.Fatalf("a snapshot's packed receipts: %+v, %v", packed, err)
	}
	// A snapshot with a receipt that does not pack reads back the same.
	oddState := room.ApplyCommand(s, 100, []room.Event{odd})
	snap, err = oddState.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if back, err := room.UnmarshalState(snap); err != nil || back.Extra == nil || !reflect.DeepEqual(back.Extra.LikeReceipts, oddState.Extra.LikeReceipts) {
		t.Fatalf("a snapshot with a receipt that does not pack: %v\n%s", err, snap)
	}
	old := []byte(`{"last_ms":5,"ids":["` + rs[0] + `"]}`)
	var r room.LikeReceipts
	if err := json.Unmarshal(old, &r); err != nil || r.LastMs != 5 || !reflect.DeepEqual(r.IDs, rs[:1]) {
		t.Fatalf("a snapshot's receipts as strings: %+v, %v", r, err)
	}
}

// A snapshot given its receipts encoded ahead (EncodeLikeReceipts, off
// the room's goroutine) decodes to the state Marshal's snapshot decodes
// to, which is the live state: receipts packed, one that does not pack
// as it is, user ids that need escaping, and the rest of the extra part
// kept.
func TestLikeReceiptsEncodedForTheSnapshot(t *testing.T) {
	var rs []string
	for i := range room.MaxLikeReceipts + 3 {
		rs = append(rs, room.LikeReceiptFor(fmt.Sprintf("e-%d", i), int64(1+i%room.MaxLikeCount)))
	}
	s := given(t, aRoom...)
	s = room.ApplyCommand(s, 50, []room.Event{room.RoomLiked{Count: 9, Total: 9, Likers: 3},
		room.RoomLikeReceipts{AtMs: t0, Users: map[string][]string{"alice": rs, "bob": rs[:2], "q\"<&>\\é\n": rs[3:4]}}})
	s = room.ApplyCommand(s, 51, []room.Event{room.RoomLikeReceipts{AtMs: t0 + 1, Users: map[string][]string{"carol": {rs[0], "not-a-receipt"}}}})
	enc := room.EncodeLikeReceipts(s.LikeReceipts())
	if !strings.Contains(string(enc), `"packed":"`) || !strings.Contains(string(enc), "not-a-receipt") {
		t.Fatalf("encoded receipts: %s", enc)
	}
	with, err := s.MarshalWithLikeReceipts(enc)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if len(with) >= len(plain) {
		t.Fatalf("snapshot with packed receipts %d bytes, with strings %d", len(with), len(plain))
	}
	a, err := room.UnmarshalState(with)
	if err != nil {
		t.Fatal(err)
	}
	b, err := room.UnmarshalState(plain)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) || !reflect.DeepEqual(a, s) {
		t.Fatalf("snapshot with receipts encoded ahead:\n%+v\nMarshal's:\n%+v\nlive:\n%+v", a, b, s)
	}
	for _, c := range []room.Command{like("alice", 1+int64(room.MaxLikeReceipts+2)%room.MaxLikeCount, commandID(fmt.Sprintf("e-%d", room.MaxLikeReceipts+2))), like("bob", 2, commandID("e-1"))} {
		if ok, err := room.LikeRecorded(a, c); !ok || err != nil {
			t.Fatalf("%s of %s not recorded after the snapshot: %v", c.CommandID, c.UserID, err)
		}
	}
	// Receipts the only part of the extra part.
	only := room.State{AppCode: "app", RoomID: "r1", Exists: true, Status: room.StatusOpen, Extra: &room.Extra{LikeReceipts: s.LikeReceipts()}}
	if b, err := only.MarshalWithLikeReceipts(enc); err != nil {
		t.Fatal(err)
	} else if back, err := room.UnmarshalState(b); err != nil || !reflect.DeepEqual(back, only) {
		t.Fatalf("receipts alone in the extra part: %v\n%s", err, b)
	}
	if got, err := (room.State{}).MarshalWithLikeReceipts(enc); err != nil || !strings.Contains(string(got), `"exists":false`) || strings.Contains(string(got), "like_receipts") {
		t.Fatalf("a state without an extra part: %s, %v", got, err)
	}
}

// BenchmarkLikedRoomSnapshot: a snapshot of a room of 500 members who
// all liked 16 times lately, its receipts encoded with the rest of the
// state (Marshal) or taken as encoded ahead (MarshalWithLikeReceipts,
// what the room's goroutine does when its likes side encoded them after
// the last window). "encode-ahead" is that encoding, off the room.
func BenchmarkLikedRoomSnapshot(b *testing.B) {
	s := room.NewState("app", "r1")
	evs := []room.Event{room.RoomCreated{OwnerUserID: "owner", Name: "r", MicSeats: 8, CreatedAtMs: t0}}
	users := map[string][]string{}
	for i := range 500 {
		u := fmt.Sprintf("user-%04d", i)
		evs = append(evs, room.RoomUserJoined{UserID: u, JoinedAtMs: t0})
		for k := range room.MaxLikeReceipts {
			users[u] = append(users[u], room.LikeReceiptFor(fmt.Sprintf("like-%d-%d", i, k), 1+int64(k%4)))
		}
	}
	evs = append(evs, room.RoomLikeReceipts{AtMs: t0, Users: users})
	s = room.ApplyCommand(s, 1, evs)
	enc := room.EncodeLikeReceipts(s.LikeReceipts())
	for _, c := range []struct {
		name string
		run  func() ([]byte, error)
	}{
		{"marshal", s.Marshal},
		{"with-encoded-receipts", func() ([]byte, error) { return s.MarshalWithLikeReceipts(enc) }},
		{"encode-ahead", func() ([]byte, error) { return room.EncodeLikeReceipts(s.LikeReceipts()), nil }},
	} {
		b.Run(c.name, func(b *testing.B) {
			var n int
			for range b.N {
				out, err := c.run()
				if err != nil {
					b.Fatal(err)
				}
				n = len(out)
			}
			b.ReportMetric(float64(n), "bytes")
		})
	}
}
