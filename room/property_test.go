package room_test

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/room"
)

var propSeed = flag.Uint64("room.seed", 0, "run TestReplayEqualsLive with this seed only (printed by a failure)")

const (
	propSeeds    = 16   // fixed seeds, plus one new seed per run
	propCommands = 3000 // commands per seed
)

// TestReplayEqualsLive is the property behind activation: for random
// command sequences, the state rebuilt from any snapshot plus the recorded
// events after it equals the state the live room had, and so does one
// state changed in place command by command (as the grain applies them).
// On the way it checks the room's invariants after every command.
func TestReplayEqualsLive(t *testing.T) {
	seeds := make([]uint64, 0, propSeeds+1)
	if *propSeed != 0 {
		seeds = append(seeds, *propSeed)
	} else {
		for i := range uint64(propSeeds) {
			seeds = append(seeds, i+1)
		}
		seeds = append(seeds, uint64(time.Now().UnixNano())|1)
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			// The fixed seeds hold the generator to its coverage; the
			// random one explores, and a thin draw of one kind of change
			// there says nothing about the rules.
			summary, err := replayProperty(seed, propCommands, seed <= propSeeds)
			t.Log(summary)
			if err != nil {
				t.Fatalf("%v\nrerun: go test ./room/ -run 'TestReplayEqualsLive' -room.seed=%d", err, seed)
			}
		})
	}
}

// record is one command log row as the store keeps it: the events travel
// as JSON envelopes and are decoded again on replay.
type record struct {
	seq    int64
	events []byte // JSON []persistence.Envelope
	sealed []byte // room.SealedOf the events: stored beside them, never in them
}

type snapshot struct {
	seq   int64
	state []byte
}

// sim drives one room with random commands.
type sim struct {
	r       *rand.Rand
	users   []string
	seats   int // the room's seat count once created
	now     int64
	closeAt int // step from which CloseRoom is tried
	// chatTurn: this turn is the chat switch's (SetChatDisabled), counted
	// by chatTurns; it draws nothing.
	chatTurn  bool
	chatTurns int
	giftHeat  int64
	eventIDs  map[string]bool
	seen      map[string]int // events per type
	requests  int            // seat applications and invitations made
	ended     int            // ... and ended
	reopens   int            // reopened RoomCreated events
	closedAt  int            // step of the last accepted close (-1: none)

	audioReleased int // seats released at the end of an audio grace
	presenceLeft  int // members taken out at the end of a presence window
	step          int
	likes         int64        // likes counted (RoomLiked)
	lastLike      room.Command // a like sent before, retried now and then
	lr            *rand.Rand   // the likes' own stream
	likeN         int          // likes made
	ranks         rankSim      // the contribution ranking's own account (ranking_test.go)
}

func replayProperty(seed uint64, n int, coverage bool) (summary string, err error) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	sm := &sim{
		r:        r,
		lr:       rand.New(rand.NewPCG(seed^0x6c696b6573, seed)),
		users:    []string{"owner", "admin", "u1", "u2", "u3", "u4", "u5"},
		now:      t0,
		closeAt:  n/3 + r.IntN(n), // about two thirds of the seeds close the room
		eventIDs: map[string]bool{},
		seen:     map[string]int{},
		closedAt: -1,
	}
	switch r.IntN(3) {
	case 0:
		sm.seats = 0 // default
	default:
		sm.seats = 1 + r.IntN(5) // few seats: contention
	}
	live := room.NewState(tApp, tRoom)
	liveAt := map[int64]room.State{0: live}
	// inPlace follows the same commands the way the grain does: one state
	// changed in place, never copied.
	inPlace := room.NewState(tApp, tRoom)
	var recs []record
	snaps := []snapshot{}
	// one decides c and keeps what it logged; rnd decides the snapshots.
	one := func(step int, c room.Command, rnd *rand.Rand) error {
		pre := live.Clone()
		evs, err := room.Decide(live, c)
		if !reflect.DeepEqual(live, pre) {
			return fmt.Errorf("step %d: Decide(%+v) changed its input", step, c)
		}
		if err := sm.checkDecision(pre, c, evs, err); err != nil {
			return fmt.Errorf("step %d %s by %s: %w", step, c.Type, c.UserID, err)
		}
		if err != nil || !room.Mutates(c.Type) {
			return nil
		}
		seq := live.Seq + 1
		live = room.ApplyCommand(live, seq, evs)
		if !reflect.DeepEqual(pre, liveAt[seq-1]) {
			return fmt.Errorf("step %d: ApplyCommand changed its input", step)
		}
		liveAt[seq] = live
		inPlace.ApplyInPlace(seq, evs)
		if !reflect.DeepEqual(inPlace, live) {
			return fmt.Errorf("step %d: the state applied in place differs:%s", step, diff(inPlace, live))
		}
		rec, err := sm.store(c, seq, evs)
		if err != nil {
			return fmt.Errorf("step %d: %w", step, err)
		}
		recs = append(recs, rec)
		if err := sm.invariants(live); err != nil {
			return fmt.Errorf("step %d after %s by %s (seq %d): %w\nstate %+v", step, c.Type, c.UserID, seq, err, live)
		}
		if rnd != nil && rnd.IntN(100) == 0 { // a chat turn draws nothing (rnd nil)
			b, err := live.Marshal()
			if err != nil {
				return err
			}
			snaps = append(snaps, snapshot{seq: seq, state: b})
		}
		return nil
	}
	for i := range n + n/40 {
		// Every 41st turn is the chat switch's (chatTurn), which draws
		// nothing: step counts the drawn commands, which stay as they are.
		step := i - i/41
		if step >= n {
			break
		}
		sm.step, sm.chatTurn = step, false
		// Likes come from a stream of their own, between the main
		// stream's commands, which decide as they would without them
		// (nothing but likes reads the like total or receipts): the
		// main stream's coverage does not move with them.
		if live.Exists && sm.lr.IntN(20) == 0 {
			if err := one(step, sm.like(), sm.lr); err != nil {
				return sm.summary(len(recs), len(snaps)), err
			}
		}
		rnd := r
		if sm.chatTurn = i%41 == 40; sm.chatTurn {
			rnd = nil
		}
		if err := one(step, sm.next(step, live), rnd); err != nil {
			return sm.summary(len(recs), len(snaps)), err
		}
	}
	// The generator must reach every kind of change, or the property
	// proves little.
	if sm.seen[room.TypeRoomCreated] != 1+sm.reopens {
		return sm.summary(len(recs), len(snaps)), fmt.Errorf("%d RoomCreated events, %d of them reopens", sm.seen[room.TypeRoomCreated], sm.reopens)
	}
	// A room closed with time to spare is opened again (ReopenRoom is
	// tried at one step in ten while it is closed).
	if coverage && sm.audioReleased == 0 {
		return sm.summary(len(recs), len(snaps)), fmt.Errorf("no seat released at the end of an audio grace")
	}
	if coverage && sm.presenceLeft == 0 {
		return sm.summary(len(recs), len(snaps)), fmt.Errorf("no member left at the end of a presence window")
	}
	if coverage && sm.closedAt >= 0 && sm.closedAt < n-200 && sm.reopens == 0 {
		return sm.summary(len(recs), len(snaps)), fmt.Errorf("closed at step %d of %d and never reopened", sm.closedAt, n)
	}
	for _, typ := range []string{room.TypeRoomUserJoined, room.TypeRoomUserLeft, room.TypeRoomMicTaken,
		room.TypeRoomMicReleased, room.TypeRoomGiftSent, room.TypeRoomHeatChanged, room.TypeRoomUserKicked,
		room.TypeRoomAdminSet, room.TypeRoomAdminRemoved, room.TypeRoomSeatMuted, room.TypeRoomSeatUnmuted,
		room.TypeRoomSeatLocked, room.TypeRoomSeatUnlocked, room.TypeRoomUpdated,
		room.TypeRoomSeatModeChanged, room.TypeRoomSeatApplied, room.TypeRoomSeatApplicationEnded,
		room.TypeRoomSeatInvited, room.TypeRoomSeatInvitationEnded, room.TypeRoomSeatCountChanged,
		room.TypeRoomUserBanned, room.TypeRoomUserUnbanned, room.TypeRoomMemberMuted, room.TypeRoomMemberUnmuted,
		room.TypeRoomMetadataChanged, room.TypeRoomAudioSeen, room.TypeRoomAudioRemoved, room.TypeRoomAudioDismissed,
		room.TypeRoomCustomInfoChanged, room.TypeRoomPasswordChanged, room.TypeRoomAllMicsMutedChanged,
		room.TypeRoomLiked, room.TypeRoomLikeReceipts, room.TypeRoomChatDisabledChanged, room.TypeRoomTopContributorsChanged} {
		// Lifting a ban or a mute needs one in force first: rarer, so two
		// a seed will do (every seed together makes dozens).
		least := 5
		if typ == room.TypeRoomUserUnbanned || typ == room.TypeRoomMemberUnmuted {
			least = 2
		}
		if coverage && sm.seen[typ] < least {
			return sm.summary(len(recs), len(snaps)), fmt.Errorf("only %d %s events in %d commands (%d logged): the generator does not exercise the room", sm.seen[typ], typ, n, len(recs))
		}
	}

	// From empty, every step of the replay equals the live state at that
	// seq.
	s := room.NewState(tApp, tRoom)
	for _, rec := range recs {
		var err error
		if s, err = replayRecord(s, rec); err != nil {
			return sm.summary(len(recs), len(snaps)), err
		}
		if !reflect.DeepEqual(s, liveAt[rec.seq]) {
			return sm.summary(len(recs), len(snaps)), fmt.Errorf("replay from empty differs at seq %d:%s", rec.seq, diff(s, liveAt[rec.seq]))
		}
	}
	// From every snapshot, the replay ends at the live state.
	for _, sn := range snaps {
		s, err := room.UnmarshalState(sn.state)
		if err != nil {
			return sm.summary(len(recs), len(snaps)), fmt.Errorf("snapshot at seq %d: %w", sn.seq, err)
		}
		if !reflect.DeepEqual(s, liveAt[sn.seq]) {
			return sm.summary(len(recs), len(snaps)), fmt.Errorf("snapshot at seq %d decodes differently from the live state:%s", sn.seq, diff(s, liveAt[sn.seq]))
		}
		for _, rec := range recs[sn.seq:] {
			if s, err = replayRecord(s, rec); err != nil {
				return sm.summary(len(recs), len(snaps)), err
			}
		}
		if !reflect.DeepEqual(s, live) {
			return sm.summary(len(recs), len(snaps)), fmt.Errorf("replay from snapshot at seq %d differs from the live state:%s", sn.seq, diff(s, live))
		}
		a, _ := s.Marshal()
		b, _ := live.Marshal()
		if string(a) != string(b) {
			return sm.summary(len(recs), len(snaps)), fmt.Errorf("replay from snapshot at seq %d marshals differently:\n%s\n%s", sn.seq, a, b)
		}
	}
	return sm.summary(len(recs), len(snaps)), nil
}

func (sm *sim) summary(logged, snaps int) string {
	return fmt.Sprintf("%d commands logged, %d snapshots, events %v, closed from step %d", logged, snaps, sm.seen, sm.closeAt)
}

// diff shows two states; %#v, because %+v prints a nil and an empty map
// alike.
func diff(replay, live room.State) string {
	return fmt.Sprintf("\nreplay %#v\nlive   %#v", replay, live)
}

func replayRecord(s room.State, rec record) (room.State, error) {
	var envs []persistence.Envelope
	if err := json.Unmarshal(rec.events, &envs); err != nil {
		return s, fmt.Errorf("seq %d: %w", rec.seq, err)
	}
	evs := make([]room.Event, 0, len(envs))
	for _, env := range envs {
		e, err := room.DecodeEvent(env.EventType, env.Payload)
		if err != nil {
			return s, fmt.Errorf("seq %d: %w", rec.seq, err)
		}
		evs = append(evs, e)
	}
	if err := room.Unseal(evs, rec.sealed); err != nil {
		return s, fmt.Errorf("seq %d: %w", rec.seq, err)
	}
	return room.ApplyCommand(s, rec.seq, evs), nil
}

// store serialises the events of an accepted command as the grain does.
func (sm *sim) store(c room.Command, seq int64, evs []room.Event) (record, error) {
	envs := make([]persistence.Envelope, len(evs))
	for i, e := range evs {
		payload, err := json.Marshal(e)
		if err != nil {
			return record{}, err
		}
		id := room.EventID(c.AppCode, c.RoomID, seq, i)
		if sm.eventIDs[id] {
			return record{}, fmt.Errorf("event_id %s issued twice", id)
		}
		sm.eventIDs[id] = true
		envs[i] = persistence.Envelope{EventID: id, EventType: e.EventType(), AppCode: c.AppCode, RoomID: c.RoomID,
			RoomSeq: seq, CommandID: c.CommandID, RequestID: c.RequestID, CreatedAtMs: c.NowMs, Payload: payload}
	}
	b, err := json.Marshal(envs)
	return record{seq: seq, events: b, sealed: room.SealedOf(evs)}, err
}

func (sm *sim) pick(users []string) string { return users[sm.r.IntN(len(users))] }

// next makes a random command, mostly valid, sometimes not.
func (sm *sim) next(step int, s room.State) room.Command {
	r := sm.r
	// The chat switch's turn draws nothing: mostly a change, now and
	// then on again; by the owner, an admin or a member.
	if sm.chatTurn {
		n := sm.chatTurns
		sm.chatTurns++
		return room.Command{Type: room.CmdSetChatDisabled, CommandID: fmt.Sprintf("chat%d", n), RequestID: "r", AppCode: tApp, RoomID: tRoom,
			UserID: []string{"owner", "admin", "u1"}[n%3], NowMs: sm.now, ChatDisabled: !s.ChatDisabled() || n%5 == 0}
	}
	sm.now += r.Int64N(3000) // ~1.5 s per command: short bans run out during a run
	c := room.Command{CommandID: fmt.Sprintf("c%d", step), RequestID: "r", AppCode: tApp, RoomID: tRoom,
		UserID: sm.pick(sm.users), NowMs: sm.now}
	if !s.Exists && step >= 3 || r.IntN(500) == 0 {
		c.Type, c.UserID, c.Name, c.MicSeats = room.CmdCreateRoom, "owner", "prop", sm.seats
		c.Admins = []string{"admin"}
		if r.IntN(2) == 0 {
			c.Admins = append(c.Admins, "u1", "owner")
		}
		return c
	}
	if step >= sm.closeAt && r.IntN(20) == 0 {
		c.Type = room.CmdCloseRoom
		return c
	}
	// Mostly the owner reopens; now and then someone else, or the open
	// room (a no-op), or under a blank name (invalid).
	if s.Status == room.StatusClosed && r.IntN(10) == 0 || r.IntN(300) == 0 {
		c.Type, c.UserID = room.CmdReopenRoom, sm.pick([]string{s.Owner, s.Owner, s.Owner, "admin", "u2"})
		c.Name = sm.pick([]string{"", "", "reopened", " "})
		return c
	}
	op := func() string { return sm.pick([]string{"owner", "owner", "admin", "u1", "u2"}) }
	seat := func() int { return r.IntN(max(len(s.Seats), 1) + 2) } // now and then out of range
	if r.IntN(3) > 0 {
		seat = func() int { return r.IntN(max(len(s.Seats), 1)) }
	}
	switch k := r.IntN(382); {
	case k < 22:
		c.Type = room.CmdJoinRoom
		// The room's password is p1: mostly offered, now and then a
		// wrong one or none.
		if s.HasPassword() && r.IntN(16) > 0 {
			c.PasswordMAC = room.PasswordMAC(testKey, s.PasswordSalt(), sm.pick([]string{"p1", "p1", "p1", "p1", "p1", "p1", "p1", "p2"}))
		}
		if r.IntN(3) == 0 {
			c.MaxMembers = 3 + r.IntN(3) // a node's room.max_members
		}
	case k < 32:
		c.Type = room.CmdLeaveRoom
		switch r.IntN(8) {
		case 0, 1:
			c.Reason = room.ReasonHeartbeatTimeout
		case 2:
			c.Reason = room.ReasonSwitchedRoom
		}
	case k < 52:
		c.Type = room.CmdTakeMic
		c.Seat = seat()
	case k < 62:
		c.Type = room.CmdReleaseMic
	case k < 78:
		c.Type = room.CmdSendGift
		c.ToUserID, c.GiftID = sm.pick(sm.users), "rose"
		c.GiftCount = r.Int64N(4) // 0 is invalid
		c.HeatValue = r.Int64N(3) * r.Int64N(500)
		c.GiftValue, c.Day = sm.ranks.gift(sm.now)
	case k < 92:
		c.Type = room.CmdKickUser
		c.UserID = sm.pick([]string{"owner", "admin", "u1", "u2"})
		c.TargetUserID = sm.pick(sm.users)
		c.BanSeconds = r.Int64N(3) * r.Int64N(6) // 0..10 s, often none
		c.Reason = "prop"
	case k < 100:
		c.Type = room.CmdHeartbeat
		c.CommandID = ""
	case k < 112:
		// Mostly the command that changes something (toggles), sometimes
		// the one that is a no-op.
		c.UserID, c.TargetUserID = op(), sm.pick(sm.users)
		c.Type = toggle(r, s.IsAdmin(c.TargetUserID), room.CmdSetAdmin, room.CmdRemoveAdmin)
	case k < 126:
		c.UserID, c.Seat = op(), seat()
		c.Type = toggle(r, s.SeatMuted(c.Seat), room.CmdMuteSeat, room.CmdUnmuteSeat)
	case k < 140:
		c.UserID, c.Seat = op(), seat()
		c.Type = toggle(r, s.SeatLocked(c.Seat), room.CmdLockSeat, room.CmdUnlockSeat)
	case k < 150 && r.IntN(2) == 0, k >= 367 && k < 372:
		sm.meta(&c, op)
	case k < 150:
		// Mostly the owner: the admins come and go (a kick by the owner
		// takes the rank away), and this band is narrow.
		c.Type, c.UserID = room.CmdUpdateRoom, sm.pick([]string{"owner", "owner", op()})
		if r.IntN(2) == 0 {
			c.Name = sm.pick([]string{"prop", "renamed", "again", " "}) // blank is invalid
		}
		if c.Name == "" || r.IntN(2) == 0 {
			a := sm.pick([]string{"", fmt.Sprintf("note %d\nline 2", step), fmt.Sprintf("note %d", step), fmt.Sprintf("bad %d\x00", step)}) // NUL is invalid
			c.Announcement = &a
		}
	case k < 240:
		sm.seatRequest(&c, s, op, seat)
	case k < 270:
		sm.seatMove(&c, s, op, seat)
	case k >= 378:
		c.Type, c.UserID, c.AllMicsMuted = room.CmdSetAllMicsMuted, sm.pick([]string{"owner", op()}), r.IntN(2) == 0
	case k >= 372:
		c.Type, c.UserID = room.CmdSetRoomPassword, sm.pick([]string{"owner", op()})
		if r.IntN(2) == 0 {
			c.ClearPassword = true
		} else {
			c.PasswordSaltNew = fmt.Sprintf("salt%d", step)
			c.PasswordMAC = room.PasswordMAC(testKey, c.PasswordSaltNew, "p1")
		}
	case k >= 360 && k < 367:
		sm.customInfo(&c, op)
	case k >= 330 && r.IntN(2) == 0:
		sm.audio(&c, s)
	case k >= 330: // half of the audio draw goes to the rarest events' commands
		sm.seatRequest(&c, s, op, seat)
	default:
		c.UserID, c.TargetUserID = op(), sm.pick(sm.users)
		switch r.IntN(10) {
		case 0, 4:
			c.Type, c.BanSeconds = room.CmdBanUser, r.Int64N(60) // 0 is invalid
			c.Reason = sm.pick([]string{"", "spam", "abuse"})
			// Now and then a batch: more targets (repeats among them), or
			// only target_user_ids.
			if r.IntN(3) == 0 {
				for range 1 + r.IntN(4) {
					c.TargetUserIDs = append(c.TargetUserIDs, sm.pick(sm.users))
				}
				if r.IntN(2) == 0 {
					c.TargetUserID = ""
				}
			}
		case 1, 5:
			c.Type = room.CmdUnbanUser
			if banned := slices.Sorted(maps.Keys(s.Bans)); len(banned) > 0 && r.IntN(4) > 0 {
				c.TargetUserID = sm.pick(banned)
			}
		case 2, 6, 7:
			c.Type, c.MuteSeconds = room.CmdMuteMember, r.Int64N(60)
			if members := s.SortedMembers(); len(members) > 0 && r.IntN(2) == 0 {
				c.TargetUserID = sm.pick(members)
			}
		default:
			c.Type = room.CmdUnmuteMember
			var muted []string
			for _, m := range room.View(s).MutedMembers {
				muted = append(muted, m.UserId)
			}
			if len(muted) > 0 && r.IntN(4) > 0 {
				c.TargetUserID = sm.pick(muted)
			}
		}
	}
	return c
}

// audio makes the callback endpoint's command: Tencent's reports arrive
// late, twice and out of order, so event times wander around now.
func (sm *sim) audio(c *room.Command, s room.State) {
	r := sm.r
	c.Type, c.SeatGraceMs = room.CmdAudioPresence, r.Int64N(4)*2000
	c.EventTimeMs = c.NowMs - r.Int64N(8000)
	c.AudioKind = sm.pick([]string{room.AudioEnter, room.AudioExit, room.AudioExit, room.AudioStart, room.AudioDismiss})
	if sm.step%3 == 0 { // IM's login and logout, by the step: the draws stay as they were
		if k, ok := map[string]string{room.AudioEnter: room.PresenceOnline, room.AudioExit: room.PresenceOffline}[c.AudioKind]; ok {
			c.AudioKind = k
		}
	}
	if seated := slices.DeleteFunc(slices.Clone(s.Seats), func(u string) bool { return u == "" }); len(seated) > 0 && r.IntN(2) == 0 {
		c.UserID, c.AudioKind = sm.pick(seated), room.AudioExit // a ghost seat in the making
	}
	if sm.step%4 == 0 { // the presence source's report (by the step: the other draws stay as they were)
		c.LeaveAfterMs = 1000 + int64(sm.step%16)*250
	}
	marks := s.AudioMarks()
	if c.AudioKind == room.PresenceOnline || c.AudioKind == room.PresenceOffline {
		marks = s.OnlineMarks()
	}
	if m, ok := marks[c.UserID]; ok && r.IntN(6) == 0 {
		c.EventTimeMs = m.LastMs // a retry of the newest
	}
	c.CommandID = fmt.Sprintf("trtc-%s-%d", c.AudioKind, sm.step)
	if r.IntN(40) == 0 {
		c.AudioKind = "bad"
	}
}

// seatMove makes one of the seat move commands.
func (sm *sim) seatMove(c *room.Command, s room.State, op func() string, seat func() int) {
	r := sm.r
	seated := slices.DeleteFunc(slices.Clone(s.Seats), func(u string) bool { return u == "" })
	target := sm.pick(sm.users)
	if len(seated) > 0 && r.IntN(4) > 0 {
		target = sm.pick(seated)
	}
	switch k := r.IntN(10); {
	case k < 4:
		c.Type, c.UserID, c.TargetUserID = room.CmdKickOffSeat, op(), target
	case k < 8:
		c.Type, c.UserID, c.Seat = room.CmdMoveSeat, target, seat()
		if r.IntN(3) == 0 {
			c.UserID, c.TargetUserID = op(), target
		}
		c.MovePolicy = sm.pick([]string{"", "", room.MoveAbort, room.MoveForce, room.MoveSwap, room.MoveSwap})
	default:
		c.Type, c.UserID, c.MicSeats = room.CmdSetSeatCount, op(), 1+r.IntN(10)
		if r.IntN(20) == 0 {
			c.MicSeats = 0 // invalid
		}
	}
}

// meta sets the room's metadata (now and then an invalid category).
func (sm *sim) meta(c *room.Command, op func() string) {
	c.Type, c.UserID = room.CmdSetRoomMetadata, sm.pick([]string{"owner", "owner", op()}) // as UpdateRoom
	c.Category = sm.pick([]string{"", "music", "talk", "bad category"})                   // a space is invalid
	c.Visibility = sm.pick([]string{"", room.VisibilityPublic, room.VisibilityUnlisted})
	c.CoverURL = sm.pick([]string{"", "https://cdn/1.png", "https://cdn/2.png"})
	for range sm.r.IntN(4) {
		c.Tags = append(c.Tags, sm.pick([]string{"jazz", "chill", "kpop", "jazz"}))
	}
}

// customInfo sets and deletes a few keys of a small set (now and then an
// invalid one), values up to 1500 bytes so the total's limit is reached.
func (sm *sim) customInfo(c *room.Command, op func() string) {
	r := sm.r
	c.Type, c.UserID = room.CmdSetRoomCustomInfo, op()
	keys := []string{"theme", "pin", "game", "lang", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9", "k10", "k11", "bad key"} // a space is invalid
	for range r.IntN(4) {
		if c.CustomSet == nil {
			c.CustomSet = map[string]string{}
		}
		c.CustomSet[sm.pick(keys)] = sm.pick([]string{"", "a", "b", strings.Repeat("v", 1500)})
	}
	for range r.IntN(2) {
		c.CustomDelete = append(c.CustomDelete, sm.pick(keys))
	}
}

// seatRequest makes one of the seat mode, application and invitation
// commands, or the room's own expiry. Timeouts are short (1 to 6 s at
// ~1.5 s a command), so requests run out during a run too.
func (sm *sim) seatRequest(c *room.Command, s room.State, op func() string, seat func() int) {
	r := sm.r
	c.TimeoutSeconds = 1 + r.Int64N(6)
	switch k := r.IntN(100); {
	case k < 10:
		c.Type, c.UserID = room.CmdSetSeatMode, op()
		c.SeatMode = toggle(r, room.View(s).SeatMode == room.SeatModeApply, room.SeatModeApply, room.SeatModeFree)
		if r.IntN(10) == 0 {
			c.SeatMode = "bad"
		}
	case k < 36:
		c.Type, c.Seat = room.CmdApplySeat, seat()
		for i, u := range s.Seats {
			if u == "" && r.IntN(2) == 0 {
				c.Seat = i
				break
			}
		}
	case k < 42:
		c.Type = room.CmdCancelSeatApplication
	case k < 54:
		c.Type, c.UserID, c.TargetUserID = room.CmdApproveSeatApplication, op(), sm.pick(sm.users)
	case k < 60:
		c.Type, c.UserID, c.TargetUserID = room.CmdRejectSeatApplication, op(), sm.pick(sm.users)
	case k < 76:
		c.Type, c.UserID, c.TargetUserID, c.Seat = room.CmdInviteToSeat, op(), sm.pick(sm.users), seat()
		if free := slices.DeleteFunc(s.SortedMembers(), func(u string) bool { return s.SeatOf(u) >= 0 }); len(free) > 0 && r.IntN(2) == 0 {
			c.TargetUserID = sm.pick(free)
		}
		for i, u := range s.Seats {
			if u == "" && r.IntN(2) == 0 {
				c.Seat = i
				break
			}
		}
	case k < 86:
		c.Type = room.CmdAcceptSeatInvitation
	case k < 90:
		c.Type = room.CmdDeclineSeatInvitation
	default:
		// What the grain sends when its timer fires: at the deadline, or
		// (a late timer) after it.
		c.Type, c.UserID, c.CommandID = room.CmdExpireSeatRequests, "room", fmt.Sprintf("seat-expire-%d", s.Seq)
		if d := s.NextSeatDeadline(); d > 0 && r.IntN(2) == 0 {
			c.NowMs = max(c.NowMs, d)
		}
	}
}

// toggle picks on when the thing is off and off when it is on, and the
// other way round one time in eight.
func toggle(r *rand.Rand, isOn bool, on, off string) string {
	if isOn != (r.IntN(8) == 0) {
		return off
	}
	return on
}

// checkDecision checks a decision against rules stated independently of
// decide.go.
func (sm *sim) checkDecision(s room.State, c room.Command, evs []room.Event, err error) error {
	if err != nil {
		if evs != nil {
			return fmt.Errorf("rejected with events %v", evs)
		}
		if errclass.Name(err) == errclass.NameInternal {
			return fmt.Errorf("error without a class: %v", err)
		}
		switch {
		case s.Status == room.StatusClosed && c.Type == room.CmdCreateRoom:
			if !errors.Is(err, room.ErrRoomExists) {
				return fmt.Errorf("create on a closed room: %v", err)
			}
		case s.Status == room.StatusClosed && c.Type == room.CmdReopenRoom:
			if c.UserID == s.Owner && !errors.Is(err, errclass.Invalid) {
				return fmt.Errorf("the owner's reopen refused: %v", err)
			}
		case s.Status == room.StatusClosed && !errors.Is(err, errclass.Invalid) && !errors.Is(err, room.ErrRoomClosed):
			return fmt.Errorf("closed room answered %v", err)
		case !s.Exists && c.Type != room.CmdCreateRoom && !errors.Is(err, errclass.Invalid) && !errors.Is(err, room.ErrRoomNotFound):
			return fmt.Errorf("missing room answered %v", err)
		}
		return nil
	}
	if s.Status == room.StatusClosed && c.Type != room.CmdReopenRoom {
		return fmt.Errorf("closed room accepted %v", evs)
	}
	if !room.Mutates(c.Type) && len(evs) > 0 {
		return fmt.Errorf("unlogged command produced %v", evs)
	}
	cur := s // s after the events before e: seat changes must have their own events
	for _, e := range evs {
		sm.seen[e.EventType()]++
		if err := sm.ranks.saw(e); err != nil {
			return err
		}
		if _, ok := e.(room.RoomClosed); ok {
			sm.closedAt = sm.step
		}
		switch e := e.(type) {
		case room.RoomUserLeft:
			if cur.SeatOf(e.UserID) >= 0 {
				return fmt.Errorf("%s left holding a seat without a RoomMicReleased", e.UserID)
			}
			if c.Type == room.CmdExpireSeatRequests {
				a, o := cur.AudioMarks()[e.UserID], cur.OnlineMarks()[e.UserID]
				due := func(m room.AudioMark) bool { return m.LeaveAtMs > 0 && m.LeaveAtMs <= c.NowMs && m.Out }
				if e.Reason != room.ReasonHeartbeatTimeout || !due(a) && !due(o) {
					return fmt.Errorf("presence leave against the rules: %+v (audio %+v, online %+v) at %d", e, a, o, c.NowMs)
				}
				sm.presenceLeft++
			}
		case room.RoomUserJoined:
			if s.BannedAt(e.UserID, c.NowMs) || s.IsMember(e.UserID) {
				return fmt.Errorf("join of a banned user or member %s", e.UserID)
			}
			if c.Type == room.CmdJoinRoom && s.HasPassword() && !s.IsAdmin(e.UserID) &&
				c.PasswordMAC != room.PasswordMAC(testKey, s.PasswordSalt(), "p1") {
				return fmt.Errorf("join of %s without the password", e.UserID)
			}
			if c.MaxMembers > 0 && len(cur.Members) >= c.MaxMembers && e.UserID != s.Owner {
				return fmt.Errorf("join of %s past the cap %d (%d members)", e.UserID, c.MaxMembers, len(cur.Members))
			}
		case room.RoomMicTaken:
			if !cur.IsMember(e.UserID) || cur.Seats[e.Seat] != "" || cur.SeatOf(e.UserID) >= 0 || cur.SeatLocked(e.Seat) {
				return fmt.Errorf("mic taken against the rules: %+v", e)
			}
		case room.RoomUserKicked:
			if cur.SeatOf(e.TargetUserID) >= 0 {
				return fmt.Errorf("%s kicked holding a seat without a RoomMicReleased", e.TargetUserID)
			}
			if e.TargetUserID == s.Owner || !(c.UserID == s.Owner || s.IsAdmin(c.UserID) && s.IsMember(c.UserID)) {
				return fmt.Errorf("kick against the rules: %+v", e)
			}
		case room.RoomCreated:
			if e.Reopened {
				if s.Status != room.StatusClosed || c.UserID != s.Owner || e.OwnerUserID != s.Owner || e.MicSeats != len(s.Seats) {
					return fmt.Errorf("reopen against the rules: %+v by %s (owner %s, status %s)", e, c.UserID, s.Owner, s.Status)
				}
				sm.reopens++
			}
		case room.RoomClosed, room.RoomSeatMuted, room.RoomSeatUnmuted, room.RoomSeatLocked, room.RoomSeatUnlocked, room.RoomUpdated, room.RoomMetadataChanged,
			room.RoomCustomInfoChanged, room.RoomAllMicsMutedChanged, room.RoomChatDisabledChanged:
			if !(c.UserID == s.Owner || s.IsAdmin(c.UserID) && s.IsMember(c.UserID)) {
				return fmt.Errorf("%s by %s", e.EventType(), c.UserID)
			}
		case room.RoomAdminSet, room.RoomAdminRemoved:
			if c.UserID != s.Owner || c.TargetUserID == s.Owner {
				return fmt.Errorf("%s by %s for %s", e.EventType(), c.UserID, c.TargetUserID)
			}
		case room.RoomSeatApplied:
			if _, dup := cur.Applications()[e.UserID]; dup || !s.IsMember(e.UserID) || cur.SeatOf(e.UserID) >= 0 {
				return fmt.Errorf("application against the rules: %+v", e)
			}
			sm.requests++
		case room.RoomSeatInvited:
			if _, dup := cur.Invitations()[e.UserID]; dup || !s.IsMember(e.UserID) || cur.SeatOf(e.UserID) >= 0 {
				return fmt.Errorf("invitation against the rules: %+v", e)
			}
			sm.requests++
		case room.RoomSeatApplicationEnded:
			// Ends exactly once: only a pending application ends, and only
			// a live one is approved.
			a, ok := cur.Applications()[e.UserID]
			if !ok || a.Seat != e.Seat || !endedInTime(e.Outcome, a, c.NowMs) {
				return fmt.Errorf("application end against the rules: %+v (pending %+v, %v)", e, a, ok)
			}
			sm.ended++
		case room.RoomSeatInvitationEnded:
			inv, ok := cur.Invitations()[e.UserID]
			if !ok || inv.Seat != e.Seat || !endedInTime(e.Outcome, inv, c.NowMs) {
				return fmt.Errorf("invitation end against the rules: %+v (pending %+v, %v)", e, inv, ok)
			}
			sm.ended++
		case room.RoomUserBanned:
			if cur.IsMember(e.TargetUserID) || e.TargetUserID == s.Owner || e.BanUntilMs <= c.NowMs {
				return fmt.Errorf("ban against the rules: %+v", e)
			}
		case room.RoomMemberMuted:
			if !cur.IsMember(e.TargetUserID) || e.TargetUserID == s.Owner || e.MutedUntilMs <= c.NowMs {
				return fmt.Errorf("mute against the rules: %+v", e)
			}
		case room.RoomSeatCountChanged:
			if !(c.UserID == s.Owner || s.IsAdmin(c.UserID) && s.IsMember(c.UserID)) || e.MicSeats < 1 ||
				slices.ContainsFunc(cur.Seats[min(e.MicSeats, len(cur.Seats)):], func(u string) bool { return u != "" }) {
				return fmt.Errorf("seat count change against the rules: %+v, seats before %v", e, cur.Seats)
			}
			sm.seats = e.MicSeats
		case room.RoomMicReleased:
			if e.Reason == room.ReasonAudioLeft {
				m := cur.AudioMarks()[e.UserID]
				if c.Type != room.CmdExpireSeatRequests || m.ReleaseAtMs == 0 || m.ReleaseAtMs > c.NowMs || !m.Out {
					return fmt.Errorf("audio release against the rules: %+v (mark %+v) at %d", e, m, c.NowMs)
				}
				sm.audioReleased++
			}
		case room.RoomAudioSeen:
			im := e.Kind == room.PresenceOnline || e.Kind == room.PresenceOffline
			if m, ok := cur.AudioMarks()[e.UserID]; ok && !im && c.Type == room.CmdAudioPresence && (e.EventMs < m.LastMs || e.EventMs == m.LastMs && (m.Out || e.Kind != room.AudioExit)) {
				return fmt.Errorf("audio report older than the one kept accepted: %+v (mark %+v)", e, m)
			}
			if m, ok := cur.OnlineMarks()[e.UserID]; ok && im && (e.EventMs < m.LastMs || e.EventMs == m.LastMs && (!m.Out || e.Kind != room.PresenceOnline)) {
				return fmt.Errorf("IM report older than the one kept accepted: %+v (mark %+v)", e, m)
			}
			if e.LeaveAtMs > 0 && (e.Kind != room.AudioExit && e.Kind != room.PresenceOffline || e.EventMs < cur.Members[e.UserID]) {
				return fmt.Errorf("leave deadline on a report that sets none: %+v (joined %d)", e, cur.Members[e.UserID])
			}
			if !cur.IsMember(e.UserID) || e.ReleaseAtMs > 0 && cur.SeatOf(e.UserID) < 0 {
				return fmt.Errorf("audio mark against the rules: %+v", e)
			}
		case room.RoomAudioRemoved:
			u := e.UserID
			seat := cur.SeatOf(u)
			ok := !cur.IsMember(u) || c.AudioKind == room.AudioStart && (seat < 0 || cur.SeatMuted(seat) || cur.SeatLocked(seat))
			if !ok || c.Type != room.CmdAudioPresence {
				return fmt.Errorf("audio removal of someone entitled: %+v", e)
			}
		case room.RoomLiked:
			if c.Type != room.CmdLikeRoom || !s.IsMember(c.UserID) || s.BannedAt(c.UserID, c.NowMs) || e.Count != c.LikeCount ||
				e.Total != cur.Likes()+e.Count || len(e.Users) != 1 || e.Users[0].UserID != c.UserID {
				return fmt.Errorf("like against the rules: %+v by %s (total before %d)", e, c.UserID, cur.Likes())
			}
			if ok, _ := room.LikeRecorded(s, c); ok {
				return fmt.Errorf("a retried like counted again: %+v", c)
			}
			sm.likes += e.Count
		case room.RoomGiftSent:
			if !s.IsMember(e.FromUserID) || !s.IsMember(e.ToUserID) || e.GiftCount <= 0 {
				return fmt.Errorf("gift against the rules: %+v", e)
			}
			sm.giftHeat += e.HeatValue
		}
		cur = room.Apply(cur, e)
	}
	return nil
}

func sameKeys[A, B any](a map[string]A, b map[string]B) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}

// endedInTime: a request expires only at its deadline, and is answered
// (approved, rejected, cancelled, accepted, declined) only before it; the
// other ends (left, closed, seated, seat_removed) come whenever they do.
func endedInTime(outcome string, r room.SeatRequest, nowMs int64) bool {
	switch outcome {
	case room.OutcomeExpired:
		return r.ExpiresAtMs <= nowMs
	case room.OutcomeApproved, room.OutcomeRejected, room.OutcomeCancelled, room.OutcomeAccepted, room.OutcomeDeclined:
		return r.ExpiresAtMs > nowMs
	}
	return true
}

func (sm *sim) invariants(s room.State) error {
	if !s.Exists {
		return fmt.Errorf("a logged command left no room")
	}
	want := sm.seats
	if want == 0 {
		want = room.DefaultMicSeats
	}
	if len(s.Seats) != want {
		return fmt.Errorf("%d seats, want %d", len(s.Seats), want)
	}
	for i, u := range s.Seats {
		if u == "" {
			continue
		}
		if !s.IsMember(u) {
			return fmt.Errorf("seat %d held by non-member %s", i, u)
		}
		if j := s.SeatOf(u); j != i {
			return fmt.Errorf("%s on seats %d and %d", u, j, i)
		}
	}
	for u := range s.Members {
		if _, banned := s.Bans[u]; banned {
			return fmt.Errorf("member %s has a ban entry", u)
		}
	}
	// A ban's note (reason, operator, role) lives exactly as long as the
	// ban, and a mute's imposer as long as the mute.
	bans, _ := room.BansPage(s, 0, room.MembersPage{Size: len(s.Bans) + 1})
	for _, b := range bans {
		if b.OperatorUserId == "" {
			return fmt.Errorf("ban of %s without its operator", b.UserId)
		}
	}
	if n := room.BanNoteCount(s); n != len(s.Bans) {
		return fmt.Errorf("%d ban notes for %d bans", n, len(s.Bans))
	}
	var x room.Extra
	if s.Extra != nil {
		x = *s.Extra
	}
	if !sameKeys(s.Bans, x.BanNotes) || !sameKeys(x.Mutes, x.MuteBy) {
		return fmt.Errorf("bans %v noted %v, mutes %v imposed by %v", s.Bans, x.BanNotes, x.Mutes, x.MuteBy)
	}
	for _, m := range []map[string]room.SeatRequest{s.Applications(), s.Invitations()} {
		for u, r := range m {
			if !s.IsMember(u) || s.SeatOf(u) >= 0 || r.Seat < 0 || r.Seat >= len(s.Seats) {
				return fmt.Errorf("pending seat request of %s (%+v) while a non-member or seated", u, r)
			}
		}
	}
	if pending := len(s.Applications()) + len(s.Invitations()); sm.requests != sm.ended+pending {
		return fmt.Errorf("%d seat requests made, %d ended, %d pending", sm.requests, sm.ended, pending)
	}
	for u, m := range s.AudioMarks() {
		if !s.IsMember(u) || m.ReleaseAtMs > 0 && (s.SeatOf(u) < 0 || !m.Out) {
			return fmt.Errorf("audio mark of %s (%+v) while a non-member or unseated", u, m)
		}
	}
	if s.Likes() != sm.likes {
		return fmt.Errorf("like total %d, likes counted %d", s.Likes(), sm.likes)
	}
	for _, marks := range []map[string]room.AudioMark{s.AudioMarks(), s.OnlineMarks()} {
		for u, m := range marks {
			if !s.IsMember(u) || m.LeaveAtMs > 0 && !m.Out {
				return fmt.Errorf("presence mark of %s (%+v) while a non-member or present", u, m)
			}
		}
	}
	if s.Heat < 0 || s.Heat != sm.giftHeat {
		return fmt.Errorf("heat %d, gifts sent %d", s.Heat, sm.giftHeat)
	}
	if err := sm.ranks.check(s); err != nil {
		return err
	}
	if x := s.Extra; x != nil {
		for _, i := range x.MutedByAll {
			if !x.AllMicsMuted || i >= len(s.Seats) || !s.SeatMuted(i) {
				return fmt.Errorf("seat %d muted by the switch (on %v) but not muted or gone: seats %d, muted %v", i, x.AllMicsMuted, len(s.Seats), s.MutedSeats)
			}
		}
	}
	size := 0
	for k, v := range s.CustomInfo() {
		size += len(k) + len(v)
	}
	if len(s.CustomInfo()) > room.MaxCustomKeys || size > room.MaxCustomInfoLen {
		return fmt.Errorf("custom info of %d keys, %d bytes", len(s.CustomInfo()), size)
	}
	if m := s.Metadata(); !slices.IsSorted(m.Tags) || len(slices.Compact(slices.Clone(m.Tags))) != len(m.Tags) ||
		m.Visibility == room.VisibilityPublic || strings.Contains(m.Category, " ") {
		return fmt.Errorf("metadata %+v", m)
	}
	if slices.Contains(s.Admins, s.Owner) || !slices.IsSorted(s.Admins) || len(s.Admins) > room.MaxAdmins {
		return fmt.Errorf("admins %v (owner %s)", s.Admins, s.Owner)
	}
	for _, seats := range [][]int{s.MutedSeats, s.LockedSeats} {
		if !slices.IsSorted(seats) || len(slices.Compact(slices.Clone(seats))) != len(seats) ||
			slices.ContainsFunc(seats, func(i int) bool { return i < 0 || i >= len(s.Seats) }) {
			return fmt.Errorf("seat list %v of %d seats", seats, len(s.Seats))
		}
	}
	for _, i := range s.LockedSeats {
		if s.Seats[i] != "" {
			return fmt.Errorf("locked seat %d held by %s", i, s.Seats[i])
		}
	}
	if strings.TrimSpace(s.Name) == "" || strings.ContainsRune(s.Name, 0) || strings.ContainsRune(s.Announcement, 0) {
		return fmt.Errorf("name %q announcement %q", s.Name, s.Announcement)
	}
	switch s.Status {
	case room.StatusOpen:
	case room.StatusClosed:
		if s.Members != nil || slices.ContainsFunc(s.Seats, func(u string) bool { return u != "" }) {
			return fmt.Errorf("closed room still has people: %v %v", s.Members, s.Seats)
		}
	default:
		return fmt.Errorf("status %q", s.Status)
	}
	return nil
}

// like makes a LikeRoom: mostly a new like of a valid count, now and then
// a count out of range, or a retry of the last like (the same id and
// count: counted once) or its id with another count (refused).
func (sm *sim) like() room.Command {
	r := sm.lr
	sm.likeN++
	c := &room.Command{CommandID: fmt.Sprintf("l%d", sm.likeN), RequestID: "r", AppCode: tApp, RoomID: tRoom,
		UserID: sm.users[r.IntN(len(sm.users))], NowMs: sm.now}
	c.Type, c.LikeCount = room.CmdLikeRoom, 1+r.Int64N(room.MaxLikeCount)
	switch k := r.IntN(20); {
	case k == 0:
		c.LikeCount = []int64{0, room.MaxLikeCount + 1}[r.IntN(2)]
	case k < 5 && sm.lastLike.Type != "":
		c.CommandID, c.UserID, c.LikeCount = sm.lastLike.CommandID, sm.lastLike.UserID, sm.lastLike.LikeCount
		if k == 1 {
			c.LikeCount = sm.lastLike.LikeCount%room.MaxLikeCount + 1
		}
		return *c
	}
	sm.lastLike = *c
	return *c
}
