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
//
// Nobody undoes what they could not do: a ban or mute in force records
// who imposed it and with what authority (Imposer), and only someone with
// at least that authority lifts, shortens or replaces it. The owner
// outranks every admin, so an owner's ban or mute is the owner's alone
// (whoever owns the room then: a transfer hands it on with the room).
//
// The lists are bounded: MaxBans bans and MaxMutes mutes in force. Ended
// entries are not counted; they go at the next ban, mute or join (the
// events carry their time), and lifting an ended one clears it.
const (
	MaxMuteSeconds = 30 * 24 * 3600
	MaxMutes       = 1000 // chat mutes in force per room
	// MaxBans caps the bans in force per room (BanUser and KickUser with a
	// ban alike). A room at both caps with ids of MaxIDLen has a snapshot
	// under 4 MiB (TestSnapshotAtTheCaps).
	MaxBans = 5000
	// MaxBanTargets bounds one BanUser call: its events are one command's,
	// written in one append.
	MaxBanTargets = 20
)

// The authority an imposer acted with.
const (
	RoleOwner = "owner"
	RoleAdmin = "admin"
)

// Imposer is who imposed a chat mute, and as what (a ban's is its
// BanNote).
type Imposer struct {
	OperatorUserID string `json:"operator_user_id"`
	Role           string `json:"role,omitempty"`
}

// roleOf is the authority op acts with in s. It is read when the event
// is applied, on the state the command was decided on (no event of a
// moderation command changes the owner), so replay records the same.
func roleOf(s *State, op string) string {
	if op == s.Owner {
		return RoleOwner
	}
	return RoleAdmin
}

// mayChange: op may lift or change an entry in force until untilMs
// imposed with role: one the owner imposed is the owner's alone. An
// ended entry undoes nothing and any operator clears it.
func mayChange(s State, op string, untilMs int64, role string, nowMs int64) error {
	if untilMs > nowMs && role == RoleOwner && op != s.Owner {
		return ErrOutranked
	}
	return nil
}

// mayChangeBan and mayChangeMute are mayChange on target's ban or mute.
func mayChangeBan(s State, op, target string, nowMs int64) error {
	return mayChange(s, op, s.Bans[target], s.x().BanNotes[target].Role, nowMs)
}

func mayChangeMute(s State, op, target string, nowMs int64) error {
	return mayChange(s, op, s.x().Mutes[target], s.x().MuteBy[target].Role, nowMs)
}

// inForce counts the entries of until not over at nowMs.
func inForce(until map[string]int64, nowMs int64) int {
	n := 0
	for _, end := range until {
		if end > nowMs {
			n++
		}
	}
	return n
}

// roomForBans: new bans need places under MaxBans; a ban of the banned
// replaces theirs.
func roomForBans(s State, targets []string, nowMs int64) error {
	fresh := 0
	for _, u := range targets {
		if !s.BannedAt(u, nowMs) {
			fresh++
		}
	}
	if fresh > 0 && inForce(s.Bans, nowMs)+fresh > MaxBans {
		return ErrTooManyBans
	}
	return nil
}

// adminLoss: an admin the owner kicks or bans is no admin any more, so a
// kicked admin does not come back with an admin's rights (and a banned one
// does not stay on the list).
func adminLoss(s State, cmd Command) []Event {
	if !slices.Contains(s.Admins, cmd.TargetUserID) {
		return nil
	}
	return []Event{RoomAdminRemoved{TargetUserID: cmd.TargetUserID, OperatorUserID: cmd.UserID}}
}

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
// A ban in force is replaced only by someone who could lift it, and the
// new bans need their places under MaxBans.
func decideBan(s State, cmd Command) ([]Event, error) {
	var evs []Event
	until := cmd.NowMs + cmd.BanSeconds*1000
	targets := banTargets(cmd)
	for _, target := range targets {
		c := cmd
		c.TargetUserID, c.TargetUserIDs = target, nil
		if err := moderate(s, c); err != nil {
			return nil, err
		}
		if err := mayChangeBan(s, cmd.UserID, target, cmd.NowMs); err != nil {
			return nil, err
		}
	}
	if err := roomForBans(s, targets, cmd.NowMs); err != nil {
		return nil, err
	}
	for _, target := range targets {
		c := cmd
		c.TargetUserID, c.TargetUserIDs = target, nil
		if s.IsMember(target) {
			kicked, err := decideKick(s, c)
			if err != nil {
				return nil, err
			}
			evs = append(evs, kicked...)
			continue
		}
		evs = append(evs, adminLoss(s, c)...)
		evs = append(evs, RoomUserBanned{TargetUserID: target, OperatorUserID: cmd.UserID, Reason: cmd.Reason, BanUntilMs: until, AtMs: cmd.NowMs})
	}
	return evs, nil
}

// decideUnban lifts target's ban, or clears an ended one; no ban at all
// is a no-op.
func decideUnban(s State, cmd Command) ([]Event, error) {
	if err := moderate(s, cmd); err != nil {
		return nil, err
	}
	if _, ok := s.Bans[cmd.TargetUserID]; !ok {
		return nil, nil
	}
	if err := mayChangeBan(s, cmd.UserID, cmd.TargetUserID, cmd.NowMs); err != nil {
		return nil, err
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
// does not end it. A new mute replaces the old one's end (only for
// someone who could lift the old one).
func decideMuteMember(s State, cmd Command) ([]Event, error) {
	if err := moderate(s, cmd); err != nil {
		return nil, err
	}
	if !s.IsMember(cmd.TargetUserID) {
		return nil, ErrNotMember
	}
	if err := mayChangeMute(s, cmd.UserID, cmd.TargetUserID, cmd.NowMs); err != nil {
		return nil, err
	}
	if !s.MutedAt(cmd.TargetUserID, cmd.NowMs) && inForce(s.x().Mutes, cmd.NowMs) >= MaxMutes {
		return nil, ErrTooManyMutes
	}
	return []Event{RoomMemberMuted{TargetUserID: cmd.TargetUserID, OperatorUserID: cmd.UserID, MutedUntilMs: cmd.NowMs + cmd.MuteSeconds*1000, AtMs: cmd.NowMs}}, nil
}

// decideUnmuteMember lifts target's chat mute, or clears an ended one
// (which frees nothing but the entry); no mute at all is a no-op.
func decideUnmuteMember(s State, cmd Command) ([]Event, error) {
	if err := moderate(s, cmd); err != nil {
		return nil, err
	}
	if _, ok := s.x().Mutes[cmd.TargetUserID]; !ok {
		return nil, nil
	}
	if err := mayChangeMute(s, cmd.UserID, cmd.TargetUserID, cmd.NowMs); err != nil {
		return nil, err
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
	// Bans over by now go, as on a join: the list holds bans in force.
	s.dropBans(func(_ string, until int64) bool { return until <= e.AtMs })
	s.setBan(e.TargetUserID, e.BanUntilMs, e.OperatorUserID, e.Reason)
}

// BanNote is who banned a user, with what authority (Role: RoleOwner or
// RoleAdmin; "" for a ban noted before roles were, an admin's) and why,
// kept beside the ban (State.Bans) while it is in force; ListBans shows
// it.
type BanNote struct {
	Reason         string `json:"reason,omitempty"`
	OperatorUserID string `json:"operator_user_id"`
	Role           string `json:"role,omitempty"`
}

// setBan bans user until untilMs, noting who did it, as what, and why.
func (s *State) setBan(user string, untilMs int64, operator, reason string) {
	note := BanNote{Reason: reason, OperatorUserID: operator, Role: roleOf(s, operator)}
	if s.Bans == nil {
		s.Bans = map[string]int64{}
	}
	s.Bans[user] = untilMs
	x := s.mx()
	if x.BanNotes == nil {
		x.BanNotes = map[string]BanNote{}
	}
	x.BanNotes[user] = note
}

// dropBans deletes the bans drop picks, with their notes: every way a ban
// goes (lifted, over, ended by a join) passes here, so the notes follow
// State.Bans.
func (s *State) dropBans(drop func(user string, untilMs int64) bool) {
	maps.DeleteFunc(s.Bans, func(u string, until int64) bool {
		if !drop(u, until) {
			return false
		}
		if s.Extra != nil {
			delete(s.Extra.BanNotes, u)
		}
		return true
	})
}

// dropMutes deletes the mutes drop picks, with their imposers.
func (x *Extra) dropMutes(drop func(user string, untilMs int64) bool) {
	maps.DeleteFunc(x.Mutes, func(u string, until int64) bool {
		if !drop(u, until) {
			return false
		}
		delete(x.MuteBy, u)
		return true
	})
}

type RoomUserUnbanned struct {
	TargetUserID   string `json:"target_user_id"`
	OperatorUserID string `json:"operator_user_id"`
}

func (RoomUserUnbanned) EventType() string { return TypeRoomUserUnbanned }
func (e RoomUserUnbanned) apply(s *State) {
	s.dropBans(func(u string, _ int64) bool { return u == e.TargetUserID })
}

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
	by := Imposer{OperatorUserID: e.OperatorUserID, Role: roleOf(s, e.OperatorUserID)}
	x := s.mx()
	if x.Mutes == nil {
		x.Mutes = map[string]int64{}
	}
	if x.MuteBy == nil {
		x.MuteBy = map[string]Imposer{}
	}
	x.dropMutes(func(_ string, until int64) bool { return until <= e.AtMs })
	x.Mutes[e.TargetUserID] = e.MutedUntilMs
	x.MuteBy[e.TargetUserID] = by
}

type RoomMemberUnmuted struct {
	TargetUserID   string `json:"target_user_id"`
	OperatorUserID string `json:"operator_user_id"`
}

func (RoomMemberUnmuted) EventType() string { return TypeRoomMemberUnmuted }
func (e RoomMemberUnmuted) apply(s *State) {
	if s.Extra != nil {
		s.Extra.dropMutes(func(u string, _ int64) bool { return u == e.TargetUserID })
	}
}
