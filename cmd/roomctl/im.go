package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	flag "github.com/spf13/pflag"

	"github.com/hyapp/roomcell/api/roomcellv1"
)

// The im subcommands repair what the rooms mirror into Tencent IM.

func init() {
	register(&command{
		name:  "im reconcile-bans",
		usage: "put the room's IM group ban list back in line with the room's bans (after an outage longer than the outbox keeps); safe to repeat",
		flags: roomFlags,
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			r, err := roomcellv1.NewImAdminClient(e.conn).ReconcileImBans(ctx, &roomcellv1.ReconcileImBansRequest{AppCode: str(fs, "app"), RoomId: str(fs, "room")})
			return e.show(r, err, func(w io.Writer) { printReconcile(w, r) })
		},
	})
}

func printReconcile(w io.Writer, r *roomcellv1.ReconcileImBansReply) {
	fmt.Fprintf(w, "room %s/%s: %d bans in force; IM: %d banned, %d unbanned\n", r.GetAppCode(), r.GetRoomId(), r.GetRoomBans(), r.GetBanned(), r.GetUnbanned())
	if len(r.GetBannedUsers()) > 0 {
		fmt.Fprintf(w, "  banned at IM:   %s\n", strings.Join(r.GetBannedUsers(), " "))
	}
	if len(r.GetUnbannedUsers()) > 0 {
		fmt.Fprintf(w, "  unbanned at IM: %s\n", strings.Join(r.GetUnbannedUsers(), " "))
	}
	if r.GetBanned()+r.GetUnbanned() == 0 {
		fmt.Fprintln(w, "  already in line: nothing changed")
	}
}
