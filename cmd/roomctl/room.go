package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	flag "github.com/spf13/pflag"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/hyapp/roomcell/api/roomcellv1"
)

// The room subcommands: one per RoomService RPC. Flags are read back from
// the flag set by name, so each command is a flag list and a request.

func init() {
	roomCommand("create", "create a room owned by --user",
		func(fs *flag.FlagSet) {
			fs.String("name", "", "room name")
			fs.Int32("seats", 0, "mic seats (0 = server default 8, at most 20)")
			require(fs, "name")
			fs.StringSlice("admins", nil, "admin user ids, comma separated")
			metaFlags(fs)
		},
		func(fs *flag.FlagSet) *roomcellv1.CreateRoomRequest {
			return &roomcellv1.CreateRoomRequest{Name: str(fs, "name"), MicSeats: i32(fs, "seats"), AdminUserIds: strs(fs, "admins"),
				Category: str(fs, "category"), Tags: strs(fs, "tags"), CoverUrl: str(fs, "cover"), Visibility: str(fs, "visibility")}
		},
		roomcellv1.RoomServiceClient.CreateRoom)
	roomCommand("join", "join --user to a room (--password when it has one)",
		func(fs *flag.FlagSet) {
			fs.String("password", "", "the room's password (the owner and admins need none)")
		},
		func(fs *flag.FlagSet) *roomcellv1.JoinRoomRequest {
			return &roomcellv1.JoinRoomRequest{Password: str(fs, "password")}
		},
		roomcellv1.RoomServiceClient.JoinRoom)
	roomCommand("leave", "take --user out of a room",
		func(fs *flag.FlagSet) {
			fs.String("reason", "", `leave reason (empty = "left")`)
		},
		func(fs *flag.FlagSet) *roomcellv1.LeaveRoomRequest {
			return &roomcellv1.LeaveRoomRequest{Reason: str(fs, "reason")}
		},
		roomcellv1.RoomServiceClient.LeaveRoom)
	roomCommand("mic take", "put --user on mic seat --seat", seatFlag,
		func(fs *flag.FlagSet) *roomcellv1.TakeMicRequest {
			return &roomcellv1.TakeMicRequest{Seat: i32(fs, "seat")}
		},
		roomcellv1.RoomServiceClient.TakeMic)
	roomCommand("mic release", "free the seat --user holds", nil, nil, roomcellv1.RoomServiceClient.ReleaseMic)
	roomCommand("gift", "send --count of gift --gift from --user to --to",
		func(fs *flag.FlagSet) {
			fs.String("to", "", "receiving user id")
			fs.String("gift", "", "gift id")
			fs.Int64("count", 1, "how many")
			require(fs, "to", "gift")
		},
		func(fs *flag.FlagSet) *roomcellv1.SendGiftRequest {
			return &roomcellv1.SendGiftRequest{ToUserId: str(fs, "to"), GiftId: str(fs, "gift"), GiftCount: i64(fs, "count")}
		},
		roomcellv1.RoomServiceClient.SendGift)
	roomCommand("kick", "kick --target out of a room (--user is the owner or an admin)",
		func(fs *flag.FlagSet) {
			fs.String("target", "", "user id to kick")
			fs.Int64("ban", 0, "ban from the room for this many seconds (0 = no ban)")
			fs.String("reason", "", "reason shown to the kicked user")
			require(fs, "target")
		},
		func(fs *flag.FlagSet) *roomcellv1.KickUserRequest {
			return &roomcellv1.KickUserRequest{TargetUserId: str(fs, "target"), BanSeconds: i64(fs, "ban"), Reason: str(fs, "reason")}
		},
		roomcellv1.RoomServiceClient.KickUser)
	roomCommand("close", "close a room (--user is the owner or an admin)",
		func(fs *flag.FlagSet) {
			fs.String("reason", "", "reason")
		},
		func(fs *flag.FlagSet) *roomcellv1.CloseRoomRequest {
			return &roomcellv1.CloseRoomRequest{Reason: str(fs, "reason")}
		},
		roomcellv1.RoomServiceClient.CloseRoom)
	roomCommand("meta", "set a room's whole metadata: category, tags, cover, visibility (--user is the owner or an admin)", metaFlags,
		func(fs *flag.FlagSet) *roomcellv1.SetRoomMetadataRequest {
			return &roomcellv1.SetRoomMetadataRequest{Category: str(fs, "category"), Tags: strs(fs, "tags"), CoverUrl: str(fs, "cover"), Visibility: str(fs, "visibility")}
		},
		roomcellv1.RoomServiceClient.SetRoomMetadata)
	roomCommand("info", "set (--set k=v,...) and delete (--delete k,...) keys of a room's custom info (--user is the owner or an admin)",
		func(fs *flag.FlagSet) {
			fs.StringToString("set", nil, "keys to set, k=v comma separated")
			fs.StringSlice("delete", nil, "keys to delete, comma separated")
		},
		func(fs *flag.FlagSet) *roomcellv1.SetRoomCustomInfoRequest {
			set, _ := fs.GetStringToString("set")
			return &roomcellv1.SetRoomCustomInfoRequest{Set: set, DeleteKeys: strs(fs, "delete")}
		},
		roomcellv1.RoomServiceClient.SetRoomCustomInfo)
	roomCommand("chat", "disable chat for everyone but the owner and admins (--off), or enable it again (--user is the owner or an admin)",
		func(fs *flag.FlagSet) {
			fs.Bool("off", false, "disable chat for all (false: enable it again)")
		},
		func(fs *flag.FlagSet) *roomcellv1.SetChatDisabledRequest {
			off, _ := fs.GetBool("off")
			return &roomcellv1.SetChatDisabledRequest{Disabled: off}
		},
		roomcellv1.RoomServiceClient.SetChatDisabled)
	roomCommand("mics", "turn the room's all-mics-muted switch --on or off (--user is the owner or an admin)",
		func(fs *flag.FlagSet) {
			fs.Bool("on", false, "mute every seat (false: unmute the seats the switch muted)")
		},
		func(fs *flag.FlagSet) *roomcellv1.SetAllMicsMutedRequest {
			on, _ := fs.GetBool("on")
			return &roomcellv1.SetAllMicsMutedRequest{Muted: on}
		},
		roomcellv1.RoomServiceClient.SetAllMicsMuted)
	roomCommand("like", "send --count likes to the room (--user is a member); answered when the room's like window is stored",
		func(fs *flag.FlagSet) {
			fs.Int64("count", 1, "likes in this call (1 to 100)")
		},
		func(fs *flag.FlagSet) *roomcellv1.LikeRoomRequest {
			n, _ := fs.GetInt64("count")
			return &roomcellv1.LikeRoomRequest{Count: n}
		},
		roomcellv1.RoomServiceClient.LikeRoom)
	roomCommand("password", "set (--password) or --clear the room's password (--user is the owner or an admin)",
		func(fs *flag.FlagSet) {
			fs.String("password", "", "the new password (1 to 64 bytes)")
			fs.Bool("clear", false, "remove the password")
		},
		func(fs *flag.FlagSet) *roomcellv1.SetRoomPasswordRequest {
			clear, _ := fs.GetBool("clear")
			return &roomcellv1.SetRoomPasswordRequest{Password: str(fs, "password"), Clear: clear}
		},
		roomcellv1.RoomServiceClient.SetRoomPassword)
	roomCommand("reopen", "open a closed room again under the same id (--user is its owner)",
		func(fs *flag.FlagSet) {
			fs.String("name", "", "new name (empty = keep)")
		},
		func(fs *flag.FlagSet) *roomcellv1.ReopenRoomRequest {
			return &roomcellv1.ReopenRoomRequest{Name: str(fs, "name")}
		},
		roomcellv1.RoomServiceClient.ReopenRoom)
	roomCommand("heartbeat", "check that --user is still in a room", nil, nil, roomcellv1.RoomServiceClient.Heartbeat)
	roomCommand("admin set", "make --target an admin of the room (--user is the owner)", targetFlag,
		func(fs *flag.FlagSet) *roomcellv1.SetAdminRequest {
			return &roomcellv1.SetAdminRequest{TargetUserId: str(fs, "target")}
		},
		roomcellv1.RoomServiceClient.SetAdmin)
	roomCommand("admin remove", "take admin rights from --target (--user is the owner)", targetFlag,
		func(fs *flag.FlagSet) *roomcellv1.RemoveAdminRequest {
			return &roomcellv1.RemoveAdminRequest{TargetUserId: str(fs, "target")}
		},
		roomcellv1.RoomServiceClient.RemoveAdmin)
	roomCommand("owner transfer", "hand the room to --target, a member (--user is the owner)", targetFlag,
		func(fs *flag.FlagSet) *roomcellv1.TransferOwnerRequest {
			return &roomcellv1.TransferOwnerRequest{TargetUserId: str(fs, "target")}
		},
		roomcellv1.RoomServiceClient.TransferOwner)
	roomCommand("seat mute", "mute mic seat --seat; its holder stays seated (--user is the owner or an admin)", seatFlag,
		func(fs *flag.FlagSet) *roomcellv1.MuteSeatRequest {
			return &roomcellv1.MuteSeatRequest{Seat: i32(fs, "seat")}
		},
		roomcellv1.RoomServiceClient.MuteSeat)
	roomCommand("seat unmute", "unmute mic seat --seat (--user is the owner or an admin)", seatFlag,
		func(fs *flag.FlagSet) *roomcellv1.UnmuteSeatRequest {
			return &roomcellv1.UnmuteSeatRequest{Seat: i32(fs, "seat")}
		},
		roomcellv1.RoomServiceClient.UnmuteSeat)
	roomCommand("seat lock", "lock mic seat --seat, taking its holder off it (--user is the owner or an admin)", seatFlag,
		func(fs *flag.FlagSet) *roomcellv1.LockSeatRequest {
			return &roomcellv1.LockSeatRequest{Seat: i32(fs, "seat")}
		},
		roomcellv1.RoomServiceClient.LockSeat)
	roomCommand("seat unlock", "unlock mic seat --seat (--user is the owner or an admin)", seatFlag,
		func(fs *flag.FlagSet) *roomcellv1.UnlockSeatRequest {
			return &roomcellv1.UnlockSeatRequest{Seat: i32(fs, "seat")}
		},
		roomcellv1.RoomServiceClient.UnlockSeat)
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

// roomCommand registers a command a user sends to a room: the common
// flags plus flags (may be nil), a request build makes from the flags
// (nil: an empty one) with its header (command_id, app_code, room_id,
// user_id) filled from the common flags, and send, the RoomService
// method; the reply is printed by printReply.
func roomCommand[R proto.Message](name, usage string, flags func(*flag.FlagSet), build func(*flag.FlagSet) R,
	send func(roomcellv1.RoomServiceClient, context.Context, R, ...grpc.CallOption) (*roomcellv1.CommandReply, error)) {
	var zero R
	fields := zero.ProtoReflect().Descriptor().Fields()
	for _, f := range headerFields {
		if fd := fields.ByName(f); fd == nil || fd.Kind() != protoreflect.StringKind {
			panic("roomctl: " + name + ": the request has no string field " + string(f)) // not a room command
		}
	}
	register(&command{
		name:  name,
		usage: usage,
		flags: func(fs *flag.FlagSet) {
			commandFlags(fs)
			if flags != nil {
				flags(fs)
			}
		},
		run: func(ctx context.Context, e *env, fs *flag.FlagSet) error {
			r := zero.ProtoReflect().New().Interface().(R)
			if build != nil {
				r = build(fs)
			}
			id, app, room, user := header(fs)
			m := r.ProtoReflect()
			for i, v := range []string{id, app, room, user} {
				m.Set(fields.ByName(headerFields[i]), protoreflect.ValueOfString(v))
			}
			return printReply(e, id)(send(client(e), ctx, r))
		},
	})
}

// headerFields are the fields every room command request has, in the
// order header returns them.
var headerFields = []protoreflect.Name{"command_id", "app_code", "room_id", "user_id"}

// targetFlag and seatFlag are the one argument of many room commands.
func targetFlag(fs *flag.FlagSet) {
	fs.String("target", "", "user id")
	require(fs, "target")
}

func seatFlag(fs *flag.FlagSet) {
	fs.Int32("seat", 0, "seat index, 0-based")
	require(fs, "seat")
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
	// reason is the server's error code name (the ErrorInfo detail of
	// domain "roomcell": BANNED, NOT_MEMBER, ...); "" when it sent none.
	reason string
	// meta is that detail's metadata (docs/errors.md).
	meta map[string]string
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
	e := &rpcErr{code: st.Code(), msg: msg}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == "roomcell" {
			e.reason, e.meta = info.GetReason(), info.GetMetadata()
		}
	}
	return e
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
	for _, k := range slices.Sorted(maps.Keys(r.GetCustomInfo())) {
		fmt.Fprintf(w, "  info %s: %q\n", k, r.GetCustomInfo()[k])
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
