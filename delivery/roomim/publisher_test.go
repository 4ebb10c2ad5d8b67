package roomim_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery"
	"github.com/hyapp/roomcell/delivery/imfake"
	"github.com/hyapp/roomcell/delivery/roomim"
	"github.com/hyapp/roomcell/delivery/tencentim"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/room"
)

var quiet = slog.New(slog.DiscardHandler)

type fixture struct {
	fake   *imfake.Server
	client *tencentim.Client
	pub    *roomim.Publisher
}

func setup(tb testing.TB, mod func(*configs.TencentIMConfig), opts ...roomim.Option) fixture {
	tb.Helper()
	fake, err := imfake.Start("127.0.0.1:0", imfake.WithLogger(quiet))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { fake.Close() })
	cfg := fake.ClientConfig()
	if mod != nil {
		mod(&cfg)
	}
	client, err := tencentim.New(cfg, tencentim.WithLogger(quiet))
	if err != nil {
		tb.Fatal(err)
	}
	pub := roomim.New(client, append([]roomim.Option{roomim.WithLogger(quiet)}, opts...)...)
	tb.Cleanup(pub.Close)
	return fixture{fake: fake, client: client, pub: pub}
}

func ctxT(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	tb.Cleanup(cancel)
	return ctx
}

func envelope(tb testing.TB, appCode, roomID string, seq int64, ev room.Event) persistence.Envelope {
	tb.Helper()
	payload, err := json.Marshal(ev)
	if err != nil {
		tb.Fatal(err)
	}
	return persistence.Envelope{
		EventID:     room.EventID(appCode, roomID, seq, 0),
		EventType:   ev.EventType(),
		AppCode:     appCode,
		RoomID:      roomID,
		RoomSeq:     seq,
		CommandID:   fmt.Sprintf("cmd-%d", seq),
		CreatedAtMs: 1700000000000 + seq,
		Payload:     payload,
	}
}

func TestGroupID(t *testing.T) {
	tests := []struct{ app, room, want string }{
		{"lalu", "10001", "lalu_10001"},
		{"lalu", "room_42", "lalu_room_42"},
		{"my-app", "r-1", "my-app_r-1"},
	}
	for _, tc := range tests {
		if got := roomim.GroupID(tc.app, tc.room); got != tc.want {
			t.Errorf("GroupID(%q, %q) = %q, want %q", tc.app, tc.room, got, tc.want)
		}
	}
	// Hashed: too long, odd bytes, or an app code with '_' (which would
	// make the split ambiguous).
	seen := map[string][2]string{}
	for _, in := range [][2]string{
		{"lalu", strings.Repeat("r", 60)},
		{"lalu", "房间1"},
		{"lalu", "a b"},
		{"la_lu", "x"},
		{"la", "lu_x"},
		{"lalu", "@TGS#1"},
		{"", "r1"},
	} {
		got := roomim.GroupID(in[0], in[1])
		if len(got) > 48 || strings.HasPrefix(got, "@TGS#") {
			t.Errorf("GroupID(%q, %q) = %q: too long or reserved", in[0], in[1], got)
		}
		for i := 0; i < len(got); i++ {
			if got[i] < 0x21 || got[i] > 0x7e {
				t.Errorf("GroupID(%q, %q) = %q: not printable ASCII", in[0], in[1], got)
			}
		}
		if prev, dup := seen[got]; dup {
			t.Errorf("GroupID collision: %v and %v -> %q", prev, in, got)
		}
		seen[got] = in
		if got2 := roomim.GroupID(in[0], in[1]); got2 != got {
			t.Errorf("GroupID not stable: %q vs %q", got, got2)
		}
	}
	if roomim.GroupID("la", "lu_x") == roomim.GroupID("la_lu", "x") {
		t.Error("ambiguous split collides")
	}
}

func TestNonIMEventsMakeNoCall(t *testing.T) {
	f := setup(t, nil)
	ctx := ctxT(t)
	for i, ev := range []room.Event{
		room.RoomHeatChanged{Delta: 5, Heat: 10},
		room.RoomRankChanged{Rank: 1, PrevRank: 2, Heat: 10},
	} {
		if err := f.pub.PublishRoomEvent(ctx, envelope(t, "lalu", "r1", int64(i+1), ev)); err != nil {
			t.Fatalf("%s: %v", ev.EventType(), err)
		}
	}
	unknown := envelope(t, "lalu", "r1", 9, room.RoomHeatChanged{})
	unknown.EventType = "SomethingNew"
	if err := f.pub.PublishRoomEvent(ctx, unknown); err != nil {
		t.Fatalf("unknown type: %v", err)
	}
	if n := f.fake.CallCount(""); n != 0 {
		t.Fatalf("%d HTTP calls for non-IM events", n)
	}
}

func TestIMEventBecomesGroupMessage(t *testing.T) {
	f := setup(t, nil)
	ctx := ctxT(t)
	if err := f.pub.EnsureGroup(ctx, "lalu", "r1", "host_1", "Friday night"); err != nil {
		t.Fatal(err)
	}
	env := envelope(t, "lalu", "r1", 2, room.RoomUserJoined{UserID: "u_7", JoinedAtMs: 1700000000002})
	if err := f.pub.PublishRoomEvent(ctx, env); err != nil {
		t.Fatal(err)
	}
	msgs := f.fake.GroupMessages("lalu_r1")
	if len(msgs) != 1 {
		t.Fatalf("%d messages, want 1", len(msgs))
	}
	m := msgs[0]
	var got persistence.Envelope
	if err := json.Unmarshal([]byte(m.Data), &got); err != nil {
		t.Fatalf("Data is not an envelope: %v: %s", err, m.Data)
	}
	if got.EventID != env.EventID || got.EventType != room.TypeRoomUserJoined || got.RoomSeq != 2 ||
		string(got.Payload) != string(env.Payload) || got.CommandID != env.CommandID {
		t.Fatalf("envelope round trip: %+v", got)
	}
	if m.Ext != roomim.ExtRoomEvent || m.CloudCustomData != `{"event_id":"lalu:r1:2:0"}` {
		t.Fatalf("ext %q cloud %q", m.Ext, m.CloudCustomData)
	}
	if _, rnd := tencentim.EventRandoms(env.EventID); m.Random != rnd {
		t.Fatalf("Random %d not derived from the event id", m.Random)
	}

	// The relay retrying the same event inside Tencent's window: dropped.
	if err := f.pub.PublishRoomEvent(ctx, env); err != nil {
		t.Fatal(err)
	}
	if n := f.fake.EventIDCounts()[env.EventID]; n != 1 || f.fake.Duplicates() != 1 {
		t.Fatalf("retry delivered %d times (%d duplicates)", n, f.fake.Duplicates())
	}
}

func TestRoomCreatedCompensation(t *testing.T) {
	f := setup(t, nil)
	ctx := ctxT(t)
	env := envelope(t, "lalu", "r2", 1, room.RoomCreated{OwnerUserID: "host_2", Name: "一个很长很长很长很长的房间名字", MicSeats: 8})
	// The command path's EnsureGroup failed (Tencent down): the outbox
	// event creates the group.
	f.fake.FailNext(1, 20004, tencentim.APICreateGroup)
	if err := f.pub.EnsureGroup(ctx, "lalu", "r2", "host_2", "x"); !errors.Is(err, tencentim.ErrRetryable) {
		t.Fatalf("EnsureGroup with Tencent down: %v", err)
	}
	if err := f.pub.PublishRoomEvent(ctx, env); err != nil {
		t.Fatalf("RoomCreated compensation: %v", err)
	}
	g, ok := f.fake.Group("lalu_r2")
	if !ok || g.Owner != "host_2" || len(g.Name) > 30 || !strings.HasPrefix("一个很长很长很长很长的房间名字", g.Name) {
		t.Fatalf("group = %+v, %v", g, ok)
	}
	calls := f.fake.CallCount(tencentim.APICreateGroup)
	// Known now: a second RoomCreated (relay retry) makes no call.
	if err := f.pub.PublishRoomEvent(ctx, env); err != nil {
		t.Fatal(err)
	}
	if n := f.fake.CallCount(tencentim.APICreateGroup); n != calls {
		t.Fatalf("known group re-created: %d create calls, want %d", n, calls)
	}
	// Another process (empty cache) repeats the create: exists = success.
	other := roomim.New(f.client, roomim.WithLogger(quiet))
	defer other.Close()
	if err := other.PublishRoomEvent(ctx, env); err != nil {
		t.Fatalf("create of an existing group: %v", err)
	}
}

func TestKickedRemovesMember(t *testing.T) {
	ctx := ctxT(t)
	t.Run("Public group", func(t *testing.T) {
		f := setup(t, func(c *configs.TencentIMConfig) { c.GroupType = "Public" })
		if err := f.pub.EnsureGroup(ctx, "lalu", "r3", "host", "r3"); err != nil {
			t.Fatal(err)
		}
		if err := f.fake.AddGroupMember("lalu_r3", "u_bad"); err != nil {
			t.Fatal(err)
		}
		env := envelope(t, "lalu", "r3", 5, room.RoomUserKicked{TargetUserID: "u_bad", OperatorUserID: "host", Reason: "spam"})
		if err := f.pub.PublishRoomEvent(ctx, env); err != nil {
			t.Fatal(err)
		}
		if g, _ := f.fake.Group("lalu_r3"); len(g.Members) != 1 || g.Members[0] != "host" {
			t.Fatalf("members after kick: %v", g.Members)
		}
		msgs := f.fake.GroupMessages("lalu_r3")
		if len(msgs) != 1 || msgs[0].Priority != "High" || !strings.Contains(msgs[0].Data, `"target_user_id":"u_bad"`) {
			t.Fatalf("kick message: %+v", msgs)
		}
		// Order: the group hears about the kick before the member is gone,
		// so the kicked user can still receive it.
		var order []string
		for _, c := range f.fake.Calls() {
			if c.API == tencentim.APISendGroupMsg || c.API == tencentim.APIDeleteGroupMember {
				order = append(order, c.API)
			}
		}
		if fmt.Sprint(order) != fmt.Sprint([]string{tencentim.APISendGroupMsg, tencentim.APIDeleteGroupMember}) {
			t.Fatalf("call order %v", order)
		}
	})
	t.Run("delete failure fails the event", func(t *testing.T) {
		f := setup(t, func(c *configs.TencentIMConfig) { c.GroupType = "Public" })
		if err := f.pub.EnsureGroup(ctx, "lalu", "r5", "", "r5"); err != nil {
			t.Fatal(err)
		}
		f.fake.FailNext(1, 10002, tencentim.APIDeleteGroupMember)
		env := envelope(t, "lalu", "r5", 5, room.RoomUserKicked{TargetUserID: "u_bad"})
		if err := f.pub.PublishRoomEvent(ctx, env); !errors.Is(err, tencentim.ErrRetryable) {
			t.Fatalf("kick with delete failing: %v (the row must stay pending)", err)
		}
		if err := f.pub.PublishRoomEvent(ctx, env); err != nil {
			t.Fatal(err)
		}
		if n := f.fake.EventIDCounts()[env.EventID]; n != 1 {
			t.Fatalf("kick message delivered %d times; the retry must be deduped", n)
		}
	})
}

func TestSendErrorsReachTheCaller(t *testing.T) {
	f := setup(t, nil)
	ctx := ctxT(t)
	env := envelope(t, "lalu", "nogroup", 2, room.RoomMicTaken{UserID: "u", Seat: 1})
	// The group stays missing even after the publisher recreates it once:
	// the error reaches the caller (the relay keeps the row pending).
	f.fake.FailNext(2, 10010, tencentim.APISendGroupMsg)
	if err := f.pub.PublishRoomEvent(ctx, env); tencentim.ClassOf(err) != tencentim.ClassGroupMissing {
		t.Fatalf("send to a missing group: %v", err)
	}
	bad := env
	bad.EventID = ""
	if err := f.pub.PublishRoomEvent(ctx, bad); !errors.Is(err, roomim.ErrInvalidEnvelope) {
		t.Fatalf("no event id: %v", err)
	}
	badKick := envelope(t, "lalu", "r", 3, room.RoomUserKicked{})
	badKick.Payload = json.RawMessage(`{"target_user_id":5}`)
	if err := f.pub.PublishRoomEvent(ctx, badKick); !errors.Is(err, roomim.ErrInvalidEnvelope) {
		t.Fatalf("undecodable kick payload: %v", err)
	}
}

// TestHotRoomCoalescing: 200 events at once into one group capped at 40
// messages/s leave as far fewer messages, each event exactly once, no
// message over Tencent's 12 KB, and the group's rate is kept.
func TestHotRoomCoalescing(t *testing.T) {
	f := setup(t, func(c *configs.TencentIMConfig) { c.GroupRatePerSecond = 40 })
	ctx := ctxT(t)
	if err := f.pub.EnsureGroup(ctx, "lalu", "hot", "", "hot"); err != nil {
		t.Fatal(err)
	}
	const n = 200
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			env := envelope(t, "lalu", "hot", int64(i+2), room.RoomGiftSent{
				FromUserID: fmt.Sprintf("u_%d", i), ToUserID: "host", GiftID: "rose", GiftCount: 1, HeatValue: 10})
			errs[i] = f.pub.PublishRoomEvent(ctx, env)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	msgs := f.fake.GroupMessages("lalu_hot")
	if len(msgs) >= n/4 {
		t.Fatalf("%d messages for %d events: not coalesced", len(msgs), n)
	}
	counts := f.fake.EventIDCounts()
	for i := range n {
		id := room.EventID("lalu", "hot", int64(i+2), 0)
		if counts[id] != 1 {
			t.Fatalf("event %s delivered %d times", id, counts[id])
		}
	}
	var times []time.Time
	for _, m := range msgs {
		if size := len(m.Data) + len(m.CloudCustomData); size > 12*1024 {
			t.Fatalf("message of %d bytes", size)
		}
		if len(m.EventIDs) > 1 {
			events, err := roomim.DecodeCompact(m.Data)
			if err != nil || len(events) != len(m.EventIDs) || m.Ext != roomim.ExtRoomEventsCompact {
				t.Fatalf("coalesced message malformed (ext %q): %v", m.Ext, err)
			}
			for i, e := range events {
				if e.EventID != m.EventIDs[i] {
					t.Fatalf("Data and the recorded ids disagree: %s vs %s", e.EventID, m.EventIDs[i])
				}
			}
		}
		times = append(times, m.At)
	}
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	for i := range times {
		j := i
		for j < len(times) && times[j].Sub(times[i]) < time.Second {
			j++
		}
		if j-i > 41 {
			t.Fatalf("%d messages within one second at a 40/s cap", j-i)
		}
	}
	t.Logf("%d events -> %d messages", n, len(msgs))
}

// TestEnqueueKeepsRoomOrder: events enqueued one after another come out
// in that order, whether coalesced or not.
func TestEnqueueKeepsRoomOrder(t *testing.T) {
	f := setup(t, func(c *configs.TencentIMConfig) { c.GroupRatePerSecond = 40 }, roomim.WithMaxBatchEvents(7))
	ctx := ctxT(t)
	if err := f.pub.EnsureGroup(ctx, "lalu", "ord", "", "ord"); err != nil {
		t.Fatal(err)
	}
	var chans []<-chan error
	for i := range 60 {
		chans = append(chans, f.pub.Enqueue(ctx, envelope(t, "lalu", "ord", int64(i+2), room.RoomMicTaken{UserID: "u", Seat: i % 8})))
	}
	for i, ch := range chans {
		if err := <-ch; err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	var seqs []int64
	msgs := f.fake.GroupMessages("lalu_ord")
	for _, m := range msgs {
		if len(m.EventIDs) > 7 {
			t.Fatalf("batch of %d events over the bound of 7", len(m.EventIDs))
		}
		for _, id := range m.EventIDs {
			var app, rm string
			var seq, idx int64
			fmt.Sscanf(strings.ReplaceAll(id, ":", " "), "%s %s %d %d", &app, &rm, &seq, &idx)
			seqs = append(seqs, seq)
		}
	}
	if len(seqs) != 60 || !sort.SliceIsSorted(seqs, func(i, j int) bool { return seqs[i] < seqs[j] }) {
		t.Fatalf("order broken: %v", seqs)
	}
	if len(msgs) >= 60 {
		t.Fatalf("%d messages for 60 enqueued events: not coalesced", len(msgs))
	}
}

func TestBatchBytesBound(t *testing.T) {
	f := setup(t, func(c *configs.TencentIMConfig) { c.GroupRatePerSecond = 5 })
	ctx := ctxT(t)
	if err := f.pub.EnsureGroup(ctx, "lalu", "big", "", "big"); err != nil {
		t.Fatal(err)
	}
	var chans []<-chan error
	for i := range 40 {
		ev := room.RoomUserLeft{UserID: "u", Reason: strings.Repeat("x", 1500)}
		chans = append(chans, f.pub.Enqueue(ctx, envelope(t, "lalu", "big", int64(i+2), ev)))
	}
	for _, ch := range chans {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range f.fake.GroupMessages("lalu_big") {
		if size := len(m.Data) + len(m.Ext) + len(m.CloudCustomData); size > roomim.DefaultMaxBatchBytes {
			t.Fatalf("message of %d bytes over the %d bound", size, roomim.DefaultMaxBatchBytes)
		}
	}
	if c := f.fake.EventIDCounts(); len(c) != 40 {
		t.Fatalf("%d distinct events delivered, want 40", len(c))
	}
}

func TestAbandonedEventsAreNotSent(t *testing.T) {
	f := setup(t, func(c *configs.TencentIMConfig) { c.GroupRatePerSecond = 1 })
	ctx := ctxT(t)
	if err := f.pub.EnsureGroup(ctx, "lalu", "slow", "", "slow"); err != nil {
		t.Fatal(err)
	}
	// The first send takes the group's only token of this second; the
	// second event's caller gives up before the next token.
	first := f.pub.Enqueue(ctx, envelope(t, "lalu", "slow", 2, room.RoomMicTaken{UserID: "a"}))
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	env := envelope(t, "lalu", "slow", 3, room.RoomMicTaken{UserID: "b"})
	if err := f.pub.PublishRoomEvent(short, env); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("abandoned event: %v", err)
	}
	time.Sleep(1200 * time.Millisecond)
	if n := f.fake.EventIDCounts()[env.EventID]; n != 0 {
		t.Fatalf("abandoned event sent %d times", n)
	}
}

func TestSendNotice(t *testing.T) {
	f := setup(t, nil)
	ctx := ctxT(t)
	data := []byte(`{"event_type":"WalletBalanceChanged","event_id":"tx_1:WalletBalanceChanged:10001:COIN","balance_version":18}`)
	for range 2 { // the retry falls into Tencent's 120 s window
		if err := f.pub.SendNotice(ctx, "lalu", "10001", "wallet_notice", data, "tx_1:WalletBalanceChanged:10001:COIN"); err != nil {
			t.Fatal(err)
		}
	}
	msgs := f.fake.C2CMessages("10001")
	if len(msgs) != 1 || f.fake.Duplicates() != 1 {
		t.Fatalf("%d notices, %d duplicates; want 1 and 1", len(msgs), f.fake.Duplicates())
	}
	m := msgs[0]
	seq, rnd := tencentim.EventRandoms("tx_1:WalletBalanceChanged:10001:COIN")
	if m.Ext != "wallet_notice" || m.Data != string(data) || m.MsgSeq != uint64(seq) || m.Random != rnd ||
		len(m.EventIDs) != 1 || m.EventIDs[0] != "tx_1:WalletBalanceChanged:10001:COIN" {
		t.Fatalf("notice = %+v", m)
	}
	if !f.fake.HasAccount("10001") {
		t.Fatal("receiver not imported")
	}
	if err := f.pub.SendNotice(ctx, "lalu", "10001", "", data, "e"); !errors.Is(err, roomim.ErrInvalidEnvelope) {
		t.Fatalf("notice without ext: %v", err)
	}
}

func TestClosedPublisher(t *testing.T) {
	f := setup(t, nil)
	f.pub.Close()
	env := envelope(t, "lalu", "r1", 2, room.RoomUserJoined{UserID: "u"})
	if err := f.pub.PublishRoomEvent(ctxT(t), env); !errors.Is(err, roomim.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

// A room whose IM group does not exist (a dev fake restarted, a group
// created before IM was configured) heals: the publisher recreates the
// group once and the event is delivered instead of failing forever.
func TestMissingGroupIsRecreated(t *testing.T) {
	f := setup(t, nil)
	ctx := ctxT(t)
	env := envelope(t, "lalu", "r9", 5, room.RoomUserJoined{UserID: "u_1", JoinedAtMs: 1700000000005})
	if err := f.pub.PublishRoomEvent(ctx, env); err != nil {
		t.Fatalf("publish to a room without a group: %v", err)
	}
	if _, ok := f.fake.Group("lalu_r9"); !ok {
		t.Fatal("group was not recreated")
	}
	if n := f.fake.EventIDCounts()[env.EventID]; n != 1 {
		t.Fatalf("event delivered %d times, want 1", n)
	}
	// Other permanent errors are not mistaken for a missing group.
	f.fake.FailNext(1, 80001, tencentim.APISendGroupMsg)
	env2 := envelope(t, "lalu", "r9", 6, room.RoomUserLeft{UserID: "u_1", Reason: "left"})
	if err := f.pub.PublishRoomEvent(ctx, env2); err == nil {
		t.Fatal("a sensitive-content rejection must stay an error")
	}
}

// A failed send holds back every event queued behind it for the room (they
// fail with ErrHeldBack, unsent, and are not permanent); an abandoned event
// holds back the ones behind it too; a message the event itself is refused
// for is permanent (the relay parks it), an outage is not.
func TestFailureHoldsBackLaterEventsOfTheRoom(t *testing.T) {
	f := setup(t, func(c *configs.TencentIMConfig) { c.GroupRatePerSecond = 1 }, roomim.WithMaxBatchEvents(1))
	ctx := ctxT(t)
	if err := f.pub.EnsureGroup(ctx, "lalu", "hold", "", "hold"); err != nil {
		t.Fatal(err)
	}
	type permanent interface{ Permanent() bool }
	isPermanent := func(err error) bool {
		var p permanent
		return errors.As(err, &p) && p.Permanent()
	}
	f.fake.FailNext(1, 20004, tencentim.APISendGroupMsg) // transient
	var chans []<-chan error
	var envs []persistence.Envelope
	for i := range 4 {
		env := envelope(t, "lalu", "hold", int64(i+2), room.RoomMicTaken{UserID: "u", Seat: i})
		envs = append(envs, env)
		chans = append(chans, f.pub.Enqueue(ctx, env))
	}
	first := <-chans[0]
	if first == nil || errors.Is(first, roomim.ErrHeldBack) || isPermanent(first) {
		t.Fatalf("first event: %v, want its own retryable send error", first)
	}
	for i, ch := range chans[1:] {
		if err := <-ch; !errors.Is(err, roomim.ErrHeldBack) || isPermanent(err) {
			t.Fatalf("event %d behind the failure: %v, want ErrHeldBack, not permanent", i+1, err)
		}
	}
	if n := len(f.fake.GroupMessages("lalu_hold")); n != 0 {
		t.Fatalf("%d messages reached IM after the room's first event failed", n)
	}

	// Refused content is permanent.
	f.fake.FailNext(1, 80001, tencentim.APISendGroupMsg)
	if err := f.pub.PublishRoomEvent(ctx, envs[0]); !isPermanent(err) {
		t.Fatalf("refused content: %v, want a permanent error", err)
	}

	// An event whose caller gave up holds back the ones queued after it:
	// the first send takes this second's token, the second event expires
	// while waiting, the third (longer deadline) must not overtake it.
	ok := f.pub.Enqueue(ctx, envs[0])
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	expired := f.pub.Enqueue(short, envs[1])
	behind := f.pub.Enqueue(ctx, envs[2])
	if err := <-ok; err != nil {
		t.Fatal(err)
	}
	if err := <-expired; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("expired event: %v", err)
	}
	if err := <-behind; !errors.Is(err, roomim.ErrHeldBack) {
		t.Fatalf("event behind an expired one: %v, want ErrHeldBack", err)
	}
	if c := f.fake.EventIDCounts(); c[envs[1].EventID]+c[envs[2].EventID] != 0 {
		t.Fatalf("expired or held-back events reached IM: %v", c)
	}
}

// Every IM event type of the room's registry reaches the group as one
// message, with the priority the registry gives it; the room-management
// events need no special mapping.
func TestEveryIMEventTypeIsSentWithItsPriority(t *testing.T) {
	f := setup(t, nil)
	ctx := ctxT(t)
	if err := f.pub.EnsureGroup(ctx, "lalu", "r9", "host_9", "n"); err != nil {
		t.Fatal(err)
	}
	sent := 0
	for i, typ := range room.EventTypes() {
		info, _ := room.EventInfoOf(typ)
		if typ == room.TypeRoomCreated {
			continue // creates the group instead
		}
		ev, err := room.DecodeEvent(typ, []byte(`{"user_id":"u1","target_user_id":"u1","operator_user_id":"host_9","seat":2,"name":"n"}`))
		if err != nil {
			t.Fatal(err)
		}
		env := envelope(t, "lalu", "r9", int64(i+2), ev)
		if err := f.pub.PublishRoomEvent(ctx, env); err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		msgs := f.fake.GroupMessages("lalu_r9")
		if !info.IM {
			if len(msgs) != sent {
				t.Fatalf("%s is not an IM event but was sent", typ)
			}
			continue
		}
		sent++
		if len(msgs) != sent {
			t.Fatalf("%s: %d messages, want %d", typ, len(msgs), sent)
		}
		m := msgs[len(msgs)-1]
		want := "Normal"
		if info.High {
			want = "High"
		}
		if m.Priority != want || !strings.Contains(m.Data, `"event_type":"`+typ+`"`) {
			t.Errorf("%s: priority %q (want %s), data %s", typ, m.Priority, want, m.Data)
		}
	}
	for _, typ := range []string{room.TypeRoomAdminSet, room.TypeRoomAdminRemoved, room.TypeRoomSeatMuted, room.TypeRoomSeatUnmuted,
		room.TypeRoomSeatLocked, room.TypeRoomSeatUnlocked, room.TypeRoomUpdated} {
		if !room.IsIMEvent(typ) {
			t.Errorf("%s must go to IM", typ)
		}
	}
	if sent < 13 {
		t.Fatalf("only %d IM event types sent", sent)
	}
}

// EnqueueNotify hands each event's result to its function exactly once,
// with what Enqueue's channel would carry: sent events nil, in the room's
// order, an event settled at once (an invalid envelope) before the
// call returns, and after a failed send the events queued behind it
// ErrHeldBack.
func TestEnqueueNotifyCallsEachResultOnce(t *testing.T) {
	f := setup(t, func(c *configs.TencentIMConfig) { c.GroupRatePerSecond = 40 }, roomim.WithMaxBatchEvents(1))
	ctx := ctxT(t)
	if err := f.pub.EnsureGroup(ctx, "lalu", "notify", "", "notify"); err != nil {
		t.Fatal(err)
	}
	var _ delivery.NotifyEnqueuer = f.pub
	type result struct {
		i   int
		err error
	}
	var mu sync.Mutex
	var got []result
	enqueue := func(i int, env persistence.Envelope) {
		f.pub.EnqueueNotify(ctx, env, func(err error) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, result{i, err})
		})
	}
	wait := func(n int) []result {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			mu.Lock()
			out := slices.Clone(got)
			mu.Unlock()
			if len(out) >= n || time.Now().After(deadline) {
				time.Sleep(50 * time.Millisecond) // a second call would show up now
				mu.Lock()
				defer mu.Unlock()
				return slices.Clone(got)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	for i := range 20 {
		enqueue(i, envelope(t, "lalu", "notify", int64(i+2), room.RoomMicTaken{UserID: "u", Seat: i % 8}))
	}
	res := wait(20)
	if len(res) != 20 {
		t.Fatalf("%d results for 20 events", len(res))
	}
	for j, r := range res {
		if r.i != j || r.err != nil {
			t.Fatalf("result %d: event %d, %v; want event %d sent, in order", j, r.i, r.err, j)
		}
	}

	mu.Lock()
	got = nil
	mu.Unlock()
	bad := envelope(t, "lalu", "notify", 30, room.RoomMicTaken{UserID: "u"})
	bad.RoomID = ""
	enqueue(-1, bad)
	mu.Lock()
	settledAtOnce := len(got) == 1 && errors.Is(got[0].err, roomim.ErrInvalidEnvelope)
	mu.Unlock()
	if !settledAtOnce {
		t.Fatalf("an invalid envelope: %+v, want ErrInvalidEnvelope before EnqueueNotify returned", got)
	}

	mu.Lock()
	got = nil
	mu.Unlock()
	f.fake.FailNext(1, 20004, tencentim.APISendGroupMsg)
	for i := range 4 {
		enqueue(i, envelope(t, "lalu", "notify", int64(40+i), room.RoomMicTaken{UserID: "u", Seat: i}))
	}
	res = wait(4)
	if len(res) != 4 {
		t.Fatalf("%d results for 4 events after a failure", len(res))
	}
	// The room is held back before the failed event's caller hears of
	// it, so the events behind it may be answered first.
	seen := map[int]bool{}
	for _, r := range res {
		switch {
		case seen[r.i]:
			t.Fatalf("event %d answered twice", r.i)
		case r.i == 0 && (r.err == nil || errors.Is(r.err, roomim.ErrHeldBack)):
			t.Fatalf("the failed send: %v, want its own error", r.err)
		case r.i > 0 && !errors.Is(r.err, roomim.ErrHeldBack):
			t.Fatalf("event %d behind the failure: %v, want ErrHeldBack", r.i, r.err)
		}
		seen[r.i] = true
	}
}
