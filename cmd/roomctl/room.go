package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"strings"

	"github.com/hyapp/roomcell/api/roomcellv1"
	flag "github.com/spf13/pflag"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The room subcommands: one per RoomService RPC. Flags are read back from
// the flag set by name, so each command is a flag list and a request.

func init() {
	register(&command{
		name:  "create",
		usage: "create a room owned by --user",
		flags: func(fs *flag.FlagSet) {
			commandFlags(fs)
			fs.String("name", "", "room name")
			fs.Int32("seats", 0, "mic seats (0 = server default 8, at most 20)")
			require(fs, "name")
			fs.StringSlice("admins", nil, "admin user ids, comma separated")
			metaFlags(fs)
		},
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			r := &roomcellv1.CreateRoomRequest{Name: str(fs, "name"), MicSeats: i32(fs, "seats"), AdminUserIds: strs(fs, "admins"),
				Category: str(fs, "category"), Tags: strs(fs, "tags"), CoverUrl: str(fs, "cover"), Visibility: str(fs, "visibility")}
			r.CommandId, r.AppCode, r.RoomId, r.UserId = header(fs)
			return printReply(e, r.CommandId)(client(e).CreateRoom(ctx, r))
		},
	})
	register(&command{
		name:  "join",
		usage: "join --user to a room",
		flags: commandFlags,
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			r := &roomcellv1.JoinRoomRequest{}
			r.CommandId, r.AppCode, r.RoomId, r.UserId = header(fs)
			return printReply(e, r.CommandId)(client(e).JoinRoom(ctx, r))
		},
	})
	register(&command{
		name:  "leave",
		usage: "take --user out of a room",
		flags: func(fs *flag.FlagSet) {
			commandFlags(fs)
			fs.String("reason", "", `leave reason (empty = "left")`)
		},
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			r := &roomcellv1.LeaveRoomRequest{Reason: str(fs, "reason")}
			r.CommandId, r.AppCode, r.RoomId, r.UserId = header(fs)
			return printReply(e, r.CommandId)(client(e).LeaveRoom(ctx, r))
		},
	})
	register(&command{
		name:  "mic take",
		usage: "put --user on mic seat --seat",
		flags: func(fs *flag.FlagSet) {
			commandFlags(fs)
			fs.Int32("seat", 0, "seat index, 0-based")
			require(fs, "seat")
		},
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			r := &roomcellv1.TakeMicRequest{Seat: i32(fs, "seat")}
			r.CommandId, r.AppCode, r.RoomId, r.UserId = header(fs)
			return printReply(e, r.CommandId)(client(e).TakeMic(ctx, r))
		},
	})
	register(&command{
		name:  "mic release",
		usage: "free the seat --user holds",
		flags: commandFlags,
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			r := &roomcellv1.ReleaseMicRequest{}
			r.CommandId, r.AppCode, r.RoomId, r.UserId = header(fs)
			return printReply(e, r.CommandId)(client(e).ReleaseMic(ctx, r))
		},
	})
	register(&command{
		name:  "gift",
		usage: "send --count of gift --gift from --user to --to",
		flags: func(fs *flag.FlagSet) {
			commandFlags(fs)
			fs.String("to", "", "receiving user id")
			fs.String("gift", "", "gift id")
			fs.Int64("count", 1, "how many")
			require(fs, "to", "gift")
		},
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			r := &roomcellv1.SendGiftRequest{ToUserId: str(fs, "to"), GiftId: str(fs, "gift"), GiftCount: i64(fs, "count")}
			r.CommandId, r.AppCode, r.RoomId, r.UserId = header(fs)
			return printReply(e, r.CommandId)(client(e).SendGift(ctx, r))
		},
	})
	register(&command{
		name:  "kick",
		usage: "kick --target out of a room (--user is the owner or an admin)",
		flags: func(fs *flag.FlagSet) {
			commandFlags(fs)
			fs.String("target", "", "user id to kick")
			fs.Int64("ban", 0, "ban from the room for this many seconds (0 = no ban)")
			fs.String("reason", "", "reason shown to the kicked user")
			require(fs, "target")
		},
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			r := &roomcellv1.KickUserRequest{TargetUserId: str(fs, "target"), BanSeconds: i64(fs, "ban"), Reason: str(fs, "reason")}
			r.CommandId, r.AppCode, r.RoomId, r.UserId = header(fs)
			return printReply(e, r.CommandId)(client(e).KickUser(ctx, r))
		},
	})
	register(&command{
		name:  "close",
		usage: "close a room (--user is the owner or an admin)",
		flags: func(fs *flag.FlagSet) {
			commandFlags(fs)
			fs.String("reason", "", "reason")
		},
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			r := &roomcellv1.CloseRoomRequest{Reason: str(fs, "reason")}
			r.CommandId, r.AppCode, r.RoomId, r.UserId = header(fs)
			return printReply(e, r.CommandId)(client(e).CloseRoom(ctx, r))
		},
	})
	register(&command{
		name:  "meta",
		usage: "set a room's whole metadata: category, tags, cover, visibility (--user is the owner or an admin)",
		flags: func(fs *flag.FlagSet) {
			commandFlags(fs)
			metaFlags(fs)
		},
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			r := &roomcellv1.SetRoomMetadataRequest{Category: str(fs, "category"), Tags: strs(fs, "tags"), CoverUrl: str(fs, "cover"), Visibility: str(fs, "visibility")}
			r.CommandId, r.AppCode, r.RoomId, r.UserId = header(fs)
			return printReply(e, r.CommandId)(client(e).SetRoomMetadata(ctx, r))
		},
	})
	register(&command{
		name:  "reopen",
		usage: "open a closed room again under the same id (--user is its owner)",
		flags: func(fs *flag.FlagSet) {
			commandFlags(fs)
			fs.String("name", "", "new name (empty = keep)")
		},
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			r := &roomcellv1.ReopenRoomRequest{Name: str(fs, "name")}
			r.CommandId, r.AppCode, r.RoomId, r.UserId = header(fs)
			return printReply(e, r.CommandId)(client(e).ReopenRoom(ctx, r))
		},
	})
	register(&command{
		name:  "heartbeat",
		usage: "check that --user is still in a room",
		flags: commandFlags,
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			r := &roomcellv1.HeartbeatRequest{}
			r.CommandId, r.AppCode, r.RoomId, r.UserId = header(fs)
			return printReply(e, r.CommandId)(client(e).Heartbeat(ctx, r))
		},
	})
	targetCommand("admin set", "make --target an admin of the room (--user is the owner)",
		func(ctx context.Context, c roomcellv1.RoomServiceClient, h reqHeader, target string) (*roomcellv1.CommandReply, error) {
			return c.SetAdmin(ctx, &roomcellv1.SetAdminRequest{CommandId: h.id, AppCode: h.app, RoomId: h.room, UserId: h.user, TargetUserId: target})
		})
	targetCommand("admin remove", "take admin rights from --target (--user is the owner)",
		func(ctx context.Context, c roomcellv1.RoomServiceClient, h reqHeader, target string) (*roomcellv1.CommandReply, error) {
			return c.RemoveAdmin(ctx, &roomcellv1.RemoveAdminRequest{CommandId: h.id, AppCode: h.app, RoomId: h.room, UserId: h.user, TargetUserId: target})
		})
	targetCommand("owner transfer", "hand the room to --target, a member (--user is the owner)",
		func(ctx context.Context, c roomcellv1.RoomServiceClient, h reqHeader, target string) (*roomcellv1.CommandReply, error) {
			return c.TransferOwner(ctx, &roomcellv1.TransferOwnerRequest{CommandId: h.id, AppCode: h.app, RoomId: h.room, UserId: h.user, TargetUserId: target})
		})
	seatCommand("seat mute", "mute mic seat --seat; its holder stays seated (--user is the owner or an admin)",
		func(ctx context.Context, c roomcellv1.RoomServiceClient, h reqHeader, seat int32) (*roomcellv1.CommandReply, error) {
			return c.MuteSeat(ctx, &roomcellv1.MuteSeatRequest{CommandId: h.id, AppCode: h.app, RoomId: h.room, UserId: h.user, Seat: seat})
		})
	seatCommand("seat unmute", "unmute mic seat --seat (--user is the owner or an admin)",
		func(ctx context.Context, c roomcellv1.RoomServiceClient, h reqHeader, seat int32) (*roomcellv1.CommandReply, error) {
			return c.UnmuteSeat(ctx, &roomcellv1.UnmuteSeatRequest{CommandId: h.id, AppCode: h.app, RoomId: h.room, UserId: h.user, Seat: seat})
		})
	seatCommand("seat lock", "lock mic seat --seat, taking its holder off it (--user is the owner or an admin)",
		func(ctx context.Context, c roomcellv1.RoomServiceClient, h reqHeader, seat int32) (*roomcellv1.CommandReply, error) {
			return c.LockSeat(ctx, &roomcellv1.LockSeatRequest{CommandId: h.id, AppCode: h.app, RoomId: h.room, UserId: h.user, Seat: seat})
		})
	seatCommand("seat unlock", "unlock mic seat --seat (--user is the owner or an admin)",
		func(ctx context.Context, c roomcellv1.RoomServiceClient, h reqHeader, seat int32) (*roomcellv1.CommandReply, error) {
			return c.UnlockSeat(ctx, &roomcellv1.UnlockSeatRequest{CommandId: h.id, AppCode: h.app, RoomId: h.room, UserId: h.user, Seat: seat})
		})
	register(&command{
		name:  "update",
		usage: "rename a room (--name) and/or set its --announcement (--user is the owner or an admin)",
		flags: func(fs *flag.FlagSet) {
			commandFlags(fs)
			fs.String("name", "", "new room name (empty = unchanged)")
			fs.String("announcement", "", `new announcement; --announcement "" clears it (absent = unchanged)`)
		},
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			if !fs.Changed("name") && !fs.Changed("announcement") {
				return usagef("--name or --announcement is required")
			}
			r := &roomcellv1.UpdateRoomRequest{Name: str(fs, "name")}
			if fs.Changed("announcement") {
				a := str(fs, "announcement")
				r.Announcement = &a
			}
			r.CommandId, r.AppCode, r.RoomId, r.UserId = header(fs)
			return printReply(e, r.CommandId)(client(e).UpdateRoom(ctx, r))
		},
	})
	register(&command{
		name:  "get",
		usage: "show a room with one page of its members (--page-token: the next page)",
		flags: func(fs *flag.FlagSet) {
			roomFlags(fs)
			fs.Int32("page-size", 0, "members per page (0 = the server's default, 100; at most 1000)")
			fs.String("page-token", "", "next page token printed by the previous page")
		},
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			reply, err := client(e).GetRoom(ctx, &roomcellv1.GetRoomRequest{AppCode: str(fs, "app"), RoomId: str(fs, "room"),
				PageSize: i32(fs, "page-size"), PageToken: str(fs, "page-token")})
			return e.show(reply, err, func(w io.Writer) {
				printRoom(w, reply.GetRoom())
				if next := reply.GetNextPageToken(); next != "" {
					fmt.Fprintf(w, "  more members: --page-token %s\n", next)
				}
			})
		},
	})
}

func client(e *env) roomcellv1.RoomServiceClient { return roomcellv1.NewRoomServiceClient(e.conn) }

func roomFlags(fs *flag.FlagSet) {
	fs.String("app", "", "app code")
	fs.String("room", "", "room id")
	require(fs, "app", "room")
}

func commandFlags(fs *flag.FlagSet) {
	roomFlags(fs)
	fs.String("user", "", "user id sending the command")
	fs.String("command-id", "", "idempotency key (default: a new random id; pass the same one to retry)")
	require(fs, "user")
}

type reqHeader struct{ id, app, room, user string }

// sendFunc sends one command built from the common header and the
// command's one argument.
type sendFunc[A any] func(context.Context, roomcellv1.RoomServiceClient, reqHeader, A) (*roomcellv1.CommandReply, error)

// seatCommand registers one of the seat commands: the common flags plus a
// required --seat.
func seatCommand(name, usage string, send sendFunc[int32]) {
	oneArgCommand(name, usage, func(fs *flag.FlagSet) { fs.Int32("seat", 0, "seat index, 0-based") }, "seat", i32, send)
}

// targetCommand registers a command on another user: --target.
func targetCommand(name, usage string, send sendFunc[string]) {
	oneArgCommand(name, usage, func(fs *flag.FlagSet) { fs.String("target", "", "user id") }, "target", str, send)
}

func oneArgCommand[A any](name, usage string, flags func(*flag.FlagSet), arg string, get func(*flag.FlagSet, string) A, send sendFunc[A]) {
	register(&command{
		name:  name,
		usage: usage,
		flags: func(fs *flag.FlagSet) {
			commandFlags(fs)
			flags(fs)
			require(fs, arg)
		},
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			var h reqHeader
			h.id, h.app, h.room, h.user = header(fs)
			return printReply(e, h.id)(send(ctx, client(e), h, get(fs, arg)))
		},
	})
}

// header returns command_id (generated when not given), app, room, user.
func header(fs *flag.FlagSet) (commandID, app, room, user string) {
	commandID = str(fs, "command-id")
	if commandID == "" {
		commandID = newCommandID()
	}
	return commandID, str(fs, "app"), str(fs, "room"), str(fs, "user")
}

func newCommandID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // never fails on supported platforms
	return "ctl-" + hex.EncodeToString(b[:])
}

// The flags exist (the command's flags func defined them), so the lookup
// errors cannot happen.
func str(fs *flag.FlagSet, name string) string    { v, _ := fs.GetString(name); return v }
func strs(fs *flag.FlagSet, name string) []string { v, _ := fs.GetStringSlice(name); return v }
func i32(fs *flag.FlagSet, name string) int32     { v, _ := fs.GetInt32(name); return v }
func i64(fs *flag.FlagSet, name string) int64     { v, _ := fs.GetInt64(name); return v }

// rpcErr is a failed RPC, shown as "Code: message" instead of gRPC's
// "rpc error: code = ... desc = ..."; --json prints code and message apart.
type rpcErr struct {
	code codes.Code
	msg  string
}

func (e *rpcErr) Error() string { return fmt.Sprintf("%s: %s", e.code, e.msg) }

// flagOfField names, for a request field the server reports, the flag
// that fills it, so "user_id is required" reads "--user (user_id) is
// required".
var flagOfField = map[string]string{
	"app_code": "--app", "room_id": "--room", "user_id": "--user", "command_id": "--command-id",
	"to_user_id": "--to", "gift_id": "--gift", "target_user_id": "--target", "page_token": "--page-token",
	"key.source_event_id": "the event id argument", "event_id": "the event id argument",
	"selector.app_code": "--app", "selector.room_id": "--room", "selector.user_id": "--user", "selector.status": "--status",
	"selector.source_name": "--source", "selector.event_type": "--event-type", "selector.error_contains": "--error",
	"created_to_ms": "--until", "limit": "--limit",
}

// rpcError turns a gRPC status into an rpcErr.
func rpcError(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	msg := st.Message()
	if field, rest, ok := strings.Cut(msg, " "); ok && st.Code() == codes.InvalidArgument {
		if f, known := flagOfField[field]; known {
			msg = f + " (" + field + ") " + rest
		}
	}
	return &rpcErr{code: st.Code(), msg: msg}
}

// printReply returns a function taking an RPC's results, so a command
// reads as printReply(e, id)(client.X(ctx, r)).
func printReply(e *env, commandID string) func(*roomcellv1.CommandReply, error) error {
	return func(reply *roomcellv1.CommandReply, err error) error {
		return e.show(reply, err, func(w io.Writer) {
			dup := "no"
			if reply.GetDuplicate() {
				dup = "yes (command_id seen before; nothing was written)"
			}
			fmt.Fprintf(w, "seq %d  command_id %s  duplicate %s\n", reply.GetRoomSeq(), commandID, dup)
			events := "none"
			if ids := reply.GetEventIds(); len(ids) > 0 {
				events = strings.Join(ids, ", ")
			}
			if evs := reply.GetEvents(); len(evs) > 0 {
				var b strings.Builder
				for i, ev := range evs {
					if i > 0 {
						b.WriteString(", ")
					}
					fmt.Fprintf(&b, "%s %s %s", ev.GetEventId(), ev.GetEventType(), ev.GetPayload())
				}
				events = b.String()
			}
			fmt.Fprintf(w, "events: %s\n", events)
			if evs := reply.GetEvents(); len(evs) > 0 && evs[0].GetEventType() == "RoomCreated" {
				ready := "ready"
				if !reply.GetImGroupReady() {
					ready = "not ready (IM did not answer in time; the outbox creates it once IM does)"
				}
				fmt.Fprintf(w, "im group: %s\n", ready)
			}
			printRoom(w, reply.GetRoom())
		})
	}
}

// printRoom writes a compact view: one line of facts, then people.
func printRoom(w io.Writer, r *roomcellv1.RoomView) {
	if r == nil {
		fmt.Fprintln(w, "room: (none)")
		return
	}
	fmt.Fprintf(w, "room %s/%s %q  owner %s  status %s  seq %d  heat %d\n",
		r.GetAppCode(), r.GetRoomId(), r.GetName(), r.GetOwnerUserId(), r.GetStatus(), r.GetSeq(), r.GetHeat())
	if len(r.GetAdminUserIds()) > 0 {
		fmt.Fprintf(w, "  admins: %s\n", strings.Join(r.GetAdminUserIds(), ", "))
	}
	if a := r.GetAnnouncement(); a != "" {
		fmt.Fprintf(w, "  announcement: %q\n", a)
	}
	switch listed, count := len(r.GetMembers()), r.GetMemberCount(); {
	case listed == 0 && count > 0: // a command's reply: the count only
		fmt.Fprintf(w, "  members: %d (roomctl get lists them)\n", count)
	case int64(listed) == count:
		fmt.Fprintf(w, "  members (%d): %s\n", count, strings.Join(r.GetMembers(), ", "))
	default:
		fmt.Fprintf(w, "  members (%d of %d on this page): %s\n", listed, count, strings.Join(r.GetMembers(), ", "))
	}
	seats := make([]string, 0, len(r.GetSeats()))
	for _, s := range r.GetSeats() {
		u := s.GetUserId()
		if u == "" {
			u = "-"
		}
		if s.GetMuted() {
			u += "(muted)"
		}
		if s.GetLocked() {
			u += "(locked)"
		}
		seats = append(seats, fmt.Sprintf("%d:%s", s.GetSeat(), u))
	}
	fmt.Fprintf(w, "  seats: %s\n", strings.Join(seats, " "))
	if r.GetSeatMode() == "apply" || len(r.GetSeatApplications())+len(r.GetSeatInvitations()) > 0 {
		fmt.Fprintf(w, "  seat mode: %s\n", r.GetSeatMode())
		printSeatRequests(w, "seat applications", r.GetSeatApplications())
		printSeatRequests(w, "seat invitations", r.GetSeatInvitations())
	}
}

// metaFlags are a room's metadata (CreateRoom, SetRoomMetadata).
func metaFlags(fs *flag.FlagSet) {
	fs.String("category", "", "category id (empty = none)")
	fs.StringSlice("tags", nil, "tags, comma separated (at most 10)")
	fs.String("cover", "", "cover image URL (http or https)")
	fs.String("visibility", "", "public (default) or unlisted")
}
