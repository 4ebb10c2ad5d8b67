package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	flag "github.com/spf13/pflag"

	"github.com/hyapp/roomcell/api/roomcellv1"
)

// The directory subcommands read the room directory (presence, user →
// room, heat ranking) through RoomService: the hottest rooms of an app,
// and where a user is.

func init() {
	register(&command{
		name:  "rooms top",
		usage: "list an app's live rooms by heat, hottest first (--app, --limit, --page-token)",
		flags: func(fs *flag.FlagSet) {
			fs.String("app", "", "app code")
			fs.Int32("limit", 20, "rooms per page (at most 100)")
			fs.String("page-token", "", "next_page_token of the previous page")
			fs.String("category", "", "only rooms of this category")
			fs.String("owner", "", "only rooms this user owns")
			fs.String("visibility", "", "public (default); unlisted or all need --owner")
			require(fs, "app")
		},
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			r, err := client(e).ListRooms(ctx, &roomcellv1.ListRoomsRequest{
				AppCode: str(fs, "app"), PageSize: i32(fs, "limit"), PageToken: str(fs, "page-token"),
				Category: str(fs, "category"), OwnerUserId: str(fs, "owner"), Visibility: str(fs, "visibility")})
			return e.show(r, err, func(w io.Writer) { printRoomsTop(w, r) })
		},
	})
	register(&command{
		name:  "user where",
		usage: "show which room of --app --user is in, and when they were last seen",
		flags: func(fs *flag.FlagSet) {
			fs.String("app", "", "app code")
			fs.String("user", "", "user id")
			require(fs, "app", "user")
		},
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			r, err := client(e).GetUserRoom(ctx, &roomcellv1.GetUserRoomRequest{AppCode: str(fs, "app"), UserId: str(fs, "user")})
			return e.show(r, err, func(w io.Writer) { printUserWhere(w, r, time.Now()) })
		},
	})
}

func printRoomsTop(w io.Writer, r *roomcellv1.ListRoomsReply) {
	if len(r.GetRooms()) == 0 {
		fmt.Fprintf(w, "no live rooms (%d ranked)\n", r.GetTotal())
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RANK\tROOM\tNAME\tOWNER\tMEMBERS\tHEAT")
	for _, l := range r.GetRooms() {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%d\n", l.GetRank(), l.GetRoomId(), l.GetName(), l.GetOwnerUserId(), l.GetMemberCount(), l.GetHeat())
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "%d rooms ranked", r.GetTotal())
	if t := r.GetNextPageToken(); t != "" {
		fmt.Fprintf(w, "; next page: --page-token %s", t)
	}
	fmt.Fprintln(w)
}

func printUserWhere(w io.Writer, r *roomcellv1.GetUserRoomReply, now time.Time) {
	state := "offline"
	if r.GetOnline() {
		state = "online"
	}
	fmt.Fprintf(w, "user %s is in room %s/%s (%s)\n", r.GetUserId(), r.GetAppCode(), r.GetRoomId(), state)
	fmt.Fprintf(w, "  joined %s ago, last seen %s ago\n", ago(r.GetJoinedAtMs(), now), ago(r.GetLastSeenMs(), now))
}
