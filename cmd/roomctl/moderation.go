package main

import (
	"context"
	"fmt"
	"io"

	"github.com/hyapp/roomcell/api/roomcellv1"
	flag "github.com/spf13/pflag"
)

// Moderation without a kick: ban, unban, the ban list, chat mutes.

func init() {
	register(&command{
		name:  "ban",
		usage: "ban --target from the room for --ban seconds; a member is taken out (--user is the owner or an admin)",
		flags: func(fs *flag.FlagSet) {
			commandFlags(fs)
			fs.String("target", "", "user id to ban")
			fs.Int64("ban", 0, "seconds, 1 to 31536000")
			fs.String("reason", "", "reason")
			require(fs, "target", "ban")
		},
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			r := &roomcellv1.BanUserRequest{TargetUserId: str(fs, "target"), BanSeconds: i64(fs, "ban"), Reason: str(fs, "reason")}
			r.CommandId, r.AppCode, r.RoomId, r.UserId = header(fs)
			return printReply(e, r.CommandId)(client(e).BanUser(ctx, r))
		},
	})
	targetCommand("unban", "lift --target's ban (--user is the owner or an admin)",
		func(ctx context.Context, c roomcellv1.RoomServiceClient, h reqHeader, target string) (*roomcellv1.CommandReply, error) {
			return c.UnbanUser(ctx, &roomcellv1.UnbanUserRequest{CommandId: h.id, AppCode: h.app, RoomId: h.room, UserId: h.user, TargetUserId: target})
		})
	register(&command{
		name:  "bans",
		usage: "list a room's bans in force, a page at a time",
		flags: func(fs *flag.FlagSet) {
			roomFlags(fs)
			fs.Int32("page-size", 0, "bans per page (0 = 100; at most 1000)")
			fs.String("page-token", "", "next page token printed by the previous page")
		},
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			reply, err := client(e).ListBans(ctx, &roomcellv1.ListBansRequest{AppCode: str(fs, "app"), RoomId: str(fs, "room"),
				PageSize: i32(fs, "page-size"), PageToken: str(fs, "page-token")})
			return e.show(reply, err, func(w io.Writer) {
				if len(reply.GetBans()) == 0 {
					fmt.Fprintln(w, "no bans in force")
				}
				for _, b := range reply.GetBans() {
					fmt.Fprintf(w, "%s banned until %d ms\n", b.GetUserId(), b.GetBannedUntilMs())
				}
				if next := reply.GetNextPageToken(); next != "" {
					fmt.Fprintf(w, "more: --page-token %s\n", next)
				}
			})
		},
	})
	register(&command{
		name:  "member mute",
		usage: "mute --target's chat for --seconds (--user is the owner or an admin)",
		flags: func(fs *flag.FlagSet) {
			commandFlags(fs)
			fs.String("target", "", "member to mute")
			fs.Int64("seconds", 0, "seconds, 1 to 2592000")
			require(fs, "target", "seconds")
		},
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			r := &roomcellv1.MuteMemberRequest{TargetUserId: str(fs, "target"), MuteSeconds: i64(fs, "seconds")}
			r.CommandId, r.AppCode, r.RoomId, r.UserId = header(fs)
			return printReply(e, r.CommandId)(client(e).MuteMember(ctx, r))
		},
	})
	targetCommand("member unmute", "lift --target's chat mute (--user is the owner or an admin)",
		func(ctx context.Context, c roomcellv1.RoomServiceClient, h reqHeader, target string) (*roomcellv1.CommandReply, error) {
			return c.UnmuteMember(ctx, &roomcellv1.UnmuteMemberRequest{CommandId: h.id, AppCode: h.app, RoomId: h.room, UserId: h.user, TargetUserId: target})
		})
}

func init() {
	register(&command{
		name:  "gifts",
		usage: "list the gift catalog SendGift accepts",
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			reply, err := client(e).ListGifts(ctx, &roomcellv1.ListGiftsRequest{})
			return e.show(reply, err, func(w io.Writer) {
				for _, g := range reply.GetGifts() {
					fmt.Fprintf(w, "%s  price %d  heat %d\n", g.GetGiftId(), g.GetPrice(), g.GetHeat())
				}
			})
		},
	})
}
