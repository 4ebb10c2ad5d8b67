package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	flag "github.com/spf13/pflag"

	"github.com/hyapp/roomcell/api/roomcellv1"
)

// The purge subcommands show retention: each growing table's
// size, oldest row and the node's last purge round, and a dry run that
// counts what a purge would delete now. Purging itself is the node's
// worker's job; roomctl never deletes.

func init() {
	register(&command{
		name:  "purge status",
		usage: "retention per table: row estimate, oldest row, cutoff and this node's last purge round",
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			return purgeStatus(ctx, e, false)
		},
	})
	register(&command{
		name:  "purge",
		usage: "--dry-run: count, per table, the rows a purge would delete now (deletes nothing)",
		flags: func(fs *flag.FlagSet) {
			fs.Bool("dry-run", false, "count what would go; required (purging runs in the node's worker)")
		},
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			if dry, _ := fs.GetBool("dry-run"); !dry {
				return usagef("--dry-run is required: roomctl never purges: the node's purge worker does; use --dry-run to see what it would delete, or purge status")
			}
			return purgeStatus(ctx, e, true)
		},
	})
}

func purgeStatus(ctx context.Context, e *env, dryRun bool) error {
	r, err := roomcellv1.NewPurgeAdminClient(e.conn).PurgeStatus(ctx, &roomcellv1.PurgeStatusRequest{DryRun: dryRun})
	return e.show(r, err, func(w io.Writer) { printPurgeStatus(w, r, dryRun, time.Now()) })
}

func printPurgeStatus(w io.Writer, r *roomcellv1.PurgeStatusReply, dryRun bool, now time.Time) {
	state := "on"
	if !r.GetEnabled() {
		state = "off (retention.enabled: false)"
	}
	fmt.Fprintf(w, "node %s  purge worker %s\n", r.GetNodeId(), state)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	// With several room databases every one's room tables are listed,
	// each line with its database ("-": the wallet and notice tables).
	dbs := false
	for _, t := range r.GetTables() {
		dbs = dbs || t.GetRoomDb() != ""
	}
	db := func(t *roomcellv1.PurgeTableStatus) string {
		if !dbs {
			return ""
		}
		if t.GetRoomDb() == "" {
			return "-\t"
		}
		return t.GetRoomDb() + "\t"
	}
	head := "TABLE\tRETENTION\tROWS~\tOLDEST\tLAST ROUND\tLAST ROWS\tNOTE"
	if dbs {
		head = "ROOM DB\t" + head
	}
	if dryRun {
		head += "\tWOULD DELETE"
	}
	fmt.Fprintln(tw, head)
	for _, t := range r.GetTables() {
		if !t.GetHeld() {
			line := fmt.Sprintf("%s%s\t%s\t-\t-\t-\t-\tnot held on this node", db(t), t.GetTable(), time.Duration(t.GetRetentionMs())*time.Millisecond)
			if dryRun {
				line += "\t-"
			}
			fmt.Fprintln(tw, line)
			continue
		}
		note := t.GetLastRoundSkipped()
		switch {
		case t.GetStatusError() != "":
			note = "status incomplete: " + t.GetStatusError()
		case t.GetLastRoundError() != "":
			note = "error: " + t.GetLastRoundError()
		case note == "" && t.GetLastRoundAtMs() > 0 && !t.GetLastRoundDone():
			note = "backlog: continues next round"
		}
		if note == "" {
			note = "-"
		}
		line := fmt.Sprintf("%s%s\t%s\t%d\t%s\t%s ago\t%d\t%s", db(t), t.GetTable(), time.Duration(t.GetRetentionMs())*time.Millisecond,
			t.GetRowEstimate(), ago(t.GetOldestCreatedAtMs(), now), ago(t.GetLastRoundAtMs(), now), t.GetLastRoundRows(), note)
		if dryRun {
			n := strconv.FormatInt(t.GetPurgeable(), 10)
			if t.GetPurgeable() < 0 {
				n = "?"
			} else if t.GetPurgeableCapped() {
				n = ">=" + n
			}
			line += "\t" + n
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
}
