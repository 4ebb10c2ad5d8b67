package main

import (
	"context"
	"fmt"
	"io"

	flag "github.com/spf13/pflag"

	"github.com/hyapp/roomcell/api/roomcellv1"
)

// Moderation without a kick: ban, unban, the ban list, chat mutes.

func init() {
	roomCommand("ban", "ban --target and/or --targets (at most 20) from the room for --ban seconds; members are taken out (--user is the owner or an admin)",
		func(fs *flag.FlagSet) {
			fs.String("target", "", "user id to ban")
			fs.StringSlice("targets", nil, "more user ids to ban, comma separated")
			fs.Int64("ban", 0, "seconds, 1 to 31536000")
			fs.String("reason", "", "reason (shown in the ban list)")
			require(fs, "ban")
		},
		func(fs *flag.FlagSet) *roomcellv1.BanUserRequest {
			return &roomcellv1.BanUserRequest{TargetUserId: str(fs, "target"), TargetUserIds: strs(fs, "targets"), BanSeconds: i64(fs, "ban"), Reason: str(fs, "reason")}
		},
		roomcellv1.RoomServiceClient.BanUser)
	roomCommand("unban", "lift --target's ban (--user is the owner or an admin)", targetFlag,
		func(fs *flag.FlagSet) *roomcellv1.UnbanUserRequest {
			return &roomcellv1.UnbanUserRequest{TargetUserId: str(fs, "target")}
		},
		roomcellv1.RoomServiceClient.UnbanUser)
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
					fmt.Fprintf(w, "%s banned until %d ms by %s: %q\n", b.GetUserId(), b.GetBannedUntilMs(), b.GetOperatorUserId(), b.GetReason())
				}
				if next := reply.GetNextPageToken(); next != "" {
					fmt.Fprintf(w, "more: --page-token %s\n", next)
				}
			})
		},
	})
	roomCommand("member mute", "mute --target's chat for --seconds (--user is the owner or an admin)",
		func(fs *flag.FlagSet) {
			fs.String("target", "", "member to mute")
			fs.Int64("seconds", 0, "seconds, 1 to 2592000")
			require(fs, "target", "seconds")
		},
		func(fs *flag.FlagSet) *roomcellv1.MuteMemberRequest {
			return &roomcellv1.MuteMemberRequest{TargetUserId: str(fs, "target"), MuteSeconds: i64(fs, "seconds")}
		},
		roomcellv1.RoomServiceClient.MuteMember)
	roomCommand("member unmute", "lift --target's chat mute (--user is the owner or an admin)", targetFlag,
		func(fs *flag.FlagSet) *roomcellv1.UnmuteMemberRequest {
			return &roomcellv1.UnmuteMemberRequest{TargetUserId: str(fs, "target")}
		},
		roomcellv1.RoomServiceClient.UnmuteMember)
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
