package room

import "slices"

// A room's lifecycles: CreateRoom starts the first, CloseRoom ends one,
// ReopenRoom starts the next under the same id. The log goes on across
// them (seqs never restart), so a client resuming by room_seq, the
// outbox and replay see one history.

// checkReopen: an empty name keeps the room's.
func checkReopen(cmd Command) error {
	if cmd.Name == "" {
		return nil
	}
	return checkName("name", cmd.Name)
}

// decideReopen: only the owner (the owner when it closed) opens the room
// again: a room number is theirs to go live under, not anyone's to take.
// The new lifecycle is a RoomCreated marked Reopened, carrying the room
// as it was (seat count, admins; name unless a new one is given), then
// the owner's join, as at creation: whatever treats a RoomCreated as the
// room's start (its IM group, its directory listing) does so again. What
// the room decided about people outlives the close: bans and chat mutes
// in force still hold (no banned user comes back with a reopen), and so
// do its heat, seat mode, seat mutes and locks. An open room is a no-op,
// so a retried "go live" succeeds.
func decideReopen(s State, cmd Command) ([]Event, error) {
	if cmd.UserID != s.Owner {
		return nil, ErrOwnerOnly
	}
	if s.Status != StatusClosed {
		return nil, nil
	}
	name := s.Name
	if cmd.Name != "" {
		name = cmd.Name
	}
	return []Event{
		RoomCreated{OwnerUserID: s.Owner, Name: name, MicSeats: len(s.Seats), AdminUserIDs: slices.Clone(s.Admins),
			CreatedAtMs: cmd.NowMs, Reopened: true, Meta: s.Metadata()},
		RoomUserJoined{UserID: cmd.UserID, JoinedAtMs: cmd.NowMs},
	}, nil
}
