package main

import (
	"context"
	"fmt"
	"io"

	flag "github.com/spf13/pflag"

	"github.com/hyapp/roomcell/api/roomcellv1"
)

// The contribution ranking: who sent the room the most gift value.

func init() {
	register(&command{
		name:  "ranking",
		usage: "list a room's contribution ranking (COIN sent in gifts), --period lifecycle or day, a page at a time",
		flags: func(fs *flag.FlagSet) {
			roomFlags(fs)
			fs.String("period", "lifecycle", "lifecycle (since the room was opened) or day (today in the node's room.ranking.zone)")
			fs.Int32("page-size", 0, "senders per page (0 = 20; at most 100)")
			fs.String("page-token", "", "next page token printed by the previous page")
		},
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			reply, err := client(e).ListContributors(ctx, &roomcellv1.ListContributorsRequest{AppCode: str(fs, "app"), RoomId: str(fs, "room"),
				Period: str(fs, "period"), PageSize: i32(fs, "page-size"), PageToken: str(fs, "page-token")})
			return e.show(reply, err, func(w io.Writer) {
				head := reply.GetPeriod()
				if d := reply.GetDay(); d != "" {
					head += " " + d
				}
				fmt.Fprintf(w, "%s ranking at room seq %d\n", head, reply.GetRoomSeq())
				if len(reply.GetContributors()) == 0 {
					fmt.Fprintln(w, "no gifts")
				}
				for _, c := range reply.GetContributors() {
					mark := ""
					if !c.GetExact() {
						mark = " (may miss an earlier stay's gifts)"
					}
					fmt.Fprintf(w, "%d. %s %d%s\n", c.GetRank(), c.GetUserId(), c.GetValue(), mark)
				}
				if f := reply.GetFloor(); f > 0 {
					fmt.Fprintf(w, "senders not listed sent at most %d\n", f)
				}
				if next := reply.GetNextPageToken(); next != "" {
					fmt.Fprintf(w, "more: --page-token %s\n", next)
				}
			})
		},
	})
}
