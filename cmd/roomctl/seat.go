package main

import (
	"context"
	"fmt"
	"io"

	flag "github.com/spf13/pflag"

	"github.com/hyapp/roomcell/api/roomcellv1"
)

// The seat mode, application and invitation subcommands.

func init() {
	roomCommand("seat mode", "set how seats are taken: --mode free|apply (--user is the owner or an admin)",
		func(fs *flag.FlagSet) {
			fs.String("mode", "", "free (take directly) or apply (apply, an admin approves)")
			require(fs, "mode")
		},
		func(fs *flag.FlagSet) *roomcellv1.SetSeatModeRequest {
			return &roomcellv1.SetSeatModeRequest{SeatMode: str(fs, "mode")}
		},
		roomcellv1.RoomServiceClient.SetSeatMode)
	roomCommand("seat apply", "apply for mic seat --seat as --user (a room in apply mode)",
		func(fs *flag.FlagSet) {
			fs.Int32("seat", 0, "seat index, 0-based")
			fs.Int64("expire-after", 0, "seconds until the application expires (0 = 60, at most 300)")
			require(fs, "seat")
		},
		func(fs *flag.FlagSet) *roomcellv1.ApplySeatRequest {
			return &roomcellv1.ApplySeatRequest{Seat: i32(fs, "seat"), TimeoutSeconds: i64(fs, "expire-after")}
		},
		roomcellv1.RoomServiceClient.ApplySeat)
	roomCommand("seat invite", "invite --target to mic seat --seat (--user is the owner or an admin)",
		func(fs *flag.FlagSet) {
			fs.String("target", "", "user id")
			fs.Int32("seat", 0, "seat index, 0-based")
			fs.Int64("expire-after", 0, "seconds until the invitation expires (0 = 60, at most 300)")
			require(fs, "target", "seat")
		},
		func(fs *flag.FlagSet) *roomcellv1.InviteToSeatRequest {
			return &roomcellv1.InviteToSeatRequest{TargetUserId: str(fs, "target"), Seat: i32(fs, "seat"), TimeoutSeconds: i64(fs, "expire-after")}
		},
		roomcellv1.RoomServiceClient.InviteToSeat)
	roomCommand("seat cancel", "withdraw --user's pending seat application", nil, nil, roomcellv1.RoomServiceClient.CancelSeatApplication)
	roomCommand("seat accept", "accept --user's pending seat invitation (takes the seat)", nil, nil, roomcellv1.RoomServiceClient.AcceptSeatInvitation)
	roomCommand("seat decline", "decline --user's pending seat invitation", nil, nil, roomcellv1.RoomServiceClient.DeclineSeatInvitation)
	roomCommand("seat approve", "approve --target's seat application, seating them (--user is the owner or an admin)", targetFlag,
		func(fs *flag.FlagSet) *roomcellv1.ApproveSeatApplicationRequest {
			return &roomcellv1.ApproveSeatApplicationRequest{TargetUserId: str(fs, "target")}
		},
		roomcellv1.RoomServiceClient.ApproveSeatApplication)
	roomCommand("seat reject", "reject --target's seat application (--user is the owner or an admin)", targetFlag,
		func(fs *flag.FlagSet) *roomcellv1.RejectSeatApplicationRequest {
			return &roomcellv1.RejectSeatApplicationRequest{TargetUserId: str(fs, "target")}
		},
		roomcellv1.RoomServiceClient.RejectSeatApplication)
	roomCommand("seat kick", "take --target off their seat; they stay in the room (--user is the owner or an admin)", targetFlag,
		func(fs *flag.FlagSet) *roomcellv1.KickOffSeatRequest {
			return &roomcellv1.KickOffSeatRequest{TargetUserId: str(fs, "target")}
		},
		roomcellv1.RoomServiceClient.KickOffSeat)
	roomCommand("seat move", "move --user (or --target, moved by --user, the owner or an admin) to mic seat --seat",
		func(fs *flag.FlagSet) {
			fs.Int32("seat", 0, "seat index to move to, 0-based")
			fs.String("target", "", "user to move (empty = --user)")
			fs.String("policy", "", "when the seat is taken: abort (default), force (take its holder off) or swap")
			require(fs, "seat")
		},
		func(fs *flag.FlagSet) *roomcellv1.MoveSeatRequest {
			return &roomcellv1.MoveSeatRequest{Seat: i32(fs, "seat"), TargetUserId: str(fs, "target"), Policy: str(fs, "policy")}
		},
		roomcellv1.RoomServiceClient.MoveSeat)
	roomCommand("seat count", "set the room's number of mic seats to --seats; users on removed seats are taken off them (--user is the owner or an admin)",
		func(fs *flag.FlagSet) {
			fs.Int32("seats", 0, "mic seats, 1 to 20")
			require(fs, "seats")
		},
		func(fs *flag.FlagSet) *roomcellv1.SetSeatCountRequest {
			return &roomcellv1.SetSeatCountRequest{MicSeats: i32(fs, "seats")}
		},
		roomcellv1.RoomServiceClient.SetSeatCount)
	register(&command{
		name:  "seat requests",
		usage: "show a room's seat mode and pending seat applications and invitations",
		flags: roomFlags,
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			reply, err := client(e).ListSeatRequests(ctx, &roomcellv1.ListSeatRequestsRequest{AppCode: str(fs, "app"), RoomId: str(fs, "room")})
			return e.show(reply, err, func(w io.Writer) {
				fmt.Fprintf(w, "seat mode %s (room seq %d)\n", reply.GetSeatMode(), reply.GetRoomSeq())
				printSeatRequests(w, "applications", reply.GetApplications())
				printSeatRequests(w, "invitations", reply.GetInvitations())
			})
		},
	})
}

func printSeatRequests(w io.Writer, what string, rs []*roomcellv1.SeatRequest) {
	if len(rs) == 0 {
		fmt.Fprintf(w, "  %s: none\n", what)
		return
	}
	fmt.Fprintf(w, "  %s:\n", what)
	for _, r := range rs {
		by := ""
		if op := r.GetOperatorUserId(); op != "" {
			by = " by " + op
		}
		fmt.Fprintf(w, "    %s seat %d%s, expires at %d ms\n", r.GetUserId(), r.GetSeat(), by, r.GetExpiresAtMs())
	}
}
