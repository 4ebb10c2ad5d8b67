package main

import (
	"context"
	"fmt"
	"io"

	flag "github.com/spf13/pflag"

	"github.com/hyapp/roomcell/api/roomcellv1"
)

// The wallet subcommands, for operators: grant or top up a balance, read
// a user's balances, grant or sell VIP. Every change takes --command-id so
// a retried grant is applied once.

func init() {
	register(&command{
		name:  "wallet credit",
		usage: "add --amount of --asset to --user (top-up or admin grant)",
		flags: func(fs *flag.FlagSet) {
			walletFlags(fs, true)
			fs.String("asset", "COIN", "asset type: COIN or DIAMOND")
			fs.Int64("amount", 0, "amount in minor units, > 0")
			require(fs, "amount")
			fs.String("reason", "admin_grant", "metadata.reason of the balance event (topup, admin_grant, ...)")
		},
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			if i64(fs, "amount") <= 0 {
				return usagef("--amount must be positive")
			}
			r := &roomcellv1.WalletCreditRequest{
				CommandId: walletCommandID(fs), AppCode: str(fs, "app"), UserId: str(fs, "user"),
				AssetType: str(fs, "asset"), Amount: i64(fs, "amount"), Reason: str(fs, "reason"),
			}
			reply, err := walletClient(e).Credit(ctx, r)
			return e.show(reply, err, func(w io.Writer) {
				fmt.Fprintf(w, "credited %d %s to %s/%s  command_id %s  transaction %s%s\n",
					r.Amount, r.AssetType, r.AppCode, r.UserId, r.CommandId, reply.GetTransactionId(), dupNote(reply.GetDuplicate()))
				fmt.Fprintf(w, "available %d  balance_version %d\n", reply.GetAvailableAfter(), reply.GetBalanceVersion())
			})
		},
	})
	register(&command{
		name:  "wallet balance",
		usage: "show --user's balances and VIP state",
		flags: func(fs *flag.FlagSet) { walletFlags(fs, false) },
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			reply, err := walletClient(e).GetBalances(ctx, &roomcellv1.WalletGetBalancesRequest{AppCode: str(fs, "app"), UserId: str(fs, "user")})
			return e.show(reply, err, func(w io.Writer) {
				fmt.Fprintf(w, "wallet %s/%s\n", reply.GetAppCode(), reply.GetUserId())
				for _, a := range reply.GetAccounts() {
					fmt.Fprintf(w, "  %-8s available %d  frozen %d  balance_version %d\n",
						a.GetAssetType(), a.GetAvailable(), a.GetFrozen(), a.GetBalanceVersion())
				}
				v := reply.GetVip()
				if v.GetActiveLevel() == 0 {
					fmt.Fprintf(w, "  VIP      none (stored level %d, expired at %d)\n", v.GetLevel(), v.GetExpiresAtMs())
					return
				}
				fmt.Fprintf(w, "  VIP      level %d  started_at_ms %d  expires_at_ms %d\n", v.GetActiveLevel(), v.GetStartedAtMs(), v.GetExpiresAtMs())
			})
		},
	})
	register(&command{
		name:  "wallet vip",
		usage: "give --user VIP --level (upgrade or renew; --source vip_purchase charges COIN)",
		flags: func(fs *flag.FlagSet) {
			walletFlags(fs, true)
			fs.Int32("level", 0, "VIP level, > 0")
			require(fs, "level")
			fs.String("source", "admin_grant", "vip_purchase (pays COIN), admin_grant or activity_grant")
		},
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			if i32(fs, "level") <= 0 {
				return usagef("--level must be positive")
			}
			r := &roomcellv1.WalletPurchaseVipRequest{
				CommandId: walletCommandID(fs), AppCode: str(fs, "app"), UserId: str(fs, "user"),
				Level: i32(fs, "level"), Source: str(fs, "source"),
			}
			reply, err := walletClient(e).PurchaseVip(ctx, r)
			return e.show(reply, err, func(w io.Writer) {
				fmt.Fprintf(w, "%s %s/%s VIP%d -> %s  command_id %s  transaction %s%s\n",
					reply.GetAction(), r.AppCode, r.UserId, reply.GetPreviousLevel(), reply.GetVipName(), r.CommandId,
					reply.GetTransactionId(), dupNote(reply.GetDuplicate()))
				fmt.Fprintf(w, "started_at_ms %d  expires_at_ms %d  paid %d COIN  coin_after %d\n",
					reply.GetStartedAtMs(), reply.GetExpiresAtMs(), reply.GetPricePaid(), reply.GetCoinAfter())
			})
		},
	})
}

func walletClient(e *env) roomcellv1.WalletServiceClient {
	return roomcellv1.NewWalletServiceClient(e.conn)
}

func walletFlags(fs *flag.FlagSet, change bool) {
	fs.String("app", "", "app code")
	fs.String("user", "", "user id")
	require(fs, "app", "user")
	if change {
		fs.String("command-id", "", "idempotency key (default: a new random id; pass the same one to retry)")
	}
}

func walletCommandID(fs *flag.FlagSet) string {
	if id := str(fs, "command-id"); id != "" {
		return id
	}
	return newCommandID()
}

func dupNote(dup bool) string {
	if dup {
		return "  (duplicate: command_id seen before; nothing was written)"
	}
	return ""
}
