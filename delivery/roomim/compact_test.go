package roomim_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/roomim"
	"github.com/hyapp/roomcell/delivery/tencentim"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/room"
)

// decodeMessage turns one accepted group message back into the envelopes
// it carries, as a client would.
func decodeMessage(t *testing.T, ext, data string) []persistence.Envelope {
	t.Helper()
	switch ext {
	case roomim.ExtRoomEvent:
		var env persistence.Envelope
		if err := json.Unmarshal([]byte(data), &env); err != nil {
			t.Fatalf("single event: %v", err)
		}
		return []persistence.Envelope{env}
	case roomim.ExtRoomEvents:
		var batch struct {
			Events []persistence.Envelope `json:"events"`
		}
		if err := json.Unmarshal([]byte(data), &batch); err != nil {
			t.Fatalf("envelope batch: %v", err)
		}
		return batch.Events
	case roomim.ExtRoomEventsCompact:
		envs, err := roomim.DecodeCompact(data)
		if err != nil {
			t.Fatal(err)
		}
		return envs
	}
	t.Fatalf("unexpected ext %q", ext)
	return nil
}

func sameJSON(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// randomEnvelopes makes n IM events of one room with what could trip a
// size bound or the compact form: payloads from empty to 3 KB with
// quotes, HTML characters and multi-byte text, ids that do not follow
// room.EventID, long command ids, times before and after the first event.
func randomEnvelopes(t *testing.T, rng *rand.Rand, n int) []persistence.Envelope {
	pieces := []string{"a", `"`, "<", ">", "&", "\\", "房间", "\u2028", "é", " ", "\n"}
	out := make([]persistence.Envelope, n)
	seq := int64(1)
	for i := range n {
		var b strings.Builder
		for range rng.IntN(600) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		var ev room.Event = room.RoomUserLeft{UserID: fmt.Sprintf("u%d", rng.IntN(1000)), Reason: b.String()}
		if rng.IntN(3) == 0 {
			ev = room.RoomMicTaken{UserID: "u", Seat: rng.IntN(8)}
		}
		env := envelope(t, "lalu", "fuzz", seq, ev)
		if idx := rng.IntN(3); idx > 0 && i > 0 { // a later event of the same command
			env.RoomSeq = out[i-1].RoomSeq
			env.EventID = room.EventID("lalu", "fuzz", env.RoomSeq, idx)
		} else {
			seq++
			env.RoomSeq = seq
			env.EventID = room.EventID("lalu", "fuzz", seq, 0)
		}
		if rng.IntN(10) == 0 {
			env.EventID = fmt.Sprintf("imported/%d/\"%s\"", i, strings.Repeat("x", rng.IntN(80)))
		}
		env.CommandID = strings.Repeat("c", rng.IntN(64))
		env.RequestID = "req-dropped-in-batches"
		env.CreatedAtMs = 1_700_000_000_000 + int64(rng.IntN(10_000)) - 5_000
		out[i] = env
	}
	return out
}

// Coalesced messages in the compact form carry exactly the envelopes
// that were queued (request_id aside), in order, and no message passes
// its byte bound or Tencent's 12 KB, also with the bound raised as far as
// it goes: 600 random events, default bound and maximum bound.
//
// The same holds for the full-envelope form (tencent_im.batch_format:
// envelopes), which must never send the compact form.
func TestCompactBatchesRoundTripAndStayUnder12KB(t *testing.T) {
	for _, tc := range []struct {
		format string
		bound  int
		ext    string
	}{
		{roomim.BatchCompact, roomim.DefaultMaxBatchBytes, roomim.ExtRoomEventsCompact},
		{roomim.BatchCompact, 1 << 20, roomim.ExtRoomEventsCompact},
		{roomim.BatchEnvelopes, roomim.DefaultMaxBatchBytes, roomim.ExtRoomEvents},
		{roomim.BatchEnvelopes, 1 << 20, roomim.ExtRoomEvents},
	} {
		bound := tc.bound
		t.Run(fmt.Sprint(tc.format, bound), func(t *testing.T) {
			f := setup(t, func(c *configs.TencentIMConfig) { c.GroupRatePerSecond = 40 },
				roomim.WithMaxBatchBytes(bound), roomim.WithBatchFormat(tc.format))
			ctx := ctxT(t)
			if err := f.pub.EnsureGroup(ctx, "lalu", "fuzz", "", "fuzz"); err != nil {
				t.Fatal(err)
			}
			envs := randomEnvelopes(t, rand.New(rand.NewPCG(7, uint64(bound))), 600)
			var chans []<-chan error
			for _, env := range envs {
				chans = append(chans, f.pub.Enqueue(ctx, env))
			}
			for i, ch := range chans {
				if err := <-ch; err != nil {
					t.Fatalf("event %d: %v", i, err)
				}
			}
			var got []persistence.Envelope
			msgs := f.fake.GroupMessages("lalu_fuzz")
			for _, m := range msgs {
				size := len(m.Data) + len(m.Ext) + len(m.CloudCustomData)
				if size > tencentim.MaxMessageBytes || size > min(bound, tencentim.MaxMessageBytes) && len(m.EventIDs) > 1 {
					t.Fatalf("message of %d bytes (%d events), bound %d", size, len(m.EventIDs), bound)
				}
				if len(m.EventIDs) > 1 && m.Ext != tc.ext {
					t.Fatalf("coalesced message in form %q, want %q", m.Ext, tc.ext)
				}
				decoded := decodeMessage(t, m.Ext, m.Data)
				if ids := m.EventIDs; len(ids) != len(decoded) {
					t.Fatalf("fake read %d ids, message holds %d events", len(ids), len(decoded))
				}
				got = append(got, decoded...)
			}
			if len(got) != len(envs) {
				t.Fatalf("%d events delivered, want %d", len(got), len(envs))
			}
			for i, want := range envs {
				g := got[i]
				if g.RequestID != "" && g.RequestID != want.RequestID {
					t.Fatalf("event %d request_id %q", i, g.RequestID)
				}
				g.RequestID, want.RequestID = "", ""
				if !sameJSON(g.Payload, want.Payload) {
					t.Fatalf("event %d payload %s, want %s", i, g.Payload, want.Payload)
				}
				g.Payload, want.Payload = nil, nil
				if !reflect.DeepEqual(g, want) {
					t.Fatalf("event %d:\n got %+v\nwant %+v", i, g, want)
				}
			}
			if len(msgs) >= len(envs)/2 {
				t.Fatalf("%d messages for %d events: not coalesced", len(msgs), len(envs))
			}
			t.Logf("%d events in %d messages", len(envs), len(msgs))
		})
	}
}

// An event that cannot fit Tencent's 12 KB alone is refused by the client
// as permanent (the relay parks it) without spending a call.
func TestOversizeEventIsRefusedWithoutACall(t *testing.T) {
	f := setup(t, nil)
	ctx := ctxT(t)
	if err := f.pub.EnsureGroup(ctx, "lalu", "big", "", "big"); err != nil {
		t.Fatal(err)
	}
	env := envelope(t, "lalu", "big", 2, room.RoomUserLeft{UserID: "u", Reason: strings.Repeat("x", tencentim.MaxMessageBytes)})
	err := f.pub.PublishRoomEvent(ctx, env)
	var perm interface{ Permanent() bool }
	if !errors.As(err, &perm) || !perm.Permanent() || tencentim.ClassOf(err) != tencentim.ClassContent {
		t.Fatalf("oversize event: %v, want a permanent content error", err)
	}
	if n := f.fake.CallCount(tencentim.APISendGroupMsg); n != 0 {
		t.Fatalf("%d send calls for a message over the limit", n)
	}
}

// benchEnvelope is a join or leave as `roomctl bench --mode hotroom`
// writes them (its ids, users and request ids).
func benchEnvelope(seq int64) persistence.Envelope {
	run, w := "18ed03ed250a5a4c", seq%32
	user := fmt.Sprintf("bench-%s-%d", run, w)
	ev, _ := json.Marshal(room.RoomUserJoined{UserID: user, JoinedAtMs: 1796096143576 + seq})
	typ := room.TypeRoomUserJoined
	if seq%2 == 0 {
		ev, _ = json.Marshal(room.RoomUserLeft{UserID: user, Reason: "left"})
		typ = room.TypeRoomUserLeft
	}
	return persistence.Envelope{EventID: room.EventID("bench", "hot-0", seq, 0), EventType: typ, AppCode: "bench", RoomID: "hot-0",
		RoomSeq: seq, CommandID: fmt.Sprintf("%s-%d-%d", run, w, seq/32), RequestID: fmt.Sprintf("req-%024x", seq),
		CreatedAtMs: 1796096143576 + seq/4, Payload: ev}
}

// The hot-room target in IM terms: at Tencent's 40 messages/s per group,
// 3,000 events/s need 75 events per message. A backlog of hot-room joins
// and leaves leaves in messages of at least that many: every message made
// after the backlog was queued (two send slots after, so none was taken
// while it was still being queued, however slow the queueing), but the
// last, its tail.
func TestHotRoomMessagesCarry75Events(t *testing.T) {
	f := setup(t, func(c *configs.TencentIMConfig) { c.GroupRatePerSecond = 40 })
	ctx := ctxT(t)
	if err := f.pub.EnsureGroup(ctx, "bench", "hot-0", "", "hot"); err != nil {
		t.Fatal(err)
	}
	const n = 3000
	start := time.Now()
	var chans []<-chan error
	for seq := int64(2); seq < n+2; seq++ {
		chans = append(chans, f.pub.Enqueue(ctx, benchEnvelope(seq)))
	}
	queued := time.Now()
	for i, ch := range chans {
		if err := <-ch; err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	msgs := f.fake.GroupMessages("bench_hot-0")
	var per []int
	for _, m := range msgs[:len(msgs)-1] {
		if m.At.After(queued.Add(2 * time.Second / 40)) {
			per = append(per, len(m.EventIDs))
		}
	}
	slices.Sort(per)
	// 3,000 events at up to ~95 a message: some 30 full messages.
	if len(per) < 10 || per[0] < 75 {
		t.Fatalf("events per full message %v: want at least 10 messages of at least 75", per)
	}
	took := time.Since(start)
	t.Logf("%d events in %d messages in %v (%.0f events/s at 40 messages/s); full messages carry %d..%d events",
		n, len(msgs), took.Round(time.Millisecond), n/took.Seconds(), per[0], per[len(per)-1])
}

// Seed 000 lets no room system message be dropped ("房间系统消息是状态变更的
// 外部表现，不能因为达到次数就丢弃"), and the state-like events it names
// (RoomHeatChanged, RoomRankChanged) never go to IM at all. So nothing
// collapses in the queue: a hot queue of heat and rank changes mixed with
// repeated last-value-wins-looking IM events (RoomUpdated, seat mute and
// unmute) delivers every IM event exactly once, in order, and no heat or
// rank change.
func TestNoRequiredEventCollapses(t *testing.T) {
	f := setup(t, func(c *configs.TencentIMConfig) { c.GroupRatePerSecond = 40 })
	ctx := ctxT(t)
	if err := f.pub.EnsureGroup(ctx, "lalu", "state", "", "state"); err != nil {
		t.Fatal(err)
	}
	var chans []<-chan error
	var imIDs, stateIDs []string
	for i := range 400 {
		seq := int64(i + 2)
		var ev room.Event
		switch i % 5 {
		case 0:
			ev = room.RoomHeatChanged{Delta: 1, Heat: int64(i)}
		case 1:
			ev = room.RoomRankChanged{Rank: int64(i % 7), PrevRank: int64((i + 1) % 7), Heat: int64(i)}
		case 2:
			ev = room.RoomUpdated{Name: fmt.Sprint("name ", i)}
		case 3:
			ev = room.RoomSeatMuted{Seat: 1}
		default:
			ev = room.RoomSeatUnmuted{Seat: 1}
		}
		env := envelope(t, "lalu", "state", seq, ev)
		if room.IsIMEvent(env.EventType) {
			imIDs = append(imIDs, env.EventID)
		} else {
			stateIDs = append(stateIDs, env.EventID)
		}
		chans = append(chans, f.pub.Enqueue(ctx, env))
	}
	for i, ch := range chans {
		if err := <-ch; err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	var got []string
	for _, m := range f.fake.GroupMessages("lalu_state") {
		got = append(got, m.EventIDs...)
	}
	if !slices.Equal(got, imIDs) {
		t.Fatalf("IM got %d events, want every one of the %d IM events once in order", len(got), len(imIDs))
	}
	for _, id := range stateIDs {
		if slices.Contains(got, id) {
			t.Fatalf("state-like event %s reached IM", id)
		}
	}
}
