package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	flag "github.com/spf13/pflag"

	"github.com/hyapp/roomcell/api/roomcellv1"
)

// The gift reservation subcommands, for operators: list the open
// reservations, and end one the gift reconciler parked (its settlement
// kept failing, roomcell_wallet_gift_holds_parked counts them, the node's ERROR
// line names them) by confirming it (the room logged the gift: the
// sender's frozen COIN is spent and the receiver paid) or refunding it
// (the sender's COIN comes back). Both are idempotent and only one of
// them can ever happen to a reservation. The park is kept with the
// reservation in the wallet store, so any node lists and resolves it,
// and a restart does not unpark it.

func init() {
	register(&command{
		name:  "wallet hold list",
		usage: "list open gift reservations older than --older-than, oldest first (--parked: the parked ones, in park order)",
		flags: func(fs *flag.FlagSet) {
			fs.Duration("older-than", 30*time.Second, "only reservations at least this old (not with --parked)")
			fs.Int32("limit", 100, "at most this many (1..1000)")
			fs.Bool("parked", false, "list the reservations the gift reconciler parked (its settlement kept failing), which only an operator ends")
		},
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			older, _ := fs.GetDuration("older-than")
			parked, _ := fs.GetBool("parked")
			reply, err := walletClient(e).ListOpenGiftHolds(ctx, &roomcellv1.WalletListOpenGiftHoldsRequest{
				// The store lists created_at_ms < BeforeMs; "at least this old"
				// includes a reservation exactly --older-than old (with 0s, one
				// made this millisecond).
				BeforeMs: time.Now().Add(-older).UnixMilli() + 1, Limit: i32(fs, "limit"), Parked: parked})
			return e.show(reply, err, func(w io.Writer) {
				fmt.Fprintf(w, "open reservations %d  parked %d  oldest_created_at_ms %d\n", reply.GetOpen(), reply.GetParked(), reply.GetOldestCreatedAtMs())
				for _, h := range reply.GetHolds() {
					fmt.Fprintf(w, "  %s/%s  room %s  %s -> %s  %d×%s  price %d  diamond %d  created_at_ms %d",
						h.GetAppCode(), h.GetCommandId(), h.GetRoomId(), h.GetFromUserId(), h.GetToUserId(),
						h.GetGiftCount(), h.GetGiftId(), h.GetPriceTotal(), h.GetDiamondTotal(), h.GetCreatedAtMs())
					if h.GetParkedAtMs() != 0 {
						fmt.Fprintf(w, "  parked_at_ms %d  reason %q", h.GetParkedAtMs(), h.GetParkReason())
					}
					fmt.Fprintln(w)
				}
			})
		},
	})
	for _, verb := range []string{"confirm", "refund"} {
		register(&command{
			name: "wallet hold " + verb,
			usage: map[string]string{
				"confirm": "confirm the reservation of gift --command-id in --app: spend the sender's frozen COIN, pay the receiver",
				"refund":  "refund the reservation of gift --command-id in --app: the sender's frozen COIN comes back",
			}[verb],
			flags: func(fs *flag.FlagSet) {
				fs.String("app", "", "app code")
				fs.String("command-id", "", "the gift's command_id (required)")
			},
			run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
				r := &roomcellv1.WalletSettleGiftRequest{AppCode: str(fs, "app"), CommandId: str(fs, "command-id")}
				if r.CommandId == "" {
					return errors.New("--command-id is required")
				}
				settle := walletClient(e).ConfirmGift
				if verb == "refund" {
					settle = walletClient(e).RefundGift
				}
				reply, err := settle(ctx, r)
				return e.show(reply, err, func(w io.Writer) {
					fmt.Fprintf(w, "gift %s/%s %s  transaction %s\n", r.AppCode, r.CommandId, reply.GetState(), reply.GetTransactionId())
				})
			},
		})
	}
}
