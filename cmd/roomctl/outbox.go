package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	flag "github.com/spf13/pflag"

	"github.com/hyapp/roomcell/api/roomcellv1"
)

// The outbox subcommands are for operators chasing events that did not
// reach IM: list the backlog with retry_count and last_error, show one
// envelope, and hand one row back to the relay now.

func init() {
	register(&command{
		name:  "outbox list",
		usage: "list room_outbox rows (--status pending|failed|parked|skipped|published|all) with retry_count and last_error",
		flags: func(fs *flag.FlagSet) {
			fs.String("status", "pending", "pending, failed (pending with retry_count > 0), parked (waiting for an operator), skipped, published or all")
			fs.Int32("limit", 50, "rows to show, oldest first (at most 1000)")
		},
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			r, err := outboxClient(e).ListOutbox(ctx, &roomcellv1.ListOutboxRequest{Status: str(fs, "status"), Limit: i32(fs, "limit")})
			return e.show(r, err, func(w io.Writer) { printOutboxList(w, r, time.Now()) })
		},
	})
	register(&command{
		name:  "outbox show",
		usage: "<event_id>: one room_outbox row and its envelope",
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			id, err := eventIDArg(fs)
			if err != nil {
				return err
			}
			r, err := outboxClient(e).GetOutbox(ctx, &roomcellv1.GetOutboxRequest{EventId: id})
			return e.show(r, err, func(w io.Writer) {
				printOutboxEntry(w, r.GetEntry(), time.Now())
				var pretty bytes.Buffer
				if json.Indent(&pretty, []byte(r.GetEnvelopeJson()), "", "  ") != nil {
					pretty.Reset()
					pretty.WriteString(r.GetEnvelopeJson())
				}
				fmt.Fprintf(w, "envelope:\n%s\n", pretty.String())
			})
		},
	})
	for _, name := range []string{"outbox requeue", "outbox retry"} {
		register(&command{
			name:  name,
			usage: "<event_id>: put a parked or pending row back to pending, due now, and ask the relay to publish it",
			run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
				id, err := eventIDArg(fs)
				if err != nil {
					return err
				}
				r, err := outboxClient(e).RetryOutbox(ctx, &roomcellv1.RetryOutboxRequest{EventId: id})
				return e.show(r, err, func(w io.Writer) {
					if r.GetRelayNotified() {
						fmt.Fprintf(w, "%s requeued; the relay is publishing it now\n", id)
					} else {
						fmt.Fprintf(w, "%s requeued; this node runs no relay, the next poll of any relay picks it up\n", id)
					}
					fmt.Fprintln(w, "(run 'roomctl outbox show "+id+"' to see the outcome)")
				})
			},
		})
	}
	register(&command{
		name:  "outbox skip",
		usage: "<event_id> --reason TEXT [--operator NAME]: mark a parked or pending row done without sending it (recorded who, when, why)",
		flags: func(fs *flag.FlagSet) {
			fs.String("reason", "", "why the event is given up (required)")
			fs.String("operator", os.Getenv("USER"), "who gives it up (default $USER)")
			require(fs, "reason")
		},
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			id, err := eventIDArg(fs)
			if err != nil {
				return err
			}
			if str(fs, "reason") == "" {
				return usagef("--reason is empty: a skipped event is recorded with why")
			}
			r, err := outboxClient(e).SkipOutbox(ctx, &roomcellv1.SkipOutboxRequest{EventId: id, Reason: str(fs, "reason"), Operator: str(fs, "operator")})
			return e.show(r, err, func(w io.Writer) {
				fmt.Fprintf(w, "%s skipped by %s: it will not be sent\n", id, r.GetEntry().GetResolvedBy())
			})
		},
	})
}

func outboxClient(e *env) roomcellv1.OutboxAdminClient {
	return roomcellv1.NewOutboxAdminClient(e.conn)
}

func eventIDArg(fs *flag.FlagSet) (string, error) {
	if fs.NArg() != 1 || fs.Arg(0) == "" {
		return "", usagef("want exactly one argument: the event_id")
	}
	return fs.Arg(0), nil
}

// ago renders a past unix-ms time as a rounded age; "-" for unset.
func ago(ms int64, now time.Time) string {
	if ms <= 0 {
		return "-"
	}
	d := now.Sub(time.UnixMilli(ms))
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return d.Round(time.Second).String()
	default:
		return d.Round(time.Minute).String()
	}
}

func printOutboxList(w io.Writer, r *roomcellv1.ListOutboxReply, now time.Time) {
	fmt.Fprintf(w, "pending %d", r.GetPendingTotal())
	if r.GetPendingTotal() > 0 {
		fmt.Fprintf(w, "  oldest %s old", ago(r.GetOldestPendingCreatedAtMs(), now))
	}
	fmt.Fprintln(w)
	if len(r.GetEntries()) == 0 {
		fmt.Fprintln(w, "no rows")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "EVENT_ID\tTYPE\tROOM\tSTATUS\tRETRIES\tAGE\tLEASE\tLAST_ERROR")
	for _, e := range r.GetEntries() {
		lease := "-"
		if e.GetLockedBy() != "" && e.GetLockUntilMs() > now.UnixMilli() {
			lease = e.GetLockedBy()
		}
		lastErr := e.GetLastError()
		if lastErr == "" {
			lastErr = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s/%s\t%s\t%d\t%s\t%s\t%s\n", e.GetEventId(), e.GetEventType(), e.GetAppCode(), e.GetRoomId(),
			e.GetStatus(), e.GetRetryCount(), ago(e.GetCreatedAtMs(), now), lease, strings.ReplaceAll(lastErr, "\t", " "))
	}
	tw.Flush()
	if r.GetTruncated() {
		fmt.Fprintln(w, "(only the oldest pending rows were searched for failures; more may exist)")
	}
}

func printOutboxEntry(w io.Writer, e *roomcellv1.OutboxEntry, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	row("event_id", e.GetEventId())
	row("event_type", e.GetEventType())
	row("room", fmt.Sprintf("%s/%s seq %d", e.GetAppCode(), e.GetRoomId(), e.GetRoomSeq()))
	row("status", e.GetStatus())
	row("retry_count", fmt.Sprint(e.GetRetryCount()))
	if e.GetLastError() != "" {
		row("last_error", e.GetLastError())
	}
	row("created", ago(e.GetCreatedAtMs(), now)+" ago")
	row("updated", ago(e.GetUpdatedAtMs(), now)+" ago")
	if e.GetPublishedAtMs() > 0 {
		row("published", ago(e.GetPublishedAtMs(), now)+" ago")
	}
	if e.GetStatus() == "pending" && e.GetNextRetryAtMs() > now.UnixMilli() {
		row("next_retry", "in "+time.UnixMilli(e.GetNextRetryAtMs()).Sub(now).Round(time.Second).String())
	}
	if e.GetResolvedBy() != "" {
		row("skipped", fmt.Sprintf("by %s %s ago: %s", e.GetResolvedBy(), ago(e.GetResolvedAtMs(), now), e.GetResolution()))
	}
	if e.GetLockedBy() != "" {
		state := "expired"
		if e.GetLockUntilMs() > now.UnixMilli() {
			state = "for " + time.UnixMilli(e.GetLockUntilMs()).Sub(now).Round(time.Second).String()
		}
		row("lease", e.GetLockedBy()+" ("+state+")")
	}
	tw.Flush()
}
