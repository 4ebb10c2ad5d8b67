package room

import (
	"maps"
	"slices"

	"github.com/hyapp/roomcell/errclass"
)

// Audio presence: what Tencent's audio side (TRTC) reports about the
// room's audio room reaches the room as the room's own command
// AudioPresence (sent by the callback endpoint, never by a client), under
// a command id derived from the report's identity, so a retried or
// duplicated report is one command.
//
// The room keeps, per member, the newest enter/exit it accepted (its
// event time) and, for a seated member who left the audio room, when the
// seat is released if they do not come back (a grace). An enter or exit
// older than the one kept is ignored: Tencent retries for a minute and
// does not keep order, and a late exit must not undo a newer enter. The
// grace's deadline is counted from the exit's event time, so a late
// report gives the same result as a punctual one; the room commits the
// release itself when the deadline passes (decideExpireSeatRequests, the
// room's deadline command, run by the same timer as seat requests).
//
// Removals (an enter by a user who is not a member or is banned, audio
// started without a seat or on a muted or locked seat) are decided on
// the room's current state, which is what matters whenever the report
// arrives: they need no order.
//
// The same command carries IM's State.StateChange (online: Login;
// offline: Logout, Disconnect), kept per member apart from the audio
// marks and ordered the same way. When the sender's side is the node's
// presence source (presence.source) an exit or offline report carries
// LeaveAfterMs (presence.stale_after): the member leaves the room that
// long after the event, unless a newer enter (online) comes first, by
// the same deadline command, with the heartbeat stale worker's reason
// (heartbeat_timeout) and events. A report older than the member's join
// sets no such deadline: it is about an earlier stay.
const CmdAudioPresence = "AudioPresence"

// Audio presence kinds (TRTC event types 103, 104, 203, 102).
const (
	AudioEnter   = "enter"
	AudioExit    = "exit"
	AudioStart   = "start_audio"
	AudioDismiss = "dismiss"
	// IM State.StateChange: Login; Logout or Disconnect.
	PresenceOnline  = "online"
	PresenceOffline = "offline"
)

// ReasonAudioLeft releases the seat of a member who left the audio room
// and did not come back within the grace.
const ReasonAudioLeft = "audio_left"

// Why a user is removed from the audio room (RoomAudioRemoved.Reason).
const (
	AudioRemovedNotMember  = "not_member"
	AudioRemovedBanned     = "banned"
	AudioRemovedNoSeat     = "no_seat"
	AudioRemovedSeatMuted  = "seat_muted"
	AudioRemovedSeatLocked = "seat_locked"
)

// MaxSeatGraceMs bounds trtc.seat_grace.
const MaxSeatGraceMs = 10 * 60 * 1000

// MaxLeaveAfterMs bounds presence.stale_after when callbacks decide
// (configs.MaxCallbackStaleAfter).
const MaxLeaveAfterMs = 30 * 24 * 60 * 60 * 1000

// AudioIDPrefix starts the command ids of AudioPresence (reserved).
const AudioIDPrefix = "trtc-"

// AudioMark is what the room keeps about a member's audio presence.
// The same shape keeps a member's IM presence (Out: offline).
type AudioMark struct {
	LastMs      int64 `json:"last_ms"`                 // event time of the newest enter/exit accepted
	Out         bool  `json:"out,omitempty"`           // that one was an exit
	ReleaseAtMs int64 `json:"release_at_ms,omitempty"` // seated and out: the seat goes at this time
	LeaveAtMs   int64 `json:"leave_at_ms,omitempty"`   // out, on the presence source: the member leaves at this time
}

// AudioMarks returns the members' audio marks (read only).
func (s State) AudioMarks() map[string]AudioMark { return s.x().Audio }

// OnlineMarks returns the members' IM presence marks (read only).
func (s State) OnlineMarks() map[string]AudioMark { return s.x().Online }

// nextAudioDeadline is the earliest pending seat release or presence
// leave, 0 for none.
func (s State) nextAudioDeadline() int64 {
	var next int64
	early := func(at int64) {
		if at > 0 && (next == 0 || at < next) {
			next = at
		}
	}
	for _, m := range s.x().Audio {
		early(m.ReleaseAtMs)
		early(m.LeaveAtMs)
	}
	for _, m := range s.x().Online {
		early(m.LeaveAtMs)
	}
	return next
}

// imKind reports whether kind is IM's (online, offline), kept in the
// online marks.
func imKind(kind string) bool { return kind == PresenceOnline || kind == PresenceOffline }

func checkAudio(cmd Command) error {
	switch cmd.AudioKind {
	case AudioEnter, AudioExit, AudioStart, AudioDismiss, PresenceOnline, PresenceOffline:
	default:
		return errclass.Invalidf("kind must be %s, %s, %s, %s, %s or %s, got %q", AudioEnter, AudioExit, AudioStart, AudioDismiss,
			PresenceOnline, PresenceOffline, cmd.AudioKind)
	}
	if cmd.EventTimeMs <= 0 {
		return errclass.Invalidf("event_time_ms must be positive, got %d", cmd.EventTimeMs)
	}
	if cmd.SeatGraceMs < 0 || cmd.SeatGraceMs > MaxSeatGraceMs {
		return errclass.Invalidf("seat_grace_ms must be between 0 and %d, got %d", MaxSeatGraceMs, cmd.SeatGraceMs)
	}
	if cmd.LeaveAfterMs < 0 || cmd.LeaveAfterMs > MaxLeaveAfterMs {
		return errclass.Invalidf("leave_after_ms must be between 0 and %d, got %d", MaxLeaveAfterMs, cmd.LeaveAfterMs)
	}
	return checkReason(cmd)
}

func decideAudio(s State, cmd Command) ([]Event, error) {
	u := cmd.UserID
	switch cmd.AudioKind {
	case AudioDismiss:
		// Tencent dismissed the audio room of an open room (its last user
		// left, or an operator did it in the console): nothing to undo,
		// clients enter it again and TRTC creates it; the fact is kept.
		return []Event{RoomAudioDismissed{EventMs: cmd.EventTimeMs}}, nil
	case AudioStart:
		if r := audioRefusal(s, u, cmd.NowMs, true); r != "" {
			return []Event{RoomAudioRemoved{UserID: u, Reason: r, Kind: cmd.AudioKind}}, nil
		}
		return nil, nil
	}
	if cmd.AudioKind == AudioEnter {
		if r := audioRefusal(s, u, cmd.NowMs, false); r != "" {
			return []Event{RoomAudioRemoved{UserID: u, Reason: r, Kind: cmd.AudioKind}}, nil
		}
	}
	if !s.IsMember(u) {
		return nil, nil // an exit of someone who is gone: nothing to keep
	}
	if imKind(cmd.AudioKind) {
		return decideOnline(s, cmd)
	}
	mark, ok := s.x().Audio[u]
	if ok && !newer(cmd.EventTimeMs, cmd.AudioKind == AudioExit, mark) {
		return nil, nil // older than what the room knows: a retry or a reorder
	}
	seen := RoomAudioSeen{UserID: u, Kind: cmd.AudioKind, EventMs: cmd.EventTimeMs, Reason: cmd.Reason}
	if cmd.AudioKind == AudioExit && s.SeatOf(u) >= 0 {
		seen.ReleaseAtMs = cmd.EventTimeMs + cmd.SeatGraceMs
	}
	if cmd.AudioKind == AudioExit {
		seen.LeaveAtMs = leaveAt(s, cmd)
	}
	return []Event{seen}, nil
}

// decideOnline keeps a member's IM login or logout. Of a Login and a
// Logout in the same millisecond the Login counts as the later: IM
// reports a device pushed out by the user's new login as both, and the
// user is online.
func decideOnline(s State, cmd Command) ([]Event, error) {
	u, off := cmd.UserID, cmd.AudioKind == PresenceOffline
	if m, ok := s.x().Online[u]; ok && !(cmd.EventTimeMs > m.LastMs || cmd.EventTimeMs == m.LastMs && !off && m.Out) {
		return nil, nil // older than what the room knows: a retry or a reorder
	}
	if cmd.EventTimeMs < s.Members[u] {
		return nil, nil // about a stay before this one
	}
	seen := RoomAudioSeen{UserID: u, Kind: cmd.AudioKind, EventMs: cmd.EventTimeMs, Reason: cmd.Reason}
	if off {
		seen.LeaveAtMs = leaveAt(s, cmd)
	}
	return []Event{seen}, nil
}

// leaveAt is when the member of an exit or offline report leaves, 0 for
// never: the sender's side is not the presence source, or the report is
// older than the member's join.
func leaveAt(s State, cmd Command) int64 {
	if cmd.LeaveAfterMs <= 0 || cmd.EventTimeMs < s.Members[cmd.UserID] {
		return 0
	}
	return cmd.EventTimeMs + cmd.LeaveAfterMs
}

// newer reports whether a report at atMs (an exit or not) comes after the
// one the mark keeps. Of an enter and an exit in the same millisecond the
// exit counts as the later, whichever arrives first, so every arrival
// order ends the same way (and a real re-enter comes later still).
func newer(atMs int64, exit bool, m AudioMark) bool {
	return atMs > m.LastMs || atMs == m.LastMs && exit && !m.Out
}

// audioRefusal says why u may not be in the audio room (enter) or publish
// in it (publish), "" when they may.
func audioRefusal(s State, u string, nowMs int64, publish bool) string {
	switch {
	case s.BannedAt(u, nowMs):
		return AudioRemovedBanned
	case !s.IsMember(u):
		return AudioRemovedNotMember
	case !publish:
		return ""
	}
	seat := s.SeatOf(u)
	switch {
	case seat < 0:
		return AudioRemovedNoSeat
	case s.SeatMuted(seat):
		return AudioRemovedSeatMuted
	case s.SeatLocked(seat):
		return AudioRemovedSeatLocked
	}
	return ""
}

// audioReleases are the seat releases whose grace is over at nowMs, part
// of the room's deadline command. A mark whose user holds no seat any more
// only loses its deadline.
func audioReleases(s State, nowMs int64) []Event {
	var evs []Event
	marks := s.x().Audio
	for _, u := range slices.Sorted(maps.Keys(marks)) {
		m := marks[u]
		if m.ReleaseAtMs == 0 || m.ReleaseAtMs > nowMs {
			continue
		}
		if seat := s.SeatOf(u); seat >= 0 {
			evs = append(evs, RoomMicReleased{UserID: u, Seat: seat, Reason: ReasonAudioLeft})
		} else {
			evs = append(evs, RoomAudioSeen{UserID: u, Kind: AudioExit, EventMs: m.LastMs, LeaveAtMs: m.LeaveAtMs})
		}
	}
	return evs
}

// presenceLeaves are the leaves of members whose presence deadline
// (audio or IM) is over at nowMs, part of the room's deadline command
// after its events before (evs: the expiries and seat releases, which
// the leaves must not end or release again): the events of a LeaveRoom
// with reason heartbeat_timeout, as the heartbeat stale worker's.
func presenceLeaves(s State, evs []Event, nowMs int64) []Event {
	due := map[string]bool{}
	for _, marks := range []map[string]AudioMark{s.x().Audio, s.x().Online} {
		for u, m := range marks {
			if m.LeaveAtMs > 0 && m.LeaveAtMs <= nowMs {
				due[u] = true
			}
		}
	}
	if len(due) == 0 {
		return nil
	}
	after := s.Clone() // a deadline command is rare: the copy costs nothing that matters
	for _, e := range evs {
		e.apply(&after)
	}
	var leaves []Event
	for _, u := range slices.Sorted(maps.Keys(due)) {
		if after.IsMember(u) {
			leaves = append(leaves, leaveEvents(after, u, ReasonHeartbeatTimeout)...)
		}
	}
	return leaves
}

// RoomAudioSeen: the room accepted an enter or exit of a member's audio,
// at EventMs; ReleaseAtMs > 0: they hold a seat, which goes then unless
// they come back. Not sent to IM: a client sees the release, if any.
// LeaveAtMs > 0: the member leaves then unless they come back (the
// presence source's report). Kind online or offline is IM's.
type RoomAudioSeen struct {
	UserID      string `json:"user_id"`
	Kind        string `json:"kind"`
	EventMs     int64  `json:"event_ms"`
	ReleaseAtMs int64  `json:"release_at_ms,omitempty"`
	Reason      string `json:"reason,omitempty"`
	LeaveAtMs   int64  `json:"leave_at_ms,omitempty"`
}

func (RoomAudioSeen) EventType() string { return TypeRoomAudioSeen }
func (e RoomAudioSeen) apply(s *State) {
	if !s.IsMember(e.UserID) {
		return
	}
	x := s.mx()
	if imKind(e.Kind) {
		if x.Online == nil {
			x.Online = map[string]AudioMark{}
		}
		x.Online[e.UserID] = AudioMark{LastMs: e.EventMs, Out: e.Kind == PresenceOffline, LeaveAtMs: e.LeaveAtMs}
		return
	}
	if x.Audio == nil {
		x.Audio = map[string]AudioMark{}
	}
	x.Audio[e.UserID] = AudioMark{LastMs: e.EventMs, Out: e.Kind == AudioExit, ReleaseAtMs: e.ReleaseAtMs, LeaveAtMs: e.LeaveAtMs}
}

// RoomAudioRemoved: UserID must leave the room's audio room (the effect:
// TRTC's removal), because of Reason, seen on a report of Kind.
type RoomAudioRemoved struct {
	UserID string `json:"user_id"`
	Reason string `json:"reason"`
	Kind   string `json:"kind"`
}

func (RoomAudioRemoved) EventType() string { return TypeRoomAudioRemoved }
func (RoomAudioRemoved) apply(*State)      {}

// RoomAudioDismissed: Tencent dismissed the audio room of the open room.
type RoomAudioDismissed struct {
	EventMs int64 `json:"event_ms"`
}

func (RoomAudioDismissed) EventType() string { return TypeRoomAudioDismissed }
func (RoomAudioDismissed) apply(*State)      {}

// clearAudioRelease drops user's pending seat release (their seat went).
func (s *State) clearAudioRelease(user string) {
	if s.Extra == nil {
		return
	}
	if m, ok := s.Extra.Audio[user]; ok && m.ReleaseAtMs != 0 {
		m.ReleaseAtMs = 0
		s.Extra.Audio[user] = m
	}
}

// refuseClient: only the callback endpoint reports what Tencent saw.
func refuseClient(cmd Command) error {
	return errclass.Invalidf("%s is the room's own command (Tencent's callbacks), not a client's", cmd.Type)
}
