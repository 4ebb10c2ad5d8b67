package main

import (
	"context"
	"fmt"
	"io"
	"time"

	flag "github.com/spf13/pflag"

	"github.com/hyapp/roomcell/api/roomcellv1"
)

// The join ticket: what a user needs to enter the room's audio room.

func init() {
	register(&command{
		name:  "ticket",
		usage: "show --user's join ticket to the room's audio room (TRTC room id, rights, expiry; --keys prints the UserSig and PrivateMapKey)",
		flags: func(fs *flag.FlagSet) {
			roomFlags(fs)
			fs.String("user", "", "user id")
			fs.Bool("keys", false, "print the UserSig and PrivateMapKey too (they are credentials)")
			require(fs, "user")
		},
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			reply, err := client(e).GetJoinTicket(ctx, &roomcellv1.GetJoinTicketRequest{AppCode: str(fs, "app"), RoomId: str(fs, "room"), UserId: str(fs, "user")})
			return e.show(reply, err, func(w io.Writer) {
				fmt.Fprintf(w, "trtc room %s (sdk app %d), room seq %d\n", reply.GetTrtcRoomId(), reply.GetSdkAppId(), reply.GetRoomSeq())
				fmt.Fprintf(w, "privileges %d: enter, receive audio", reply.GetPrivileges())
				if reply.GetSendAudio() {
					fmt.Fprintf(w, ", send audio (seat %d)", reply.GetSeat())
				}
				fmt.Fprintln(w)
				if reply.GetExpiresAtMs() == 0 {
					fmt.Fprintln(w, "unsigned: this deployment holds no trtc.sig_key")
					return
				}
				fmt.Fprintf(w, "expires %s\n", time.UnixMilli(reply.GetExpiresAtMs()).UTC().Format(time.RFC3339))
				if b, _ := fs.GetBool("keys"); b {
					fmt.Fprintf(w, "user_sig %s\nprivate_map_key %s\n", reply.GetUserSig(), reply.GetPrivateMapKey())
				}
			})
		},
	})
}
