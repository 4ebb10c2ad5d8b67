package room_test

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/room"
)

// Actor roles: who sends the command.
const (
	aOwner     = "owner"
	aAdmin     = "admin"      // listed and in the room
	aAdminAway = "admin-away" // listed, not in the room
	aMember    = "member"
	aOutsider  = "outsider"
	aBanned    = "banned" // a ban in force
)

// Target roles: whom the command is about. A ban or mute in force is told
// apart by who imposed it, since only someone as strong undoes it.
const (
	tOwner        = "owner"
	tAdmin        = "admin" // listed, in the room or not
	tMember       = "member"
	tOutsider     = "outsider"
	tBannedOwner  = "banned-by-owner"
	tBannedAdmin  = "banned-by-admin"
	tMutedOwner   = "muted-by-owner"
	tMutedAdmin   = "muted-by-admin"
	tNone         = "-" // the command has no target
	everyTarget   = "owner admin member outsider banned-by-owner banned-by-admin muted-by-owner muted-by-admin"
	belowAdmin    = "member outsider banned-by-owner banned-by-admin muted-by-owner muted-by-admin"
	belowAdminFor = "member outsider banned-by-admin muted-by-owner muted-by-admin" // an admin's ban: not over the owner's
)

// privileges is who may do each moderation command: command → actor role
// → the target roles allowed (space separated; tNone for a command with
// no target). A role not listed may do nothing. "May" means the room
// refuses for no reason of rank: it may still refuse for the state (the
// target holds no seat, is not in the room, ...). Every other pair is
// refused, with no event.
var privileges = map[string]map[string]string{
	// Bans: the owner bans anyone; an admin bans no admin, and does not
	// replace (shorten) the owner's ban.
	room.CmdBanUser:  {aOwner: everyTarget, aAdmin: "member outsider banned-by-admin muted-by-owner muted-by-admin"},
	room.CmdKickUser: {aOwner: everyTarget, aAdmin: belowAdmin},
	// Lifting: at least the authority that imposed it; no admin's.
	room.CmdUnbanUser:    {aOwner: everyTarget, aAdmin: "member outsider banned-by-admin muted-by-owner muted-by-admin"},
	room.CmdMuteMember:   {aOwner: everyTarget, aAdmin: "member outsider banned-by-owner banned-by-admin muted-by-admin"},
	room.CmdUnmuteMember: {aOwner: everyTarget, aAdmin: "member outsider banned-by-owner banned-by-admin muted-by-admin"},
	// Seats of others: only the owner moves an admin.
	room.CmdKickOffSeat: {aOwner: everyTarget, aAdmin: belowAdmin},
	room.CmdMoveSeat:    {aOwner: everyTarget, aAdmin: belowAdmin},
	// The owner's own.
	room.CmdSetAdmin:      {aOwner: everyTarget},
	room.CmdRemoveAdmin:   {aOwner: everyTarget},
	room.CmdTransferOwner: {aOwner: everyTarget},
	room.CmdReopenRoom:    {aOwner: tNone},
	// An operator's, on anyone's request or seat.
	room.CmdApproveSeatApplication: {aOwner: everyTarget, aAdmin: everyTarget},
	room.CmdRejectSeatApplication:  {aOwner: everyTarget, aAdmin: everyTarget},
	room.CmdInviteToSeat:           {aOwner: everyTarget, aAdmin: everyTarget},
	// An operator's, with no target.
	room.CmdCloseRoom:         {aOwner: tNone, aAdmin: tNone},
	room.CmdLockSeat:          {aOwner: tNone, aAdmin: tNone},
	room.CmdUnlockSeat:        {aOwner: tNone, aAdmin: tNone},
	room.CmdMuteSeat:          {aOwner: tNone, aAdmin: tNone},
	room.CmdUnmuteSeat:        {aOwner: tNone, aAdmin: tNone},
	room.CmdSetSeatCount:      {aOwner: tNone, aAdmin: tNone},
	room.CmdSetSeatMode:       {aOwner: tNone, aAdmin: tNone},
	room.CmdUpdateRoom:        {aOwner: tNone, aAdmin: tNone},
	room.CmdSetRoomMetadata:   {aOwner: tNone, aAdmin: tNone},
	room.CmdSetRoomCustomInfo: {aOwner: tNone, aAdmin: tNone},
	room.CmdSetRoomPassword:   {aOwner: tNone, aAdmin: tNone},
	room.CmdSetAllMicsMuted:   {aOwner: tNone, aAdmin: tNone},
	room.CmdSetChatDisabled:   {aOwner: tNone, aAdmin: tNone},
}

// selfService are the commands that act on the sender only (or the room's
// own): no rank is involved. Every command type is in one of the two
// lists, so a new command is placed in the matrix before it lands.
var selfService = []string{room.CmdCreateRoom, room.CmdJoinRoom, room.CmdLeaveRoom, room.CmdTakeMic, room.CmdReleaseMic,
	room.CmdSendGift, room.CmdHeartbeat, room.CmdApplySeat, room.CmdCancelSeatApplication, room.CmdAcceptSeatInvitation,
	room.CmdDeclineSeatInvitation, room.CmdExpireSeatRequests, room.CmdLikeRoom,
	room.CmdAudioPresence, // TRTC's callback about the sender's own audio presence, from the node
}

// rankErrors are the refusals for who one is; any other refusal is about
// the state.
var rankErrors = []error{room.ErrNotOwner, room.ErrOwnerOnly, room.ErrKickAdmin, room.ErrKickOwner, room.ErrOutranked}

func TestPrivilegeMatrixCoversEveryCommand(t *testing.T) {
	for _, typ := range room.CommandTypes() {
		_, moderated := privileges[typ]
		if moderated == slices.Contains(selfService, typ) {
			t.Errorf("command %s: in the privilege matrix %v, self-service %v: place it in exactly one", typ, moderated, !moderated)
		}
	}
}

func actorRole(s room.State, u string, nowMs int64) string {
	switch {
	case u == s.Owner:
		return aOwner
	case s.IsAdmin(u) && s.IsMember(u):
		return aAdmin
	case s.IsAdmin(u):
		return aAdminAway
	case s.IsMember(u):
		return aMember
	case s.BannedAt(u, nowMs):
		return aBanned
	}
	return aOutsider
}

// targetRole: a user both banned and muted (a mute outlives leaving) is
// seen as muted by the mute commands and as banned by the others.
func targetRole(s room.State, cmdType, u string, nowMs int64) string {
	x := s.Extra
	if x == nil {
		x = &room.Extra{}
	}
	mutes := cmdType == room.CmdMuteMember || cmdType == room.CmdUnmuteMember
	switch {
	case u == s.Owner:
		return tOwner
	case s.IsAdmin(u):
		return tAdmin
	case mutes && s.MutedAt(u, nowMs) && x.MuteBy[u].Role == room.RoleOwner:
		return tMutedOwner
	case mutes && s.MutedAt(u, nowMs):
		return tMutedAdmin
	case s.BannedAt(u, nowMs) && x.BanNotes[u].Role == room.RoleOwner:
		return tBannedOwner
	case s.BannedAt(u, nowMs):
		return tBannedAdmin
	case s.MutedAt(u, nowMs) && x.MuteBy[u].Role == room.RoleOwner:
		return tMutedOwner
	case s.MutedAt(u, nowMs):
		return tMutedAdmin
	case s.IsMember(u):
		return tMember
	}
	return tOutsider
}

// matrixCommand makes cmdType by actor about target in s, with fields
// that pass validation.
func matrixCommand(r *rand.Rand, s room.State, cmdType, actor, target string, nowMs int64) room.Command {
	c := room.Command{Type: cmdType, CommandID: "m1", RequestID: "r", AppCode: tApp, RoomID: tRoom, UserID: actor, NowMs: nowMs}
	seat := r.IntN(max(len(s.Seats), 1))
	switch cmdType {
	case room.CmdBanUser:
		c.TargetUserID, c.BanSeconds = target, 1+r.Int64N(100)
	case room.CmdKickUser:
		c.TargetUserID, c.BanSeconds = target, r.Int64N(3)*r.Int64N(100)
	case room.CmdMuteMember:
		c.TargetUserID, c.MuteSeconds = target, 1+r.Int64N(100)
	case room.CmdMoveSeat, room.CmdInviteToSeat:
		c.TargetUserID, c.Seat, c.TimeoutSeconds = target, seat, 10
	case room.CmdSetSeatCount:
		c.MicSeats = 1 + r.IntN(room.MaxMicSeats)
	case room.CmdSetSeatMode:
		c.SeatMode = []string{room.SeatModeApply, room.SeatModeFree}[r.IntN(2)]
	case room.CmdUpdateRoom:
		c.Name = fmt.Sprintf("n%d", r.IntN(9))
	case room.CmdSetRoomMetadata:
		c.Category = fmt.Sprintf("c%d", r.IntN(9))
	case room.CmdSetRoomPassword:
		c.ClearPassword = true
	case room.CmdSetChatDisabled:
		c.ChatDisabled = r.IntN(2) == 0
	case room.CmdSetAllMicsMuted:
		c.AllMicsMuted = r.IntN(2) == 0
	case room.CmdSetRoomCustomInfo:
		c.CustomSet = map[string]string{"k": fmt.Sprintf("v%d", r.IntN(9))}
	case room.CmdLockSeat, room.CmdUnlockSeat, room.CmdMuteSeat, room.CmdUnmuteSeat:
		c.Seat = seat
	case room.CmdCloseRoom, room.CmdReopenRoom:
	default:
		c.TargetUserID = target
	}
	return c
}

// TestPrivilegeMatrix decides every command of the matrix by every user
// about every other in random rooms (bans and mutes by the owner and by
// admins, admins in and out, kicks, transfers) and holds the room's
// answer to the table: a refused pair is refused with no event, an
// allowed pair is never refused for rank. Besides the table, for every
// command accepted: nobody but the owner changes the admin list or a ban
// or mute the owner imposed.
func TestPrivilegeMatrix(t *testing.T) {
	users := []string{"o", "a1", "a2", "a3", "u1", "u2", "u3", "u4", "u5"}
	visited := map[string]int{} // cmd actor target → decisions
	effect := map[string]int{}  // ... that changed the room
	for seed := range uint64(8) {
		r := rand.New(rand.NewPCG(seed, 77))
		s := given(t, create("o", admins("a1", "a2", "a3"), at(t0)), join("a1"), join("a2"), join("a3"), join("u1"), join("u2"), join("u3"))
		now := t0
		for step := range 400 {
			now += r.Int64N(2000)
			// Move the room on with a random accepted command: mostly bans
			// and mutes by admins and by the owner, so every kind of entry
			// is in force at times; now and then anything by anyone.
			typ := slices.Sorted(maps.Keys(privileges))[r.IntN(len(privileges))]
			actor := users[r.IntN(len(users))]
			switch k := r.IntN(10); {
			case k < 3:
				typ = []string{room.CmdBanUser, room.CmdMuteMember, room.CmdMuteMember, room.CmdKickUser}[r.IntN(4)]
				if len(s.Admins) > 0 {
					actor = s.Admins[r.IntN(len(s.Admins))]
				}
			case k < 5:
				actor = s.Owner
			case k < 7:
				typ = []string{room.CmdJoinRoom, room.CmdJoinRoom, room.CmdLeaveRoom, room.CmdTakeMic, room.CmdApplySeat}[r.IntN(5)]
			}
			if typ == room.CmdCloseRoom && r.IntN(4) > 0 || typ == room.CmdTransferOwner && r.IntN(8) > 0 {
				typ = room.CmdJoinRoom
			}
			mv := matrixCommand(r, s, typ, actor, users[r.IntN(len(users))], now)
			if s.Status == room.StatusClosed {
				mv = matrixCommand(r, s, room.CmdReopenRoom, s.Owner, "", now)
			}
			if evs, err := room.Decide(s, mv); err == nil {
				s.ApplyInPlace(s.Seq+1, evs)
			}
			if step%4 != 0 || s.Status != room.StatusOpen {
				continue
			}
			checkMatrix(t, r, s, users, now, visited, effect)
		}
	}
	// Every cell of the table was tried in some room, and the undoing
	// cells took effect at least once (else the property proves little).
	for typ, byActor := range privileges {
		for _, a := range []string{aOwner, aAdmin, aAdminAway, aMember, aOutsider, aBanned} {
			targets := strings.Fields(everyTarget)
			if _, ok := byActor[aOwner]; ok && byActor[aOwner] == tNone {
				targets = []string{tNone}
			}
			for _, tr := range targets {
				if a == aOwner && tr == tOwner || typ == room.CmdReopenRoom {
					continue // oneself; reopening needs a closed room (lifecycle rules)
				}
				if visited[typ+" "+a+" "+tr] == 0 {
					t.Errorf("cell %s by %s on %s never tried", typ, a, tr)
				}
			}
		}
	}
	for _, cell := range []string{
		"UnbanUser owner banned-by-owner", "UnbanUser owner banned-by-admin", "UnbanUser admin banned-by-admin",
		"UnmuteMember owner muted-by-owner", "UnmuteMember admin muted-by-admin", "MuteMember owner muted-by-admin",
		"BanUser owner admin", "KickUser owner admin", "KickUser admin member", "BanUser admin banned-by-admin",
	} {
		if effect[cell] == 0 {
			t.Errorf("cell %s never took effect (%d tries)", cell, visited[cell])
		}
	}
}

func checkMatrix(t *testing.T, r *rand.Rand, s room.State, users []string, now int64, visited, effect map[string]int) {
	t.Helper()
	for typ, byActor := range privileges {
		for _, actor := range users {
			targets := users
			if byActor[aOwner] == tNone {
				targets = []string{""}
			}
			for _, target := range targets {
				if actor == target || typ == room.CmdReopenRoom {
					continue
				}
				ar, tr := actorRole(s, actor, now), tNone
				if target != "" {
					tr = targetRole(s, typ, target, now)
				}
				cell := typ + " " + ar + " " + tr
				visited[cell]++
				allowed := slices.Contains(strings.Fields(byActor[ar]), tr)
				c := matrixCommand(r, s, typ, actor, target, now)
				evs, err := room.Decide(s, c)
				if err != nil && (errclass.Name(err) == errclass.NameInternal || errors.Is(err, errclass.Invalid)) {
					t.Fatalf("%s: %v", cell, err)
				}
				if !allowed {
					if err == nil {
						t.Fatalf("%s by %s on %s: the table refuses it, the room answered %v", typ, actor, target, evs)
					}
					continue
				}
				for _, re := range rankErrors {
					if errors.Is(err, re) {
						t.Fatalf("%s by %s on %s: the table allows it, the room refused for rank: %v", typ, actor, target, err)
					}
				}
				if err != nil || len(evs) == 0 {
					continue
				}
				effect[cell]++
				next := room.ApplyCommand(s, s.Seq+1, evs)
				if actor != s.Owner {
					if !slices.Equal(next.Admins, s.Admins) || next.Owner != s.Owner {
						t.Fatalf("%s by %s (no owner) changed the admins or owner: %v → %v", typ, actor, s.Admins, next.Admins)
					}
					if err := ownersEntriesKept(s, next, now); err != nil {
						t.Fatalf("%s by %s on %s: %v", typ, actor, target, err)
					}
				}
			}
		}
	}
}

// ownersEntriesKept: every ban and mute in force the owner imposed in s is
// in next as it was.
func ownersEntriesKept(s, next room.State, now int64) error {
	if s.Extra == nil {
		return nil
	}
	var mutes map[string]int64
	if next.Extra != nil {
		mutes = next.Extra.Mutes
	}
	for u, by := range s.Extra.BanNotes {
		if by.Role == room.RoleOwner && s.BannedAt(u, now) && next.Bans[u] != s.Bans[u] {
			return fmt.Errorf("the owner's ban of %s (until %d) is now %d", u, s.Bans[u], next.Bans[u])
		}
	}
	for u, by := range s.Extra.MuteBy {
		if by.Role == room.RoleOwner && s.MutedAt(u, now) && mutes[u] != s.Extra.Mutes[u] {
			return fmt.Errorf("the owner's mute of %s (until %d) is now %d", u, s.Extra.Mutes[u], mutes[u])
		}
	}
	return nil
}
