package room

import (
	"maps"
	"slices"

	"github.com/hyapp/roomcell/errclass"
)

// Seat modes: who may take a free seat directly. In "apply" mode only the
// owner and admins in the room take seats with TakeMic; everyone else
// applies (ApplySeat) and waits for an approval, or is invited.
const (
	SeatModeFree  = "free"
	SeatModeApply = "apply"
)

// Seat requests (applications and invitations) run out by themselves:
// their deadline is in the room's state, and the room commits their
// expiry (CmdExpireSeatRequests) when it passes, so a request outlives a
// restart or a failover of its room.
const (
	DefaultSeatRequestSeconds = 60
	MaxSeatRequestSeconds     = 300
	MaxSeatRequests           = 100 // pending applications, and invitations, per room
)

// How a seat application or invitation ended. Every request ends exactly
// once, with one RoomSeatApplicationEnded or RoomSeatInvitationEnded.
const (
	OutcomeApproved  = "approved"  // application: an admin seated the applicant
	OutcomeRejected  = "rejected"  // application: an admin said no
	OutcomeCancelled = "cancelled" // application: the applicant withdrew
	OutcomeAccepted  = "accepted"  // invitation: the invitee took the seat
	OutcomeDeclined  = "declined"  // invitation: the invitee said no
	OutcomeExpired   = "expired"   // its deadline passed
	OutcomeSeated    = "seated"    // the user got a seat another way
	OutcomeLeft      = "left"      // the user left or was kicked
	OutcomeClosed    = "closed"    // the room closed
)

// SeatRequest is one pending application (UserID applied) or invitation
// (OperatorUserID invited UserID) for Seat, open until ExpiresAtMs.
type SeatRequest struct {
	Seat           int    `json:"seat"`
	OperatorUserID string `json:"operator_user_id,omitempty"`
	ExpiresAtMs    int64  `json:"expires_at_ms"`
}

// live reports whether the request is still open at nowMs: an expired
// one counts as absent for every decision, even before its expiry is
// committed.
func (r SeatRequest) live(nowMs int64) bool { return r.ExpiresAtMs > nowMs }

// NextSeatDeadline is the earliest deadline of a pending seat request or
// of a seat's audio grace (audio.go), 0 for none: when the room must
// commit its deadline command (CmdExpireSeatRequests) next.
func (s State) NextSeatDeadline() int64 {
	next := s.nextAudioDeadline()
	for _, m := range []map[string]SeatRequest{s.x().Applications, s.x().Invitations} {
		for _, r := range m {
			if next == 0 || r.ExpiresAtMs < next {
				next = r.ExpiresAtMs
			}
		}
	}
	return next
}

func (s State) seatMode() string {
	if s.x().SeatMode == "" {
		return SeatModeFree
	}
	return s.x().SeatMode
}

// CmdExpireSeatRequests is the room's own command (never a client's: no
// request message maps to it) that ends every request past its deadline.
const CmdExpireSeatRequests = "ExpireSeatRequests"

func checkSeatMode(cmd Command) error {
	if cmd.SeatMode != SeatModeFree && cmd.SeatMode != SeatModeApply {
		return errclass.Invalidf("seat_mode must be %q or %q, got %q", SeatModeFree, SeatModeApply, cmd.SeatMode)
	}
	return nil
}

func decideSetSeatMode(s State, cmd Command) ([]Event, error) {
	if err := checkOperator(s, cmd.UserID); err != nil {
		return nil, err
	}
	if s.seatMode() == cmd.SeatMode {
		return nil, nil
	}
	// Pending applications stay: an admin may still approve them after
	// the room went back to free seats, or they run out.
	return []Event{RoomSeatModeChanged{Mode: cmd.SeatMode, OperatorUserID: cmd.UserID}}, nil
}

func checkSeatTimeout(cmd Command) error {
	if cmd.TimeoutSeconds < 0 || cmd.TimeoutSeconds > MaxSeatRequestSeconds {
		return errclass.Invalidf("timeout_seconds must be between 0 (default %d) and %d, got %d", DefaultSeatRequestSeconds, MaxSeatRequestSeconds, cmd.TimeoutSeconds)
	}
	return nil
}

func checkApply(cmd Command) error {
	if err := checkSeat(cmd); err != nil {
		return err
	}
	return checkSeatTimeout(cmd)
}

func checkInvite(cmd Command) error {
	if err := checkTarget(cmd); err != nil {
		return err
	}
	if cmd.TargetUserID == cmd.UserID {
		return errclass.Invalidf("target_user_id must differ from user_id (take the seat instead)")
	}
	return checkApply(cmd)
}

func deadline(cmd Command) int64 {
	secs := cmd.TimeoutSeconds
	if secs == 0 {
		secs = DefaultSeatRequestSeconds
	}
	return cmd.NowMs + secs*1000
}

// seatFree is what a seat must be for a request to seat someone on it.
func seatFree(s State, seat int) error {
	if err := seatInRoom(s, seat); err != nil {
		return err
	}
	if s.Seats[seat] != "" {
		return ErrSeatTaken
	}
	if s.SeatLocked(seat) {
		return ErrSeatLocked
	}
	return nil
}

// decideApplySeat: a member without a seat asks for a free seat in a room
// in apply mode. Applying again for the same seat is a no-op; for
// another seat, the first application must end first.
func decideApplySeat(s State, cmd Command) ([]Event, error) {
	if !s.IsMember(cmd.UserID) {
		return nil, ErrNotMember
	}
	if s.seatMode() != SeatModeApply {
		return nil, ErrSeatsFree
	}
	if s.SeatOf(cmd.UserID) >= 0 {
		return nil, ErrAlreadySeated
	}
	if err := seatFree(s, cmd.Seat); err != nil {
		return nil, err
	}
	var evs []Event
	if a, ok := s.Applications()[cmd.UserID]; ok {
		if a.live(cmd.NowMs) {
			if a.Seat == cmd.Seat {
				return nil, nil
			}
			return nil, ErrAlreadyApplied
		}
		evs = append(evs, RoomSeatApplicationEnded{UserID: cmd.UserID, Seat: a.Seat, Outcome: OutcomeExpired})
	} else if len(s.Applications()) >= MaxSeatRequests {
		return nil, ErrTooManySeatRequests
	}
	return append(evs, RoomSeatApplied{UserID: cmd.UserID, Seat: cmd.Seat, ExpiresAtMs: deadline(cmd)}), nil
}

func decideCancelSeatApplication(s State, cmd Command) ([]Event, error) {
	a, ok := s.Applications()[cmd.UserID]
	if !ok || !a.live(cmd.NowMs) {
		return nil, ErrNoSeatRequest
	}
	return []Event{RoomSeatApplicationEnded{UserID: cmd.UserID, Seat: a.Seat, Outcome: OutcomeCancelled}}, nil
}

// decideApproveSeatApplication: an operator seats the applicant on the
// seat they asked for, if it is still free.
func decideApproveSeatApplication(s State, cmd Command) ([]Event, error) {
	if err := checkOperator(s, cmd.UserID); err != nil {
		return nil, err
	}
	a, ok := s.Applications()[cmd.TargetUserID]
	if !ok || !a.live(cmd.NowMs) {
		return nil, ErrNoSeatRequest
	}
	if err := seatFree(s, a.Seat); err != nil {
		return nil, err
	}
	evs := []Event{RoomSeatApplicationEnded{UserID: cmd.TargetUserID, Seat: a.Seat, Outcome: OutcomeApproved, OperatorUserID: cmd.UserID}}
	return append(evs, seatedEvents(s, cmd.TargetUserID, a.Seat, true, false)...), nil
}

func decideRejectSeatApplication(s State, cmd Command) ([]Event, error) {
	if err := checkOperator(s, cmd.UserID); err != nil {
		return nil, err
	}
	a, ok := s.Applications()[cmd.TargetUserID]
	if !ok || !a.live(cmd.NowMs) {
		return nil, ErrNoSeatRequest
	}
	return []Event{RoomSeatApplicationEnded{UserID: cmd.TargetUserID, Seat: a.Seat, Outcome: OutcomeRejected, OperatorUserID: cmd.UserID}}, nil
}

// decideInviteToSeat: an operator invites a member without a seat to a
// free seat, in either seat mode; the invitee accepts or declines.
func decideInviteToSeat(s State, cmd Command) ([]Event, error) {
	if err := checkOperator(s, cmd.UserID); err != nil {
		return nil, err
	}
	if !s.IsMember(cmd.TargetUserID) {
		return nil, ErrNotMember
	}
	if s.SeatOf(cmd.TargetUserID) >= 0 {
		return nil, ErrAlreadySeated
	}
	if err := seatFree(s, cmd.Seat); err != nil {
		return nil, err
	}
	var evs []Event
	if inv, ok := s.Invitations()[cmd.TargetUserID]; ok {
		if inv.live(cmd.NowMs) {
			if inv.Seat == cmd.Seat {
				return nil, nil
			}
			return nil, ErrAlreadyInvited
		}
		evs = append(evs, RoomSeatInvitationEnded{UserID: cmd.TargetUserID, Seat: inv.Seat, Outcome: OutcomeExpired})
	} else if len(s.Invitations()) >= MaxSeatRequests {
		return nil, ErrTooManySeatRequests
	}
	return append(evs, RoomSeatInvited{UserID: cmd.TargetUserID, Seat: cmd.Seat, OperatorUserID: cmd.UserID, ExpiresAtMs: deadline(cmd)}), nil
}

func decideAcceptSeatInvitation(s State, cmd Command) ([]Event, error) {
	inv, ok := s.Invitations()[cmd.UserID]
	if !ok || !inv.live(cmd.NowMs) {
		return nil, ErrNoSeatRequest
	}
	if err := seatFree(s, inv.Seat); err != nil {
		return nil, err
	}
	evs := []Event{RoomSeatInvitationEnded{UserID: cmd.UserID, Seat: inv.Seat, Outcome: OutcomeAccepted}}
	return append(evs, seatedEvents(s, cmd.UserID, inv.Seat, false, true)...), nil
}

func decideDeclineSeatInvitation(s State, cmd Command) ([]Event, error) {
	inv, ok := s.Invitations()[cmd.UserID]
	if !ok || !inv.live(cmd.NowMs) {
		return nil, ErrNoSeatRequest
	}
	return []Event{RoomSeatInvitationEnded{UserID: cmd.UserID, Seat: inv.Seat, Outcome: OutcomeDeclined}}, nil
}

// decideExpireSeatRequests ends every request whose deadline has passed,
// in user order (applications first), so two activations deciding at the
// same state and time write the same events.
func decideExpireSeatRequests(s State, cmd Command) ([]Event, error) {
	var evs []Event
	for _, u := range slices.Sorted(maps.Keys(s.Applications())) {
		if a := s.Applications()[u]; !a.live(cmd.NowMs) {
			evs = append(evs, RoomSeatApplicationEnded{UserID: u, Seat: a.Seat, Outcome: OutcomeExpired})
		}
	}
	for _, u := range slices.Sorted(maps.Keys(s.Invitations())) {
		if inv := s.Invitations()[u]; !inv.live(cmd.NowMs) {
			evs = append(evs, RoomSeatInvitationEnded{UserID: u, Seat: inv.Seat, Outcome: OutcomeExpired})
		}
	}
	evs = append(evs, audioReleases(s, cmd.NowMs)...)
	return append(evs, presenceLeaves(s, evs, cmd.NowMs)...), nil
}

// seatedEvents seats user on seat and ends the user's other pending
// requests (outcome "seated"): one seat per user, so a request of a
// seated user can never be granted. doneApp/doneInv: that request was
// ended by the caller's own event.
func seatedEvents(s State, user string, seat int, doneApp, doneInv bool) []Event {
	evs := []Event{RoomMicTaken{UserID: user, Seat: seat}}
	return append(evs, endRequests(s, user, OutcomeSeated, doneApp, doneInv)...)
}

// endRequests ends user's pending application and invitation with
// outcome (leaving, kicked, seated elsewhere).
func endRequests(s State, user, outcome string, skipApp, skipInv bool) []Event {
	var evs []Event
	if a, ok := s.Applications()[user]; ok && !skipApp {
		evs = append(evs, RoomSeatApplicationEnded{UserID: user, Seat: a.Seat, Outcome: outcome})
	}
	if inv, ok := s.Invitations()[user]; ok && !skipInv {
		evs = append(evs, RoomSeatInvitationEnded{UserID: user, Seat: inv.Seat, Outcome: outcome})
	}
	return evs
}

// endAllRequests ends every pending request (the room closes).
func endAllRequests(s State, outcome string) []Event {
	var evs []Event
	for _, u := range slices.Sorted(maps.Keys(s.Applications())) {
		evs = append(evs, RoomSeatApplicationEnded{UserID: u, Seat: s.Applications()[u].Seat, Outcome: outcome})
	}
	for _, u := range slices.Sorted(maps.Keys(s.Invitations())) {
		evs = append(evs, RoomSeatInvitationEnded{UserID: u, Seat: s.Invitations()[u].Seat, Outcome: outcome})
	}
	return evs
}

// RoomSeatModeChanged: the room's seats are now free to take or by
// application.
type RoomSeatModeChanged struct {
	Mode           string `json:"mode"`
	OperatorUserID string `json:"operator_user_id"`
}

func (RoomSeatModeChanged) EventType() string { return TypeRoomSeatModeChanged }
func (e RoomSeatModeChanged) apply(s *State) {
	s.mx().SeatMode = e.Mode
	if e.Mode == SeatModeFree {
		s.mx().SeatMode = "" // the default, as a room created before seat modes
	}
}

// RoomSeatApplied: UserID asks for Seat until ExpiresAtMs.
type RoomSeatApplied struct {
	UserID      string `json:"user_id"`
	Seat        int    `json:"seat"`
	ExpiresAtMs int64  `json:"expires_at_ms"`
}

func (RoomSeatApplied) EventType() string { return TypeRoomSeatApplied }
func (e RoomSeatApplied) apply(s *State) {
	x := s.mx()
	if x.Applications == nil {
		x.Applications = map[string]SeatRequest{}
	}
	x.Applications[e.UserID] = SeatRequest{Seat: e.Seat, ExpiresAtMs: e.ExpiresAtMs}
}

// RoomSeatApplicationEnded: UserID's application for Seat ended with
// Outcome; OperatorUserID is the admin who approved or rejected it.
type RoomSeatApplicationEnded struct {
	UserID         string `json:"user_id"`
	Seat           int    `json:"seat"`
	Outcome        string `json:"outcome"`
	OperatorUserID string `json:"operator_user_id,omitempty"`
}

func (RoomSeatApplicationEnded) EventType() string { return TypeRoomSeatApplicationEnded }
func (e RoomSeatApplicationEnded) apply(s *State) {
	if s.Extra != nil {
		delete(s.Extra.Applications, e.UserID)
	}
}

// RoomSeatInvited: OperatorUserID invites UserID to Seat until
// ExpiresAtMs.
type RoomSeatInvited struct {
	UserID         string `json:"user_id"`
	Seat           int    `json:"seat"`
	OperatorUserID string `json:"operator_user_id"`
	ExpiresAtMs    int64  `json:"expires_at_ms"`
}

func (RoomSeatInvited) EventType() string { return TypeRoomSeatInvited }
func (e RoomSeatInvited) apply(s *State) {
	x := s.mx()
	if x.Invitations == nil {
		x.Invitations = map[string]SeatRequest{}
	}
	x.Invitations[e.UserID] = SeatRequest{Seat: e.Seat, OperatorUserID: e.OperatorUserID, ExpiresAtMs: e.ExpiresAtMs}
}

// RoomSeatInvitationEnded: UserID's invitation to Seat ended with
// Outcome.
type RoomSeatInvitationEnded struct {
	UserID  string `json:"user_id"`
	Seat    int    `json:"seat"`
	Outcome string `json:"outcome"`
}

func (RoomSeatInvitationEnded) EventType() string { return TypeRoomSeatInvitationEnded }
func (e RoomSeatInvitationEnded) apply(s *State) {
	if s.Extra != nil {
		delete(s.Extra.Invitations, e.UserID)
	}
}
