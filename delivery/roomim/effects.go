package roomim

import (
	"context"
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
// after it: the room's word enforced at the edges. They run in the
// room's queue, in room order, as part of the event's delivery: the
// outbox row is published only once its message and its effects are
// done, so they are retried, parked and repaired like any event.
//   - RoomUserKicked: the user out of the IM group (an AVChatRoom bans
//     them for what is left of the room's ban; other types remove them),
//     then out of the audio room.
//   - RoomClosed: the audio room dismissed, then the IM group destroyed.
//   - RoomMemberMuted / RoomMemberUnmuted: Tencent's member mute
//     (forbid_send_msg) set for what is left of the room's mute, or lifted.
type effects struct {
	kick  *room.RoomUserKicked
	close bool
	mute  *chatMute
}

// chatMute is a member mute to enforce: until 0 lifts it.
type chatMute struct {
	user    string
	untilMs int64
}

func (f effects) any() bool { return f.kick != nil || f.close || f.mute != nil }

// effectsOf reads an IM event's effects from its envelope.
func effectsOf(env persistence.Envelope) (effects, error) {
	switch env.EventType {
	case room.TypeRoomUserKicked:
		ev, err := room.DecodeEvent(env.EventType, env.Payload)
		if err != nil {
			return effects{}, err
		}
		k := ev.(room.RoomUserKicked)
		return effects{kick: &k}, nil
	case room.TypeRoomClosed:
		return effects{close: true}, nil
	case room.TypeRoomMemberMuted, room.TypeRoomMemberUnmuted:
		ev, err := room.DecodeEvent(env.EventType, env.Payload)
		if err != nil {
			return effects{}, err
		}
		switch e := ev.(type) {
		case room.RoomMemberMuted:
			return effects{mute: &chatMute{user: e.TargetUserID, untilMs: e.MutedUntilMs}}, nil
		case room.RoomMemberUnmuted:
			return effects{mute: &chatMute{user: e.TargetUserID}}, nil
		}
	}
	return effects{}, nil
}

// closes reports whether a batch carries a close.
func closes(batch []*item) bool {
	for _, it := range batch {
		if it.effects.close {
			return true
		}
	}
	return false
}

// Steps of an event's delivery remembered in effectsDone, by event id.
const (
	stepMessage = "/msg"
	stepIM      = "/im"
	stepAudio   = "/audio"
)

// sent records that the events of a batch with effects had their message
// accepted: if an effect then fails, the retry does not send it again.
func (p *Publisher) sent(batch []*item) {
	for _, it := range batch {
		if it.effects.any() {
			p.effectsDone.Add(it.env.EventID + stepMessage)
		}
	}
}

// messageSent: the batch is one event with effects (they always travel
// alone, take) whose message this process already sent (an effect failed
// after it): only the effects are left to do.
func (p *Publisher) messageSent(batch []*item) bool {
	return len(batch) == 1 && batch[0].effects.any() && p.effectsDone.Has(batch[0].env.EventID+stepMessage)
}

// runEffects does an event's effects in order; the first failure stops
// them and is the event's result.
func (p *Publisher) runEffects(it *item, gid string) error {
	fx := it.effects
	switch {
	case fx.kick != nil:
		k := *fx.kick
		if err := p.step(it, gid, stepIM, func(ctx context.Context) error { return p.kickFromGroup(ctx, gid, k) }); err != nil {
			return err
		}
		if p.audio != nil {
			return p.step(it, gid, stepAudio, func(ctx context.Context) error { return p.audio.RemoveUser(ctx, gid, k.TargetUserID) })
		}
	case fx.close:
		if p.audio != nil {
			if err := p.step(it, gid, stepAudio, func(ctx context.Context) error { return p.audio.DismissRoom(ctx, gid) }); err != nil {
				return err
			}
		}
		// Gone already (10010) is success in the client.
		err := p.step(it, gid, stepIM, func(ctx context.Context) error { return p.client.DestroyGroup(ctx, gid) })
		if err == nil {
			p.known.Remove(gid)
		}
		return err
	case fx.mute != nil:
		m := *fx.mute
		return p.step(it, gid, stepIM, func(ctx context.Context) error { return p.muteInGroup(ctx, gid, m) })
	}
	return nil
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

// step runs one effect unless this process already did it for the event.
func (p *Publisher) step(it *item, gid, name string, do func(context.Context) error) error {
	key := it.env.EventID + name
	if p.effectsDone.Has(key) {
		return nil
	}
	if err := do(it.ctx); err != nil {
		p.log.Info("room effect failed; the event stays pending", "group_id", gid, "event_id", it.env.EventID,
			"event_type", it.env.EventType, "step", name[1:], "error", err)
		return err
	}
	p.effectsDone.Add(key)
	p.log.Debug("room effect done", slog.String("group_id", gid), slog.String("event_id", it.env.EventID), slog.String("step", name[1:]))
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
func (p *Publisher) kickFromGroup(ctx context.Context, gid string, k room.RoomUserKicked) error {
	var err error
	if p.groupType == "AVChatRoom" {
		left := (k.BanUntilMs - p.now().UnixMilli() + 999) / 1000
		if k.BanUntilMs <= 0 || left <= 0 {
			return nil
		}
		err = p.client.BanGroupMember(ctx, gid, []string{k.TargetUserID}, left, k.Reason)
	} else {
		err = p.client.DeleteGroupMember(ctx, gid, []string{k.TargetUserID}, k.Reason)
	}
	if tencentim.CodeOf(err) == 10010 {
		return nil
	}
	return err
}
