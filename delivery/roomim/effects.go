package roomim

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/hyapp/roomcell/delivery/tencentim"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/room"
)

// Audio is the rooms' audio side (Tencent TRTC): what a kick and a close
// do there. audioRoomID is the room's audio room, the same id as its IM
// group (GroupID); delivery/trtc implements it. Both calls must be
// idempotent (a user not in the room is removed, a room that is gone is
// dismissed) and must honour ctx; an error that retrying cannot fix
// implements Permanent() bool, so the outbox parks the event.
type Audio interface {
	RemoveUser(ctx context.Context, audioRoomID, userID string) error
	DismissRoom(ctx context.Context, audioRoomID string) error
}

// WithAudio makes kicks and closes reach the rooms' audio (TRTC) too.
func WithAudio(a Audio) Option { return func(p *Publisher) { p.audio = a } }

// WithClock replaces time.Now: what is left of a ban is counted from it.
func WithClock(now func() time.Time) Option { return func(p *Publisher) { p.now = now } }

// effects is what an event does at Tencent besides its group message,
// after it: the room's word enforced at the edges, as the event's row in
// the registry says (room.EventInfo.Effects; room/effects.go names each
// kind: a kick's removal from the group and the audio room, a ban's and
// an unban's AVChatRoom ban, a member mute, a close's dismissal and
// destruction, the audio removal of a user whose rights shrank). They run
// in the room's queue, in room order, as part of the event's delivery:
// the outbox row is published only once its message and its effects are
// done, so they are retried, parked and repaired like any event. Their
// order (runEffects): the IM side first (the user out of the group,
// banned or muted), then the audio side, except that a group's audio room
// is dismissed before the group is destroyed.
type effects struct {
	causes room.Effect // the row's effects done here (doneHere)
	target room.Target // whom a targeted effect (or a revocation) acts on
}

func (f effects) any() bool { return f.causes != 0 }

// chatMute is a member mute to enforce: until 0 lifts it.
type chatMute struct {
	user    string
	untilMs int64
}

// chatBan is an IM group ban to set (untilMs > 0) or lift (0).
type chatBan struct {
	user    string
	untilMs int64
	reason  string
}

// WithTicketEnforcement removes users whose rights shrank from the audio
// room (trtc.enforce_tickets: TRTC's advanced permission control is on,
// and the room's tickets are the only way in): the rows' TRTCRevoke.
func WithTicketEnforcement() Option { return func(p *Publisher) { p.enforceTickets = true } }

// doneHere are the effects at Tencent this publisher does (runEffects).
// A row with another (a kind added to room/effects.go without its step
// here) is refused rather than published without it.
const doneHere = room.IMRemove | room.IMBan | room.IMUnban | room.IMMute | room.IMDestroy |
	room.TRTCRemove | room.TRTCRevoke | room.TRTCDismiss

// effectsOf reads an IM event's effects from its row, and their target
// from its envelope; without enforce a revocation (TRTCRevoke) is not
// done, with it only when room.AudioRevoked names a user.
func effectsOf(env persistence.Envelope, enforce bool) (effects, error) {
	info, _ := room.EventInfoOf(env.EventType)
	fx := effects{causes: info.Effects & (room.IMSide | room.AudioSide)}
	if missing := fx.causes &^ doneHere; missing != 0 {
		return effects{}, fmt.Errorf("%s causes %s, which this publisher does not do", env.EventType, missing)
	}
	if !enforce {
		fx.causes &^= room.TRTCRevoke
	}
	if fx.causes&(room.Targeted|room.TRTCRevoke) == 0 {
		return fx, nil
	}
	ev, err := room.DecodeEvent(env.EventType, env.Payload)
	if err != nil {
		return effects{}, err
	}
	if fx.causes.Has(room.TRTCRevoke) {
		u, ok := room.AudioRevoked(ev)
		if !ok {
			fx.causes &^= room.TRTCRevoke
		}
		fx.target.UserID = u
	}
	if fx.causes&room.Targeted != 0 {
		t, ok := room.TargetOf(ev)
		if !ok || t.UserID == "" {
			return effects{}, fmt.Errorf("%s has targeted effects (%s) but names no target", env.EventType, fx.causes&room.Targeted)
		}
		fx.target = t
	}
	return fx, nil
}

// closes reports whether a batch carries a close.
func closes(batch []*item) bool {
	for _, it := range batch {
		if it.effects.causes.Has(room.IMDestroy) {
			return true
		}
	}
	return false
}

// EffectSteps is where the effect steps an event finished are kept: the
// store of its outbox row (persistence.OutboxStore has both methods). A
// retry of the row, by any process, reads them and skips those steps.
type EffectSteps interface {
	GetOutbox(ctx context.Context, eventID string) (persistence.OutboxRow, error)
	MarkOutboxEffectsDone(ctx context.Context, eventID string, steps uint32) error
}

// WithEffectSteps keeps the steps of an event with effects (its message,
// then each effect) in its outbox row as they finish (EffectsDone), so a
// retry in another process, after this one died or the row's lease moved,
// does not do them again: above all it does not send the message again
// once Tencent's dedupe window (5 minutes for group messages) is over.
// stepsOf returns the store of a room's outbox rows (nil: none); timeout
// bounds each call (default 2s). A read or record that fails only means
// a step may be done again: every step is idempotent at Tencent.
func WithEffectSteps(stepsOf func(persistence.RoomKey) EffectSteps, timeout time.Duration) Option {
	return func(p *Publisher) {
		p.stepsOf = stepsOf
		if timeout > 0 {
			p.stepsTimeout = timeout
		}
	}
}

// defaultStepsTimeout bounds a call to the EffectSteps store.
const defaultStepsTimeout = 2 * time.Second

// The steps of an event's delivery, as bits of its outbox row's
// EffectsDone. Stored values: a bit never changes meaning.
const (
	stepMessage uint32 = 1 << iota // the event's group message was accepted
	stepIM                         // its IM effect: ban, removal, mute, destroy
	stepAudio                      // its audio (TRTC) effect: removal, dismissal
)

// stepName names a step in logs and in this process's memory of steps
// done (effectsDone, by event id and name).
func stepName(step uint32) string {
	switch step {
	case stepMessage:
		return "msg"
	case stepIM:
		return "im"
	default:
		return "audio"
	}
}

// stepsStore is the store of the event's row, or nil.
func (p *Publisher) stepsStore(it *item) EffectSteps {
	if p.stepsOf == nil {
		return nil
	}
	return p.stepsOf(persistence.RoomKey{AppCode: it.env.AppCode, RoomID: it.env.RoomID})
}

// loadSteps reads the steps an event's row records as done (a retry:
// another process, or this one before, did them). A row that cannot be
// read leaves what this process remembers.
func (p *Publisher) loadSteps(it *item) {
	st := p.stepsStore(it)
	if st == nil {
		return
	}
	ctx, cancel := context.WithTimeout(it.ctx, p.stepsTimeout)
	defer cancel()
	row, err := st.GetOutbox(ctx, it.env.EventID)
	if err != nil {
		p.log.Info("room effect steps not read; steps done before may be done again", "event_id", it.env.EventID,
			"event_type", it.env.EventType, "error", err)
		return
	}
	it.stepsDone |= row.EffectsDone
}

// stepDone reports whether the event's step is done: recorded in its row
// or remembered by this process.
func (p *Publisher) stepDone(it *item, step uint32) bool {
	return it.stepsDone&step != 0 || p.effectsDone.Has(it.env.EventID+"/"+stepName(step))
}

// record notes a finished step in this process's memory and in the
// event's row. The record gets its own deadline, even when the event's
// caller has stopped waiting: the step is done whatever the caller hears.
func (p *Publisher) record(it *item, step uint32) {
	it.stepsDone |= step
	p.effectsDone.Add(it.env.EventID + "/" + stepName(step))
	st := p.stepsStore(it)
	if st == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(it.ctx), p.stepsTimeout)
	defer cancel()
	if err := st.MarkOutboxEffectsDone(ctx, it.env.EventID, step); err != nil {
		p.log.Info("room effect step not recorded; a retry elsewhere may do it again", "event_id", it.env.EventID,
			"event_type", it.env.EventType, "step", stepName(step), "error", err)
	}
}

// sent records that the events of a batch with effects had their message
// accepted: if an effect then fails, the retry does not send it again.
func (p *Publisher) sent(batch []*item) {
	for _, it := range batch {
		if it.effects.any() {
			p.record(it, stepMessage)
		}
	}
}

// messageSent: the batch is one event with effects (they always travel
// alone, take) whose message was already sent (an effect failed after
// it, here or in another process): only the effects are left to do.
func (p *Publisher) messageSent(batch []*item) bool {
	return len(batch) == 1 && batch[0].effects.any() && p.stepDone(batch[0], stepMessage)
}

// runEffects does an event's effects in order; the first failure stops
// them and is the event's result. A row has at most one effect of each
// side (room.IMSide, room.AudioSide: one recorded step each).
func (p *Publisher) runEffects(it *item, gid string) error {
	fx, t := it.effects.causes, it.effects.target
	if fx.Has(room.TRTCDismiss) && p.audio != nil {
		if err := p.step(it, gid, stepAudio, func(ctx context.Context) error { return p.audio.DismissRoom(ctx, gid) }); err != nil {
			return err
		}
	}
	var im func(context.Context) error
	switch {
	case fx.Has(room.IMRemove):
		im = func(ctx context.Context) error { return p.kickFromGroup(ctx, gid, t) }
	case fx.Has(room.IMBan):
		im = func(ctx context.Context) error {
			return p.banInGroup(ctx, gid, chatBan{user: t.UserID, untilMs: t.UntilMs, reason: t.Reason})
		}
	case fx.Has(room.IMUnban):
		im = func(ctx context.Context) error { return p.banInGroup(ctx, gid, chatBan{user: t.UserID}) }
	case fx.Has(room.IMMute):
		im = func(ctx context.Context) error {
			return p.muteInGroup(ctx, gid, chatMute{user: t.UserID, untilMs: t.UntilMs})
		}
	case fx.Has(room.IMDestroy):
		// Gone already (10010) is success in the client.
		im = func(ctx context.Context) error { return p.client.DestroyGroup(ctx, gid) }
	}
	if im != nil {
		if err := p.step(it, gid, stepIM, im); err != nil {
			return err
		}
		if fx.Has(room.IMDestroy) {
			p.known.Remove(gid)
		}
	}
	if fx&(room.TRTCRemove|room.TRTCRevoke) != 0 && p.audio != nil {
		return p.step(it, gid, stepAudio, func(ctx context.Context) error { return p.audio.RemoveUser(ctx, gid, t.UserID) })
	}
	return nil
}

// banInGroup sets a room ban in an AVChatRoom for what is left of it
// (from now, as kickFromGroup does), or lifts it (untilMs 0). Only an
// AVChatRoom takes anyone from the client; the other types have member
// lists the room's kicks and joins keep. A ban already over, or a group
// that is gone, has nothing to enforce.
func (p *Publisher) banInGroup(ctx context.Context, gid string, b chatBan) error {
	if p.groupType != "AVChatRoom" {
		return nil
	}
	var err error
	if b.untilMs == 0 {
		err = p.client.UnbanGroupMember(ctx, gid, []string{b.user})
	} else {
		left := (b.untilMs - p.now().UnixMilli() + 999) / 1000
		if left <= 0 {
			return nil
		}
		err = p.client.BanGroupMember(ctx, gid, []string{b.user}, left, b.reason)
	}
	if tencentim.CodeOf(err) == 10010 {
		return nil
	}
	return err
}

// muteInGroup sets a member's IM mute to what is left of the room's (from
// now, so a retry after an outage ends it when the room's mute ends), or
// lifts it; a mute already over lifts it too. A group that is gone has
// nobody left to mute.
func (p *Publisher) muteInGroup(ctx context.Context, gid string, m chatMute) error {
	var left int64
	if m.untilMs > 0 {
		left = max(0, (m.untilMs-p.now().UnixMilli()+999)/1000)
	}
	err := p.client.ForbidSendMsg(ctx, gid, []string{m.user}, left)
	if tencentim.CodeOf(err) == 10010 {
		return nil
	}
	return err
}

// step runs one effect unless it is done for the event already.
func (p *Publisher) step(it *item, gid string, step uint32, do func(context.Context) error) error {
	if p.stepDone(it, step) {
		return nil
	}
	if err := do(it.ctx); err != nil {
		p.log.Info("room effect failed; the event stays pending", "group_id", gid, "event_id", it.env.EventID,
			"event_type", it.env.EventType, "step", stepName(step), "error", err)
		return err
	}
	p.record(it, step)
	p.log.Debug("room effect done", slog.String("group_id", gid), slog.String("event_id", it.env.EventID), slog.String("step", stepName(step)))
	return nil
}

// kickFromGroup takes a kicked user out of the room's IM group.
//
// An AVChatRoom refuses delete_group_member (10004): anyone may enter it
// through the client SDK, it has no member list to remove from. Its
// enforcement is Tencent's member ban: for the seconds left of the
// room's ban (counted from now, so a retry after an outage ends it when
// the room's ban ends, not later), the user is out of the group, gets
// none of its messages and cannot enter again. A kick without a ban (or
// whose ban is over) has nothing to enforce there: the user may rejoin
// the room at once, and an AVChatRoom takes anyone; the kicked client
// leaves the group on the RoomUserKicked message it was sent just
// before (the ban comes after the message, so the user gets it).
//
// Other group types keep a member list: the user is removed (a
// non-member is success at Tencent).
//
// A group that is gone (10010: the room was closed meanwhile) has nobody
// left to remove.
func (p *Publisher) kickFromGroup(ctx context.Context, gid string, t room.Target) error {
	var err error
	if p.groupType == "AVChatRoom" {
		left := (t.UntilMs - p.now().UnixMilli() + 999) / 1000
		if t.UntilMs <= 0 || left <= 0 {
			return nil
		}
		err = p.client.BanGroupMember(ctx, gid, []string{t.UserID}, left, t.Reason)
	} else {
		err = p.client.DeleteGroupMember(ctx, gid, []string{t.UserID}, t.Reason)
	}
	if tencentim.CodeOf(err) == 10010 {
		return nil
	}
	return err
}
