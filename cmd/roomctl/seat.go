package main

import (
	"context"
	"fmt"
	"io"

	"github.com/hyapp/roomcell/api/roomcellv1"
	flag "github.com/spf13/pflag"
)

// The seat mode, application and invitation subcommands.

func init() {
	register(&command{
		name:  "seat mode",
		usage: "set how seats are taken: --mode free|apply (--user is the owner or an admin)",
		flags: func(fs *flag.FlagSet) {
			commandFlags(fs)
			fs.String("mode", "", "free (take directly) or apply (apply, an admin approves)")
			require(fs, "mode")
		},
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			r := &roomcellv1.SetSeatModeRequest{SeatMode: str(fs, "mode")}
			r.CommandId, r.AppCode, r.RoomId, r.UserId = header(fs)
			return printReply(e, r.CommandId)(client(e).SetSeatMode(ctx, r))
		},
	})
	register(&command{
		name:  "seat apply",
		usage: "apply for mic seat --seat as --user (a room in apply mode)",
		flags: func(fs *flag.FlagSet) {
			commandFlags(fs)
			fs.Int32("seat", 0, "seat index, 0-based")
			fs.Int64("expire-after", 0, "seconds until the application expires (0 = 60, at most 300)")
			require(fs, "seat")
		},
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			r := &roomcellv1.ApplySeatRequest{Seat: i32(fs, "seat"), TimeoutSeconds: i64(fs, "expire-after")}
			r.CommandId, r.AppCode, r.RoomId, r.UserId = header(fs)
			return printReply(e, r.CommandId)(client(e).ApplySeat(ctx, r))
		},
	})
	register(&command{
		name:  "seat invite",
		usage: "invite --target to mic seat --seat (--user is the owner or an admin)",
		flags: func(fs *flag.FlagSet) {
			commandFlags(fs)
			fs.String("target", "", "user id")
			fs.Int32("seat", 0, "seat index, 0-based")
			fs.Int64("expire-after", 0, "seconds until the invitation expires (0 = 60, at most 300)")
			require(fs, "target", "seat")
		},
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			r := &roomcellv1.InviteToSeatRequest{TargetUserId: str(fs, "target"), Seat: i32(fs, "seat"), TimeoutSeconds: i64(fs, "expire-after")}
			r.CommandId, r.AppCode, r.RoomId, r.UserId = header(fs)
			return printReply(e, r.CommandId)(client(e).InviteToSeat(ctx, r))
		},
	})
	userCommand("seat cancel", "withdraw --user's pending seat application",
		func(ctx context.Context, c roomcellv1.RoomServiceClient, h reqHeader) (*roomcellv1.CommandReply, error) {
			return c.CancelSeatApplication(ctx, &roomcellv1.CancelSeatApplicationRequest{CommandId: h.id, AppCode: h.app, RoomId: h.room, UserId: h.user})
		})
	userCommand("seat accept", "accept --user's pending seat invitation (takes the seat)",
		func(ctx context.Context, c roomcellv1.RoomServiceClient, h reqHeader) (*roomcellv1.CommandReply, error) {
			return c.AcceptSeatInvitation(ctx, &roomcellv1.AcceptSeatInvitationRequest{CommandId: h.id, AppCode: h.app, RoomId: h.room, UserId: h.user})
		})
	userCommand("seat decline", "decline --user's pending seat invitation",
		func(ctx context.Context, c roomcellv1.RoomServiceClient, h reqHeader) (*roomcellv1.CommandReply, error) {
			return c.DeclineSeatInvitation(ctx, &roomcellv1.DeclineSeatInvitationRequest{CommandId: h.id, AppCode: h.app, RoomId: h.room, UserId: h.user})
		})
	targetCommand("seat approve", "approve --target's seat application, seating them (--user is the owner or an admin)",
		func(ctx context.Context, c roomcellv1.RoomServiceClient, h reqHeader, target string) (*roomcellv1.CommandReply, error) {
			return c.ApproveSeatApplication(ctx, &roomcellv1.ApproveSeatApplicationRequest{CommandId: h.id, AppCode: h.app, RoomId: h.room, UserId: h.user, TargetUserId: target})
		})
	targetCommand("seat reject", "reject --target's seat application (--user is the owner or an admin)",
		func(ctx context.Context, c roomcellv1.RoomServiceClient, h reqHeader, target string) (*roomcellv1.CommandReply, error) {
			return c.RejectSeatApplication(ctx, &roomcellv1.RejectSeatApplicationRequest{CommandId: h.id, AppCode: h.app, RoomId: h.room, UserId: h.user, TargetUserId: target})
		})
	targetCommand("seat kick", "take --target off their seat; they stay in the room (--user is the owner or an admin)",
		func(ctx context.Context, c roomcellv1.RoomServiceClient, h reqHeader, target string) (*roomcellv1.CommandReply, error) {
			return c.KickOffSeat(ctx, &roomcellv1.KickOffSeatRequest{CommandId: h.id, AppCode: h.app, RoomId: h.room, UserId: h.user, TargetUserId: target})
		})
	register(&command{
		name:  "seat move",
		usage: "move --user (or --target, moved by --user, the owner or an admin) to mic seat --seat",
		flags: func(fs *flag.FlagSet) {
			commandFlags(fs)
			fs.Int32("seat", 0, "seat index to move to, 0-based")
			fs.String("target", "", "user to move (empty = --user)")
			require(fs, "seat")
		},
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			r := &roomcellv1.MoveSeatRequest{Seat: i32(fs, "seat"), TargetUserId: str(fs, "target")}
			r.CommandId, r.AppCode, r.RoomId, r.UserId = header(fs)
			return printReply(e, r.CommandId)(client(e).MoveSeat(ctx, r))
		},
	})
	register(&command{
		name:  "seat count",
		usage: "set the room's number of mic seats to --seats; users on removed seats are taken off them (--user is the owner or an admin)",
		flags: func(fs *flag.FlagSet) {
			commandFlags(fs)
			fs.Int32("seats", 0, "mic seats, 1 to 20")
			require(fs, "seats")
		},
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			r := &roomcellv1.SetSeatCountRequest{MicSeats: i32(fs, "seats")}
			r.CommandId, r.AppCode, r.RoomId, r.UserId = header(fs)
			return printReply(e, r.CommandId)(client(e).SetSeatCount(ctx, r))
		},
	})
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

// userCommand registers a command with the common flags only.
func userCommand(name, usage string, send func(context.Context, roomcellv1.RoomServiceClient, reqHeader) (*roomcellv1.CommandReply, error)) {
	register(&command{
		name: name, usage: usage, flags: commandFlags,
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			var h reqHeader
			h.id, h.app, h.room, h.user = header(fs)
			return printReply(e, h.id)(send(ctx, client(e), h))
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
