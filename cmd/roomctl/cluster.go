package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	flag "github.com/spf13/pflag"

	"github.com/hyapp/roomcell/api/roomcellv1"
)

// The cluster subcommands answer "what is running" and "where is this
// room" from any node: the node asked surveys every member it sees.

func init() {
	register(&command{
		name:  "cluster members",
		usage: "list the cluster members the node sees: status, rooms hosted, view size",
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			r, err := clusterClient(e).Members(ctx, &roomcellv1.ClusterMembersRequest{})
			return e.show(r, err, func(w io.Writer) { printMembers(w, r, time.Now()) })
		},
	})
	register(&command{
		name:  "room where",
		usage: "<app/room | room --app APP>: the member that owns a room, as every member computes it",
		flags: func(fs *flag.FlagSet) { fs.String("app", "", "app code (or give app/room)") },
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			app, room, err := roomArg(fs)
			if err != nil {
				return err
			}
			r, err := clusterClient(e).WhereIsRoom(ctx, &roomcellv1.WhereIsRoomRequest{AppCode: app, RoomId: room})
			return e.show(r, err, func(w io.Writer) { printWhere(w, r) })
		},
	})
}

func clusterClient(e *env) roomcellv1.ClusterAdminClient {
	return roomcellv1.NewClusterAdminClient(e.conn)
}

// roomArg reads "app/room", or "room" with --app.
func roomArg(fs *flag.FlagSet) (app, room string, err error) {
	if fs.NArg() != 1 || fs.Arg(0) == "" {
		return "", "", usagef("want exactly one argument: app/room, or room with --app")
	}
	app = str(fs, "app")
	room = fs.Arg(0)
	if a, r, ok := strings.Cut(room, "/"); ok && app == "" {
		app, room = a, r
	}
	if app == "" {
		return "", "", usagef("--app is required: give app/room or room with --app")
	}
	return app, room, nil
}

func printMembers(w io.Writer, r *roomcellv1.ClusterMembersReply, now time.Time) {
	agree := "yes"
	if !r.GetViewsAgree() {
		agree = "NO (membership is changing, or a member is partitioned)"
	}
	fmt.Fprintf(w, "provider %s  asked %s  members %d  views agree %s\n", r.GetProvider(), r.GetNodeId(), len(r.GetMembers()), agree)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tADDRESS\tSTATUS\tROOMS\tSEES\tUP\tREJOINS\tMEMBER_ID")
	for _, m := range r.GetMembers() {
		node := m.GetNodeId()
		if node == "" {
			node = "?"
		}
		if m.GetAnsweredHere() {
			node += "*"
		}
		if m.GetStatus() == "unreachable" {
			fmt.Fprintf(tw, "%s\t%s\t%s\t-\t-\t-\t-\t(%s)\n", node, m.GetAddress(), m.GetStatus(), m.GetError())
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%d\t%s\n", node, m.GetAddress(), m.GetStatus(), m.GetRooms(),
			m.GetMembersSeen(), ago(m.GetStartedAtMs(), now), m.GetRejoins(), m.GetMemberId())
	}
	tw.Flush()
}

func printWhere(w io.Writer, r *roomcellv1.WhereIsRoomReply) {
	owner := r.GetOwnerNodeId()
	if owner == "" {
		owner = "?"
	}
	fmt.Fprintf(w, "room %s/%s  owner %s at %s  member %s\n", r.GetAppCode(), r.GetRoomId(), owner, r.GetOwnerAddress(), r.GetOwnerMemberId())
	if r.GetSettled() {
		fmt.Fprintln(w, "every member that answered agrees")
		return
	}
	fmt.Fprintln(w, "members DISAGREE (membership is changing); their views:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, v := range r.GetViews() {
		if v.GetError() != "" {
			fmt.Fprintf(tw, "  %s\t(%s)\n", v.GetAddress(), v.GetError())
			continue
		}
		fmt.Fprintf(tw, "  %s\t%s\towner %s\n", v.GetNodeId(), v.GetAddress(), v.GetOwnerAddress())
	}
	tw.Flush()
}
