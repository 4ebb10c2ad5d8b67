package room

import (
	"fmt"
	"maps"
	"slices"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/errclass"
)

// Moderation without a kick: a ban of a user who need not be in the
// room, its lifting, and a chat mute of a member for a while.
const (
	MaxMuteSeconds = 30 * 24 * 3600
	MaxMutes       = 1000 // muted users per room
	// MaxBanTargets bounds one BanUser call: its events are one command's,
	// written in one append.
	MaxBanTargets = 20
)

// banTargets is who a BanUser names: target_user_id first, then
// target_user_ids, each once, in the order given.
func banTargets(cmd Command) []string {
	out := make([]string, 0, 1+len(cmd.TargetUserIDs))
	if cmd.TargetUserID != "" {
		out = append(out, cmd.TargetUserID)
	}
	for _, u := range cmd.TargetUserIDs {
		if !slices.Contains(out, u) {
			out = append(out, u)
		}
	}
	return out
}

func checkBan(cmd Command) error {
	n := len(cmd.TargetUserIDs)
	if cmd.TargetUserID != "" || n == 0 {
		n++
	}
	if n > MaxBanTargets {
		return errclass.Invalidf("at most %d targets (target_user_id and target_user_ids), got %d", MaxBanTargets, n)
	}
	for i, u := range cmd.TargetUserIDs {
		field := fmt.Sprintf("target_user_ids[%d]", i)
		if err := checkID(field, u); err != nil {
			return err
		}
		if u == cmd.UserID {
			return errclass.Invalidf("%s must differ from user_id", field)
		}
	}
	// The rest are a kick's checks (target_user_id may be empty in a batch).
	c := cmd
	if c.TargetUserID == "" && len(c.TargetUserIDs) > 0 {
		c.TargetUserID = c.TargetUserIDs[0]
	}
	if err := checkKick(c); err != nil {
		return err
	}
	if cmd.BanSeconds == 0 {
		return errclass.Invalidf("ban_seconds must be between 1 and %d, got 0", MaxBanSeconds)
	}
	return nil
}

// moderate is who may act on target: an operator; only the owner acts on
// an admin; nobody on the owner (as for kicks).
func moderate(s State, cmd Command) error {
	if err := checkOperator(s, cmd.UserID); err != nil {
		return err
	}
	if cmd.TargetUserID == s.Owner {
		return ErrKickOwner
	}
	if cmd.UserID != s.Owner && s.IsAdmin(cmd.TargetUserID) {
		return ErrKickAdmin
	}
	return nil
}

// decideBan bans each target until now + ban_seconds. A member is taken
// out as by a kick with that ban (no banned user stays a member after the
// ban's seq); anyone else is banned as they are, so they cannot join. The
// targets are distinct, so each one's events read the state before the
// call and do not touch another's; one target refused refuses them all.
func decideBan(s State, cmd Command) ([]Event, error) {
	var evs []Event
	until := cmd.NowMs + cmd.BanSeconds*1000
	for _, target := range banTargets(cmd) {
		c := cmd
		c.TargetUserID, c.TargetUserIDs = target, nil
		if err := moderate(s, c); err != nil {
			return nil, err
		}
		if s.IsMember(target) {
			kicked, err := decideKick(s, c)
			if err != nil {
				return nil, err
			}
			evs = append(evs, kicked...)
			continue
		}
		evs = append(evs, RoomUserBanned{TargetUserID: target, OperatorUserID: cmd.UserID, Reason: cmd.Reason, BanUntilMs: until, AtMs: cmd.NowMs})
	}
	return evs, nil
}

// decideUnban lifts target's ban; no ban in force is a no-op.
func decideUnban(s State, cmd Command) ([]Event, error) {
	if err := checkOperator(s, cmd.UserID); err != nil {
		return nil, err
	}
	if !s.BannedAt(cmd.TargetUserID, cmd.NowMs) {
		return nil, nil
	}
	return []Event{RoomUserUnbanned{TargetUserID: cmd.TargetUserID, OperatorUserID: cmd.UserID}}, nil
}

func checkMute(cmd Command) error {
	if err := checkTarget(cmd); err != nil {
		return err
	}
	if cmd.TargetUserID == cmd.UserID {
		return errclass.Invalidf("target_user_id must differ from user_id")
	}
	if cmd.MuteSeconds < 1 || cmd.MuteSeconds > MaxMuteSeconds {
		return errclass.Invalidf("mute_seconds must be between 1 and %d, got %d", MaxMuteSeconds, cmd.MuteSeconds)
	}
	return nil
}

// decideMuteMember: the target may not send chat messages until the end.
// The mute is the room's, not the membership's: leaving and joining again
// does not end it. A new mute replaces the old one's end.
func decideMuteMember(s State, cmd Command) ([]Event, error) {
	if err := moderate(s, cmd); err != nil {
		return nil, err
	}
	if !s.IsMember(cmd.TargetUserID) {
		return nil, ErrNotMember
	}
	if _, ok := s.x().Mutes[cmd.TargetUserID]; !ok && len(s.x().Mutes) >= MaxMutes {
		return nil, ErrTooManyMutes
	}
	return []Event{RoomMemberMuted{TargetUserID: cmd.TargetUserID, OperatorUserID: cmd.UserID, MutedUntilMs: cmd.NowMs + cmd.MuteSeconds*1000, AtMs: cmd.NowMs}}, nil
}

func decideUnmuteMember(s State, cmd Command) ([]Event, error) {
	if err := checkOperator(s, cmd.UserID); err != nil {
		return nil, err
	}
	if !s.MutedAt(cmd.TargetUserID, cmd.NowMs) {
		return nil, nil
	}
	return []Event{RoomMemberUnmuted{TargetUserID: cmd.TargetUserID, OperatorUserID: cmd.UserID}}, nil
}

// MutedAt reports whether user's chat is muted at nowMs.
func (s State) MutedAt(user string, nowMs int64) bool {
	until, ok := s.x().Mutes[user]
	return ok && until > nowMs
}

// BansPage lists the bans in force at nowMs by user id, up to p.Size after
// p.After, with the next page's token ("" after the last).
func BansPage(s State, nowMs int64, p MembersPage) (bans []*v1.BanEntry, next string) {
	users := slices.Sorted(maps.Keys(s.Bans))
	users = slices.DeleteFunc(users, func(u string) bool { return !s.BannedAt(u, nowMs) || u <= p.After && p.After != "" })
	for i, u := range users {
		if i == p.Size {
			return bans, MembersToken(users[i-1])
		}
		note := s.x().BanNotes[u]
		bans = append(bans, &v1.BanEntry{UserId: u, BannedUntilMs: s.Bans[u], Reason: note.Reason, OperatorUserId: note.OperatorUserID})
	}
	return bans, ""
}

// RoomUserBanned: TargetUserID, not in the room, may not join until
// BanUntilMs. A member is banned with RoomUserKicked instead.
type RoomUserBanned struct {
	TargetUserID   string `json:"target_user_id"`
	OperatorUserID string `json:"operator_user_id"`
	Reason         string `json:"reason"`
	BanUntilMs     int64  `json:"ban_until_ms"`
	AtMs           int64  `json:"at_ms"`
}

func (RoomUserBanned) EventType() string { return TypeRoomUserBanned }
func (e RoomUserBanned) apply(s *State) {
	if s.Bans == nil {
		s.Bans = map[string]int64{}
	}
	// Bans over by now go, as on a join: the list holds bans in force.
	maps.DeleteFunc(s.Bans, func(_ string, until int64) bool { return until <= e.AtMs })
	s.Bans[e.TargetUserID] = e.BanUntilMs
	s.noteBan(e.TargetUserID, e.OperatorUserID, e.Reason)
}

// BanNote is who banned a user and why, kept beside the ban (State.Bans)
// while it is in force; ListBans shows it.
type BanNote struct {
	Reason         string `json:"reason,omitempty"`
	OperatorUserID string `json:"operator_user_id"`
}

func (s *State) noteBan(user, operator, reason string) {
	x := s.mx()
	if x.BanNotes == nil {
		x.BanNotes = map[string]BanNote{}
	}
	x.BanNotes[user] = BanNote{Reason: reason, OperatorUserID: operator}
}

// pruneBanNotes drops the notes of bans that are gone (lifted, over, or
// ended by a join), wherever they went: the notes follow State.Bans.
func (s *State) pruneBanNotes() {
	if s.Extra == nil || len(s.Extra.BanNotes) == 0 {
		return
	}
	maps.DeleteFunc(s.Extra.BanNotes, func(u string, _ BanNote) bool {
		_, ok := s.Bans[u]
		return !ok
	})
}

type RoomUserUnbanned struct {
	TargetUserID   string `json:"target_user_id"`
	OperatorUserID string `json:"operator_user_id"`
}

func (RoomUserUnbanned) EventType() string { return TypeRoomUserUnbanned }
func (e RoomUserUnbanned) apply(s *State)  { delete(s.Bans, e.TargetUserID) }

// RoomMemberMuted: TargetUserID may not send chat messages until
// MutedUntilMs. IM enforces it with the group's member mute.
type RoomMemberMuted struct {
	TargetUserID   string `json:"target_user_id"`
	OperatorUserID string `json:"operator_user_id"`
	MutedUntilMs   int64  `json:"muted_until_ms"`
	AtMs           int64  `json:"at_ms"`
}

func (RoomMemberMuted) EventType() string { return TypeRoomMemberMuted }
func (e RoomMemberMuted) apply(s *State) {
	x := s.mx()
	if x.Mutes == nil {
		x.Mutes = map[string]int64{}
	}
	maps.DeleteFunc(x.Mutes, func(_ string, until int64) bool { return until <= e.AtMs })
	x.Mutes[e.TargetUserID] = e.MutedUntilMs
}

type RoomMemberUnmuted struct {
	TargetUserID   string `json:"target_user_id"`
	OperatorUserID string `json:"operator_user_id"`
}

func (RoomMemberUnmuted) EventType() string { return TypeRoomMemberUnmuted }
func (e RoomMemberUnmuted) apply(s *State) {
	if s.Extra != nil {
		delete(s.Extra.Mutes, e.TargetUserID)
	}
}
