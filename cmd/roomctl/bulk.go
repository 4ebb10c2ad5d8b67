package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	flag "github.com/spf13/pflag"

	"github.com/hyapp/roomcell/api/roomcellv1"
)

// The bulk subcommands are for the hour after an outage: a filter picks
// the rows (status, app, room or recipient, time range, error text), a
// dry run counts them, and one command requeues (or skips) them all
// instead of one event id at a time.

func init() {
	timeFlags := func(fs *flag.FlagSet) {
		fs.String("since", "", "only rows created at or after this: RFC 3339 (2026-12-03T10:00:00Z) or an age (90m, 2h)")
		fs.String("until", "", "only rows created before this: RFC 3339 or an age")
		fs.String("error", "", "only rows whose last_error contains this text, case ignored (timeout, quota, 70398)")
		fs.Int32("limit", 0, "change at most this many rows, oldest first (0 = every matching row)")
		fs.Bool("dry-run", false, "count the rows the command would change, and change nothing")
	}
	outboxFlags := func(fs *flag.FlagSet) {
		fs.String("status", "", "parked or pending (default both)")
		fs.String("app", "", "only rows of this app_code")
		fs.String("room", "", "only rows of this room (needs --app)")
		timeFlags(fs)
	}
	register(&command{
		name: "outbox bulk-requeue",
		usage: "[filters] [--dry-run]: requeue every parked row, and every pending row not yet due, that the filters pick " +
			"(due now; the relay is asked to publish them)",
		flags: outboxFlags,
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			sel, err := outboxSelectorFlags(fs, time.Now())
			if err != nil {
				return err
			}
			r, err := outboxClient(e).BulkRequeueOutbox(ctx, &roomcellv1.BulkRequeueOutboxRequest{Selector: sel, DryRun: flagBool(fs, "dry-run")})
			return e.show(r, err, func(w io.Writer) {
				switch {
				case r.GetDryRun():
					fmt.Fprintf(w, "%d rows would be requeued (dry run: nothing changed)\n", r.GetCount())
				case r.GetRelayNotified():
					fmt.Fprintf(w, "%d rows requeued; the relay is publishing them now\n", r.GetCount())
				default:
					fmt.Fprintf(w, "%d rows requeued; the next poll of any relay picks them up\n", r.GetCount())
				}
			})
		},
	})
	register(&command{
		name:  "outbox bulk-skip",
		usage: "filters --reason TEXT [--operator NAME] [--dry-run]: mark every parked or pending row the filters pick done without sending it",
		flags: func(fs *flag.FlagSet) {
			outboxFlags(fs)
			fs.String("reason", "", "why the events are given up (required)")
			fs.String("operator", os.Getenv("USER"), "who gives them up (default $USER)")
			require(fs, "reason")
		},
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			sel, err := outboxSelectorFlags(fs, time.Now())
			if err != nil {
				return err
			}
			if sel.GetStatus() == "" && sel.GetAppCode() == "" && sel.GetCreatedFromMs() == 0 && sel.GetCreatedToMs() == 0 &&
				sel.GetErrorContains() == "" && sel.GetLimit() == 0 {
				return usagef("a bulk skip needs a filter (--status, --app, --room, --since, --until, --error or --limit): skipping the whole backlog is refused")
			}
			if strings.TrimSpace(str(fs, "reason")) == "" {
				return usagef("--reason is empty: skipped events are recorded with why")
			}
			r, err := outboxClient(e).BulkSkipOutbox(ctx, &roomcellv1.BulkSkipOutboxRequest{Selector: sel, DryRun: flagBool(fs, "dry-run"),
				Reason: str(fs, "reason"), Operator: str(fs, "operator")})
			return e.show(r, err, func(w io.Writer) {
				if r.GetDryRun() {
					fmt.Fprintf(w, "%d rows would be skipped (dry run: nothing changed)\n", r.GetCount())
				} else {
					fmt.Fprintf(w, "%d rows skipped by %s: they will not be sent\n", r.GetCount(), str(fs, "operator"))
				}
			})
		},
	})
	noticeFlags := func(fs *flag.FlagSet) {
		fs.String("source", "", "only this source: wallet_outbox or room_outbox")
		fs.String("app", "", "only rows of this app_code")
		fs.String("user", "", "only notices to this user")
		fs.String("event-type", "", "only this source event type (WalletBalanceChanged, ...)")
		timeFlags(fs)
	}
	register(&command{
		name:  "notice bulk-skip",
		usage: "filters --reason TEXT [--operator NAME] [--dry-run]: give up every dead letter the filters pick (skipped: never sent, no longer a dead letter)",
		flags: func(fs *flag.FlagSet) {
			noticeFlags(fs)
			fs.String("reason", "", "why the notices are given up (required)")
			fs.String("operator", os.Getenv("USER"), "who gives them up (default $USER)")
			require(fs, "reason")
		},
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			sel, err := noticeSelectorFlags(fs, time.Now())
			if err != nil {
				return err
			}
			if sel.GetSourceName() == "" && sel.GetAppCode() == "" && sel.GetUserId() == "" && sel.GetEventType() == "" &&
				sel.GetCreatedFromMs() == 0 && sel.GetCreatedToMs() == 0 && sel.GetErrorContains() == "" && sel.GetLimit() == 0 {
				return usagef("a bulk skip needs a filter (--source, --app, --user, --event-type, --since, --until, --error or --limit): skipping every dead letter is refused")
			}
			if strings.TrimSpace(str(fs, "reason")) == "" {
				return usagef("--reason is empty: skipped notices are recorded with why")
			}
			r, err := noticeClient(e).BulkSkipNotices(ctx, &roomcellv1.BulkSkipNoticesRequest{Selector: sel, DryRun: flagBool(fs, "dry-run"),
				Reason: str(fs, "reason"), Operator: str(fs, "operator")})
			return e.show(r, err, func(w io.Writer) {
				if r.GetDryRun() {
					fmt.Fprintf(w, "%d dead letters would be skipped (dry run: nothing changed)\n", r.GetCount())
				} else {
					fmt.Fprintf(w, "%d dead letters skipped by %s: they will not be sent\n", r.GetCount(), str(fs, "operator"))
				}
			})
		},
	})
	register(&command{
		name:  "notice bulk-requeue",
		usage: "[filters] [--dry-run]: take back every dead letter the filters pick (failed -> retryable, retry_count 0, requeue recorded)",
		flags: noticeFlags,
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			sel, err := noticeSelectorFlags(fs, time.Now())
			if err != nil {
				return err
			}
			r, err := noticeClient(e).BulkRequeueNotices(ctx, &roomcellv1.BulkRequeueNoticesRequest{Selector: sel, DryRun: flagBool(fs, "dry-run")})
			return e.show(r, err, func(w io.Writer) {
				switch {
				case r.GetDryRun():
					fmt.Fprintf(w, "%d dead letters would be requeued (dry run: nothing changed)\n", r.GetCount())
				case r.GetWorkerNotified():
					fmt.Fprintf(w, "%d dead letters requeued; the notice worker is sending them now\n", r.GetCount())
				default:
					fmt.Fprintf(w, "%d dead letters requeued; the next poll of any notice worker picks them up\n", r.GetCount())
				}
			})
		},
	})
}

func flagBool(fs *flag.FlagSet, name string) bool { v, _ := fs.GetBool(name); return v }

// noticeSelectorFlags reads the notice filter flags.
func noticeSelectorFlags(fs *flag.FlagSet, now time.Time) (*roomcellv1.NoticeSelector, error) {
	from, to, err := timeRangeFlags(fs, now)
	if err != nil {
		return nil, err
	}
	sel := &roomcellv1.NoticeSelector{SourceName: str(fs, "source"), AppCode: str(fs, "app"), UserId: str(fs, "user"),
		EventType: str(fs, "event-type"), CreatedFromMs: from, CreatedToMs: to, ErrorContains: str(fs, "error"), Limit: i32(fs, "limit")}
	if sel.GetLimit() < 0 {
		return nil, usagef("--limit must not be negative")
	}
	return sel, nil
}

// outboxSelectorFlags reads the outbox filter flags, refusing locally
// what the server would refuse, so the error names the flag.
func outboxSelectorFlags(fs *flag.FlagSet, now time.Time) (*roomcellv1.OutboxSelector, error) {
	from, to, err := timeRangeFlags(fs, now)
	if err != nil {
		return nil, err
	}
	sel := &roomcellv1.OutboxSelector{Status: str(fs, "status"), AppCode: str(fs, "app"), RoomId: str(fs, "room"),
		CreatedFromMs: from, CreatedToMs: to, ErrorContains: str(fs, "error"), Limit: i32(fs, "limit")}
	switch {
	case sel.Status != "" && sel.Status != "parked" && sel.Status != "pending":
		return nil, usagef("--status %q: want parked or pending (or leave it out for both)", sel.Status)
	case sel.RoomId != "" && sel.AppCode == "":
		return nil, usagef("--room needs --app: room ids are unique within an app only")
	case sel.Limit < 0:
		return nil, usagef("--limit must not be negative")
	}
	return sel, nil
}

// timeRangeFlags reads --since and --until as unix ms (0 when unset).
func timeRangeFlags(fs *flag.FlagSet, now time.Time) (from, to int64, err error) {
	if from, err = timeFlag(fs, "since", now); err != nil {
		return 0, 0, err
	}
	if to, err = timeFlag(fs, "until", now); err != nil {
		return 0, 0, err
	}
	if from != 0 && to != 0 && to <= from {
		return 0, 0, usagef("--until (%s) must be after --since (%s)", str(fs, "until"), str(fs, "since"))
	}
	return from, to, nil
}

// timeFlag parses an RFC 3339 time or an age before now ("2h").
func timeFlag(fs *flag.FlagSet, name string, now time.Time) (int64, error) {
	v := strings.TrimSpace(str(fs, name))
	if v == "" {
		return 0, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t.UnixMilli(), nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d).UnixMilli(), nil
	}
	return 0, usagef("--%s %q: want an RFC 3339 time (2026-12-03T10:00:00Z) or an age with a unit (90m, 2h)", name, v)
}
