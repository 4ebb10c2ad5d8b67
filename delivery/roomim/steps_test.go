package roomim_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hyapp/roomcell/delivery/imfake"
	"github.com/hyapp/roomcell/delivery/roomim"
	"github.com/hyapp/roomcell/delivery/tencentim"
	"github.com/hyapp/roomcell/delivery/trtc"
	"github.com/hyapp/roomcell/delivery/trtc/trtcfake"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
	"github.com/hyapp/roomcell/room"
)

// stepsFixture is one fake IM and one fake TRTC on a clock the test moves
// (past Tencent's 5-minute group dedupe window), a store holding the
// events' outbox rows, and publishers made on them as processes would be:
// each with its own memory.
type stepsFixture struct {
	t      *testing.T
	fake   *imfake.Server
	client *tencentim.Client
	tfake  *trtcfake.Server
	audio  *trtc.Client
	store  persistence.Store
	clock  *atomic.Int64
}

func newStepsFixture(t *testing.T) *stepsFixture {
	t.Helper()
	clock := &atomic.Int64{}
	clock.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli())
	now := func() time.Time { return time.UnixMilli(clock.Load()) }
	fake, err := imfake.Start("127.0.0.1:0", imfake.WithLogger(quiet), imfake.WithClock(now))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	client, err := tencentim.New(fake.ClientConfig(), tencentim.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	tfake, tclient := audio(t)
	store := memdb.New()
	t.Cleanup(func() { store.Close() })
	return &stepsFixture{t: t, fake: fake, client: client, tfake: tfake, audio: tclient, store: store, clock: clock}
}

func (f *stepsFixture) now() time.Time { return time.UnixMilli(f.clock.Load()) }

// process is a fresh publisher: nothing remembered. With keep, the steps
// it finishes are kept in the events' rows (WithEffectSteps).
func (f *stepsFixture) process(keep bool) *roomim.Publisher {
	opts := []roomim.Option{roomim.WithLogger(quiet), roomim.WithAudio(f.audio), roomim.WithClock(f.now)}
	if keep {
		opts = append(opts, roomim.WithEffectSteps(func(persistence.RoomKey) roomim.EffectSteps { return f.store }, time.Second))
	}
	return roomim.New(f.client, opts...)
}

// appendRow stores env as its command's one event, as the room does.
func (f *stepsFixture) appendRow(env persistence.Envelope) {
	f.t.Helper()
	err := f.store.Append(context.Background(), persistence.Append{Command: persistence.CommandRecord{
		AppCode: env.AppCode, RoomID: env.RoomID, Seq: env.RoomSeq, CommandID: env.CommandID,
		CommandType: "Test", Reply: []byte(`{}`), Events: []persistence.Envelope{env}, CreatedAtMs: env.CreatedAtMs,
	}})
	if err != nil {
		f.t.Fatal(err)
	}
}

func (f *stepsFixture) effectsDone(id string) uint32 {
	f.t.Helper()
	row, err := f.store.GetOutbox(context.Background(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	return row.EffectsDone
}

// shown counts the group messages of gid carrying event id.
func (f *stepsFixture) shown(gid, id string) int {
	n := 0
	for _, m := range f.fake.GroupMessages(gid) {
		for _, e := range m.EventIDs {
			if e == id {
				n++
			}
		}
	}
	return n
}

// Bits of EffectsDone (stored values, roomim's): the message, the IM
// effect, the audio effect.
const (
	doneMessage uint32 = 1
	doneIM      uint32 = 2
	doneAudio   uint32 = 4
)

// TestKickRetriedElsewhereAfterDedupeWindow: a kick's message goes out and
// its ban is done, then TRTC fails; the process dies. Another process,
// nothing in its memory, retries the row once Tencent's dedupe window is
// over: it reads the steps done from the row and does only the audio
// removal. The room gets the kick message once (no second send reaches
// Tencent at all), the ban is in place (banned once), the user is out of
// the audio room. Without the steps kept (the control), the same retry
// shows the room the kick twice: the test can tell.
func TestKickRetriedElsewhereAfterDedupeWindow(t *testing.T) {
	for _, keep := range []bool{true, false} {
		name := "steps kept"
		if !keep {
			name = "control: steps in memory only"
		}
		t.Run(name, func(t *testing.T) {
			ctx := ctxT(t)
			f := newStepsFixture(t)
			gid := roomim.GroupID("lalu", "k1")
			first := f.process(keep)
			if err := first.EnsureGroup(ctx, "lalu", "k1", "host", "k1"); err != nil {
				t.Fatal(err)
			}
			for _, u := range []string{"host", "bad"} {
				if err := f.fake.EnterGroup(gid, u); err != nil {
					t.Fatal(err)
				}
				f.tfake.EnterRoom(gid, u)
			}
			banUntil := f.now().Add(time.Hour).UnixMilli()
			kick := envelope(t, "lalu", "k1", 5, room.RoomUserKicked{TargetUserID: "bad", OperatorUserID: "host", BanUntilMs: banUntil})
			f.appendRow(kick)

			f.tfake.SetFailing("InternalError")
			if err := first.PublishRoomEvent(ctx, kick); trtc.CodeOf(err) != "InternalError" {
				t.Fatalf("kick with TRTC failing: %v", err)
			}
			first.Close() // the process dies
			if keep {
				if got := f.effectsDone(kick.EventID); got != doneMessage|doneIM {
					t.Fatalf("row records steps %03b, want the message and the ban (011)", got)
				}
			}
			f.tfake.SetFailing("")
			f.clock.Add((5*time.Minute + time.Second).Milliseconds()) // past Tencent's dedupe

			second := f.process(keep)
			defer second.Close()
			if err := second.PublishRoomEvent(ctx, kick); err != nil {
				t.Fatalf("retry in another process: %v", err)
			}
			if f.tfake.InRoom(gid, "bad") || len(f.tfake.Removed(gid)) != 1 {
				t.Fatalf("audio: in room %v, removed %v; want removed once", f.tfake.InRoom(gid, "bad"), f.tfake.Removed(gid))
			}
			if until, banned := f.fake.BannedUntil(gid, "bad"); !banned || until.Sub(time.UnixMilli(banUntil)).Abs() > time.Second {
				t.Fatalf("ban until %v (banned %v), want %v", until, banned, time.UnixMilli(banUntil))
			}
			if !keep {
				if n := f.shown(gid, kick.EventID); n != 2 {
					t.Fatalf("control: the kick reached the room %d times; without the steps kept a retry past the window shows it twice", n)
				}
				return
			}
			if n := f.shown(gid, kick.EventID); n != 1 {
				t.Fatalf("the kick reached the room %d times, want once", n)
			}
			if n, d := f.fake.CallCount(tencentim.APISendGroupMsg), f.fake.Duplicates(); n != 1 || d != 0 {
				t.Fatalf("%d sends (%d dropped as repeats), want one send: the retry must not send again", n, d)
			}
			if n := f.fake.CallCount(tencentim.APIBanGroupMember); n != 1 {
				t.Fatalf("%d ban calls, want 1: the retry must not ban again", n)
			}
			if got := f.effectsDone(kick.EventID); got != doneMessage|doneIM|doneAudio {
				t.Fatalf("row records steps %03b, want all three", got)
			}
		})
	}
}

// TestCloseRetriedElsewhereAfterDedupeWindow: a close's message goes out,
// then one of its teardown steps fails and the process dies; another
// process retries after the dedupe window. The room gets the close once,
// the audio room is dismissed once, the group is destroyed (and not made
// again).
func TestCloseRetriedElsewhereAfterDedupeWindow(t *testing.T) {
	cases := []struct {
		name string
		fail func(f *stepsFixture)
		heal func(f *stepsFixture)
		// done are the steps the first process finished.
		done uint32
	}{
		{"audio dismissal fails", func(f *stepsFixture) { f.tfake.SetFailing("InternalError") },
			func(f *stepsFixture) { f.tfake.SetFailing("") }, doneMessage},
		{"group destroy fails", func(f *stepsFixture) { f.fake.FailFraction(1, 10002, tencentim.APIDestroyGroup) },
			func(f *stepsFixture) { f.fake.FailFraction(0, 0) }, doneMessage | doneAudio},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t)
			f := newStepsFixture(t)
			gid := roomim.GroupID("lalu", "c1")
			first := f.process(true)
			if err := first.EnsureGroup(ctx, "lalu", "c1", "host", "c1"); err != nil {
				t.Fatal(err)
			}
			if err := f.fake.EnterGroup(gid, "u"); err != nil {
				t.Fatal(err)
			}
			f.tfake.EnterRoom(gid, "u")
			closed := envelope(t, "lalu", "c1", 9, room.RoomClosed{OperatorUserID: "host"})
			f.appendRow(closed)

			tc.fail(f)
			if err := first.PublishRoomEvent(ctx, closed); err == nil {
				t.Fatal("close with a teardown step failing succeeded")
			}
			first.Close()
			if got := f.effectsDone(closed.EventID); got != tc.done {
				t.Fatalf("row records steps %03b, want %03b", got, tc.done)
			}
			tc.heal(f)
			f.clock.Add((5*time.Minute + time.Second).Milliseconds())

			second := f.process(true)
			defer second.Close()
			if err := second.PublishRoomEvent(ctx, closed); err != nil {
				t.Fatalf("retry in another process: %v", err)
			}
			if n := f.shown(gid, closed.EventID); n != 1 {
				t.Fatalf("the close reached the room %d times, want once", n)
			}
			if n := f.fake.CallCount(tencentim.APISendGroupMsg); n != 1 {
				t.Fatalf("%d group sends, want 1", n)
			}
			if n := f.tfake.Dismissed(gid); n != 1 || f.tfake.RoomExists(gid) {
				t.Fatalf("audio room dismissed %d times (exists %v), want once", n, f.tfake.RoomExists(gid))
			}
			if _, ok := f.fake.Group(gid); ok || f.fake.CallCount(tencentim.APICreateGroup) != 1 {
				t.Fatalf("group exists %v after %d creates: want destroyed, never made again", ok, f.fake.CallCount(tencentim.APICreateGroup))
			}
		})
	}
}

// TestMuteRetriedElsewhere: a mute whose IM step failed is retried by
// another process past the window: the message once, the mute in place.
func TestMuteRetriedElsewhere(t *testing.T) {
	ctx := ctxT(t)
	f := newStepsFixture(t)
	gid := roomim.GroupID("lalu", "m1")
	first := f.process(true)
	if err := first.EnsureGroup(ctx, "lalu", "m1", "host", "m1"); err != nil {
		t.Fatal(err)
	}
	if err := f.fake.EnterGroup(gid, "u"); err != nil {
		t.Fatal(err)
	}
	until := f.now().Add(time.Hour).UnixMilli()
	mute := envelope(t, "lalu", "m1", 4, room.RoomMemberMuted{TargetUserID: "u", MutedUntilMs: until})
	f.appendRow(mute)
	f.fake.FailNext(1, 10002, tencentim.APIForbidSendMsg)
	if err := first.PublishRoomEvent(ctx, mute); !errors.Is(err, tencentim.ErrRetryable) {
		t.Fatalf("mute with forbid_send_msg failing: %v", err)
	}
	first.Close()
	f.clock.Add((5*time.Minute + time.Second).Milliseconds())
	second := f.process(true)
	defer second.Close()
	if err := second.PublishRoomEvent(ctx, mute); err != nil {
		t.Fatal(err)
	}
	if n := f.shown(gid, mute.EventID); n != 1 {
		t.Fatalf("the mute reached the room %d times, want once", n)
	}
	if _, muted := f.fake.MutedUntil(gid, "u"); !muted {
		t.Fatal("the member must be muted at IM")
	}
}

// failingSteps is a store that reads fine and records nothing.
type failingSteps struct {
	persistence.Store
	marks atomic.Int32
}

func (s *failingSteps) MarkOutboxEffectsDone(context.Context, string, uint32) error {
	s.marks.Add(1)
	return errors.New("store down")
}

// TestStepRecordFailureIsNoEventFailure: a step the store fails to record
// is still done: the event succeeds, and this process's retry (its memory)
// still skips what it did.
func TestStepRecordFailureIsNoEventFailure(t *testing.T) {
	ctx := ctxT(t)
	f := newStepsFixture(t)
	gid := roomim.GroupID("lalu", "s1")
	steps := &failingSteps{Store: f.store}
	pub := roomim.New(f.client, roomim.WithLogger(quiet), roomim.WithAudio(f.audio), roomim.WithClock(f.now),
		roomim.WithEffectSteps(func(persistence.RoomKey) roomim.EffectSteps { return steps }, time.Second))
	defer pub.Close()
	if err := pub.EnsureGroup(ctx, "lalu", "s1", "", "s1"); err != nil {
		t.Fatal(err)
	}
	f.tfake.EnterRoom(gid, "bad")
	kick := envelope(t, "lalu", "s1", 3, room.RoomUserKicked{TargetUserID: "bad", BanUntilMs: f.now().Add(time.Hour).UnixMilli()})
	f.appendRow(kick)
	f.tfake.SetFailing("InternalError")
	if err := pub.PublishRoomEvent(ctx, kick); trtc.CodeOf(err) != "InternalError" {
		t.Fatalf("kick with TRTC failing: %v", err)
	}
	f.tfake.SetFailing("")
	f.clock.Add((5*time.Minute + time.Second).Milliseconds())
	if err := pub.PublishRoomEvent(ctx, kick); err != nil {
		t.Fatalf("kick whose steps could not be recorded: %v", err)
	}
	if steps.marks.Load() != 3 {
		t.Fatalf("%d records tried, want 3 (message, ban, audio)", steps.marks.Load())
	}
	if n := f.shown(gid, kick.EventID); n != 1 || f.fake.CallCount(tencentim.APIBanGroupMember) != 1 || f.tfake.InRoom(gid, "bad") {
		t.Fatalf("shown %d times, %d bans, in audio room %v", n, f.fake.CallCount(tencentim.APIBanGroupMember), f.tfake.InRoom(gid, "bad"))
	}
	if got := f.effectsDone(kick.EventID); got != 0 {
		t.Fatalf("row records %03b through a store that records nothing", got)
	}
}
