package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	flag "github.com/spf13/pflag"

	"github.com/hyapp/roomcell/api/roomcellv1"
)

// The notice subcommands are for operators chasing private notices that
// did not reach a user (seed 003): list the dead letters, show one
// notice's delivery state and payload, and requeue a dead letter.

func init() {
	register(&command{
		name:  "notice list",
		usage: "list notice_delivery_events rows (--status failed|retryable|delivering|delivered|all) with retry_count and last_error",
		flags: func(fs *flag.FlagSet) {
			fs.String("status", "failed", "failed (dead letters), retryable, delivering, delivered, skipped (given up by an operator) or all")
			fs.String("source", "", "only this source: wallet_outbox or room_outbox")
			fs.Int32("limit", 50, "rows to show (at most 1000)")
		},
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			r, err := noticeClient(e).ListNotices(ctx, &roomcellv1.ListNoticesRequest{Status: str(fs, "status"),
				SourceName: str(fs, "source"), Limit: i32(fs, "limit")})
			return e.show(r, err, func(w io.Writer) { printNoticeList(w, r.GetEntries(), time.Now()) })
		},
	})
	keyFlags := func(fs *flag.FlagSet) {
		fs.String("source", "", "source_name, when the event id is not enough (wallet_outbox, room_outbox)")
		fs.String("app", "", "app_code, when the event id is not enough")
		fs.String("channel", "", "channel, when the event id is not enough (im_c2c)")
	}
	key := func(fs *flag.FlagSet) (*roomcellv1.NoticeKey, error) {
		id, err := eventIDArg(fs)
		if err != nil {
			return nil, err
		}
		return &roomcellv1.NoticeKey{SourceEventId: id, SourceName: str(fs, "source"), AppCode: str(fs, "app"), Channel: str(fs, "channel")}, nil
	}
	register(&command{
		name:  "notice show",
		usage: "<source_event_id>: the notice rows of one event, with their client payload",
		flags: keyFlags,
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			k, err := key(fs)
			if err != nil {
				return err
			}
			r, err := noticeClient(e).GetNotice(ctx, &roomcellv1.GetNoticeRequest{Key: k})
			return e.show(r, err, func(w io.Writer) {
				for i, n := range r.GetEntries() {
					if i > 0 {
						fmt.Fprintln(w)
					}
					printNoticeEntry(w, n, time.Now())
				}
			})
		},
	})
	register(&command{
		name:  "notice requeue",
		usage: "<source_event_id>: take a dead letter back (failed -> retryable, retry_count 0, requeue recorded)",
		flags: keyFlags,
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			k, err := key(fs)
			if err != nil {
				return err
			}
			r, err := noticeClient(e).RequeueNotice(ctx, &roomcellv1.RequeueNoticeRequest{Key: k})
			return e.show(r, err, func(w io.Writer) {
				n := r.GetEntry()
				fmt.Fprintf(w, "%s requeued (requeue #%d): %s, due now\n", n.GetSourceEventId(), n.GetRequeueCount(), n.GetStatus())
				if r.GetWorkerNotified() {
					fmt.Fprintln(w, "the notice worker is sending it now")
				} else {
					fmt.Fprintln(w, "this node runs no worker of "+n.GetSourceName()+"; the next poll of any notice worker picks it up")
				}
				fmt.Fprintln(w, "(run 'roomctl notice show "+n.GetSourceEventId()+"' to see the outcome)")
			})
		},
	})
}

func noticeClient(e *env) roomcellv1.NoticeAdminClient {
	return roomcellv1.NewNoticeAdminClient(e.conn)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return strings.ReplaceAll(s, "\t", " ")
}

func printNoticeList(w io.Writer, entries []*roomcellv1.NoticeEntry, now time.Time) {
	if len(entries) == 0 {
		fmt.Fprintln(w, "no rows")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SOURCE_EVENT_ID\tSOURCE\tAPP\tUSER\tEXT\tSTATUS\tRETRIES\tAGE\tNEXT\tLAST_ERROR")
	for _, n := range entries {
		next := "-"
		if n.GetStatus() == "retryable" || n.GetStatus() == "delivering" {
			if d := time.UnixMilli(n.GetNextRetryAtMs()).Sub(now); d > 0 {
				next = "in " + d.Round(time.Second).String()
			} else {
				next = "due"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", n.GetSourceEventId(), n.GetSourceName(), n.GetAppCode(),
			orDash(n.GetUserId()), n.GetExt(), n.GetStatus(), n.GetRetryCount(), ago(n.GetSourceCreatedAtMs(), now), next, orDash(n.GetLastError()))
	}
	tw.Flush()
}

func printNoticeEntry(w io.Writer, n *roomcellv1.NoticeEntry, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	row("source_event_id", n.GetSourceEventId())
	row("source", fmt.Sprintf("%s (app %s, channel %s, via %s)", n.GetSourceName(), n.GetAppCode(), n.GetChannel(), n.GetIngress()))
	row("event_type", n.GetEventType())
	row("to", fmt.Sprintf("user %s, ext %s", orDash(n.GetUserId()), n.GetExt()))
	row("status", n.GetStatus())
	row("retry_count", fmt.Sprint(n.GetRetryCount()))
	if n.GetLastError() != "" {
		row("last_error", n.GetLastError())
	}
	row("source event", ago(n.GetSourceCreatedAtMs(), now)+" ago")
	row("updated", ago(n.GetUpdatedAtMs(), now)+" ago")
	if n.GetDeliveredAtMs() > 0 {
		row("delivered", ago(n.GetDeliveredAtMs(), now)+" ago")
	}
	if n.GetStatus() == "retryable" {
		row("next retry", time.UnixMilli(n.GetNextRetryAtMs()).UTC().Format(time.RFC3339))
	}
	if n.GetLockedBy() != "" {
		state := "expired"
		if n.GetLockUntilMs() > now.UnixMilli() {
			state = "for " + time.UnixMilli(n.GetLockUntilMs()).Sub(now).Round(time.Second).String()
		}
		row("lease", n.GetLockedBy()+" ("+state+")")
	}
	if n.GetRequeueCount() > 0 {
		row("requeued", fmt.Sprintf("%d times, last %s ago", n.GetRequeueCount(), ago(n.GetRequeuedAtMs(), now)))
	}
	tw.Flush()
	var pretty bytes.Buffer
	if json.Indent(&pretty, []byte(n.GetPayloadJson()), "", "  ") != nil {
		pretty.Reset()
		pretty.WriteString(n.GetPayloadJson())
	}
	fmt.Fprintf(w, "payload:\n%s\n", pretty.String())
}
