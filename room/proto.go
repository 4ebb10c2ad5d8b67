package room

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/errclass"
)

// header is the part every request of the grain protocol carries.
type header interface {
	proto.Message
	GetCommandId() string
	GetRequestId() string
	GetAppCode() string
	GetRoomId() string
	GetUserId() string
}

// Request returns the request message set in rc's oneof, or nil.
//
// Every case of a generated oneof is a struct whose one field is the
// case's value (protobuf-go's own reflection reads it as Field(0) too), so
// the request is one field load through Go's reflect. protoreflect's
// WhichOneof asks each of the oneof's ~40 cases in turn; that was ~0.8 µs
// a call, and a command is read this way two to four times on its path.
func Request(rc *v1.RoomCommand) proto.Message {
	c := rc.GetCommand()
	if c == nil {
		return nil
	}
	m, _ := reflect.ValueOf(c).Elem().Field(0).Interface().(proto.Message)
	return m
}

// CommandFromProto turns the grain protocol's command into a domain
// command decided at nowMs. ok is false for an empty oneof, GetRoom, or a
// request type the command table does not know. The header is read here
// for every type; the table's fill reads the rest.
func CommandFromProto(rc *v1.RoomCommand, nowMs int64) (Command, bool) {
	req := Request(rc)
	if req == nil {
		return Command{}, false
	}
	return commandFrom(req, typeOf(req), nowMs)
}

// typeOf is the command type (or query name) of a request: its message's
// name without "Request".
func typeOf(req proto.Message) string {
	return strings.TrimSuffix(string(req.ProtoReflect().Descriptor().Name()), "Request")
}

func commandFrom(m proto.Message, typ string, nowMs int64) (Command, bool) {
	req, ok := m.(header)
	if !ok {
		return Command{}, false
	}
	k, ok := commands[typ]
	if !ok {
		return Command{}, false
	}
	c := Command{
		Type: typ, CommandID: req.GetCommandId(), RequestID: req.GetRequestId(),
		AppCode: req.GetAppCode(), RoomID: req.GetRoomId(), UserID: req.GetUserId(), NowMs: nowMs,
	}
	if k.fill == nil {
		return c, true
	}
	// A row's fill writes through a pointer the compiler cannot follow,
	// which put every decoded command (~600 B) on the heap, twice per
	// command (the edge's check, the grain's decode); a pooled one is
	// filled and copied out instead.
	p := commandPool.Get().(*Command)
	*p = c
	k.fill(req, p)
	c = *p
	*p = Command{} // drops the request's slices and maps
	commandPool.Put(p)
	return c, true
}

var commandPool = sync.Pool{New: func() any { return new(Command) }}

// KeyOf returns the app_code and room_id a command addresses.
func KeyOf(rc *v1.RoomCommand) (appCode, roomID string) {
	a, ok := Request(rc).(interface {
		GetAppCode() string
		GetRoomId() string
	})
	if !ok {
		return "", ""
	}
	return a.GetAppCode(), a.GetRoomId()
}

// ClientCommand is a client's request to a room as the edge needs it,
// read once (ParseClientCommand): the request, its type, the room it
// addresses, its user and its rate class from the command table.
type ClientCommand struct {
	// Type is the command type, or the query's name (GetRoom, ListBans,
	// ListContributors, GetJoinTicket).
	Type    string
	Request proto.Message
	AppCode string
	RoomID  string
	// UserID is the acting user; "" for a query that names none.
	UserID string
	// Rate is the rate class (RateClassOf).
	Rate string
}

// ParseClientCommand reads a command from a client once and checks it as
// CheckClientCommand does.
func ParseClientCommand(rc *v1.RoomCommand) (ClientCommand, error) {
	req := Request(rc)
	if req == nil {
		return ClientCommand{}, errclass.Invalidf("empty or unknown command")
	}
	typ := typeOf(req)
	p := ClientCommand{Type: typ, Request: req, Rate: RateClassOf(typ)}
	if a, ok := req.(interface {
		GetAppCode() string
		GetRoomId() string
	}); ok {
		p.AppCode, p.RoomID = a.GetAppCode(), a.GetRoomId()
	}
	if u, ok := req.(interface{ GetUserId() string }); ok {
		p.UserID = u.GetUserId()
	}
	return p, checkClient(req, typ)
}

// CheckClientCommand checks a command from a client before it is sent to
// its room: the same checks Decide makes before it looks at the room (one
// implementation, validate), plus the rules only clients must pass (the
// room's workers send system leave reasons and reserved command ids
// through the internal path, which does not call this). Every error is
// errclass.Invalid naming the field.
func CheckClientCommand(rc *v1.RoomCommand) error {
	_, err := ParseClientCommand(rc)
	return err
}

func checkClient(req proto.Message, typ string) error {
	switch r := req.(type) {
	case *v1.GetJoinTicketRequest:
		if err := checkQueryIDs(r.GetAppCode(), r.GetRoomId(), r.GetRequestId()); err != nil {
			return err
		}
		return checkID("user_id", r.GetUserId())
	case *v1.ListContributorsRequest:
		_, err := ParseContributors(r)
		return err
	case *v1.ListBansRequest:
		if err := checkQueryIDs(r.GetAppCode(), r.GetRoomId(), r.GetRequestId()); err != nil {
			return err
		}
		_, err := ParseBansPage(r)
		return err
	case *v1.GetRoomRequest:
		if err := checkID("app_code", r.GetAppCode()); err != nil {
			return err
		}
		if err := checkID("room_id", r.GetRoomId()); err != nil {
			return err
		}
		if id := r.GetRequestId(); id != "" {
			if err := checkID("request_id", id); err != nil {
				return err
			}
		}
		_, err := ParseMembersPage(r)
		return err
	}
	cmd, ok := commandFrom(req, typ, 0)
	if !ok {
		return errclass.Invalidf("empty or unknown command")
	}
	k, err := validate(cmd)
	if err != nil {
		return err
	}
	if err := checkClientCommandID(cmd); err != nil {
		return err
	}
	if k.client != nil {
		return k.client(cmd)
	}
	return nil
}

// Summary is the room without its member list (member_count counts
// them): what a command's reply carries, so a reply costs the same in a
// room of ten members or ten thousand.
func Summary(s State) *v1.RoomView {
	v := &v1.RoomView{
		AppCode:      s.AppCode,
		RoomId:       s.RoomID,
		OwnerUserId:  s.Owner,
		Name:         s.Name,
		Status:       s.Status,
		Seq:          s.Seq,
		AdminUserIds: append([]string(nil), s.Admins...),
		Heat:         s.Heat,
		CreatedAtMs:  s.CreatedAtMs,
		Announcement: s.Announcement,
		MemberCount:  int64(len(s.Members)),
		SeatMode:     s.seatMode(),
		AllMicsMuted: s.AllMicsMuted(),
		Likes:        s.Likes(),
		ChatDisabled: s.ChatDisabled(),
	}
	if m := s.Metadata(); !m.zero() {
		v.Category, v.Tags, v.CoverUrl = m.Category, append([]string(nil), m.Tags...), m.CoverURL
	}
	v.Visibility = VisibilityOf(s.Metadata().Visibility)
	v.SeatApplications = SeatRequestViews(s.Applications())
	v.SeatInvitations = SeatRequestViews(s.Invitations())
	for _, u := range slices.Sorted(maps.Keys(s.x().Mutes)) {
		v.MutedMembers = append(v.MutedMembers, &v1.MutedMember{UserId: u, MutedUntilMs: s.x().Mutes[u]})
	}
	// Every reply carries the seats: one block for all of them instead of
	// one allocation a seat and the slice growing four times (~700 bytes a
	// command for eight seats).
	if len(s.Seats) == 0 {
		return v
	}
	seats := make([]v1.Seat, len(s.Seats))
	v.Seats = make([]*v1.Seat, len(s.Seats))
	for i, u := range s.Seats {
		seats[i].Seat, seats[i].UserId, seats[i].Muted, seats[i].Locked = int32(i), u, s.SeatMuted(i), s.SeatLocked(i)
		v.Seats[i] = &seats[i]
	}
	return v
}

// View is the whole room, every member listed in order: GetRoom's answer
// for a room that fits one page, and what tests compare a room with.
func View(s State) *v1.RoomView {
	v := Details(Summary(s), s)
	v.Members = s.SortedMembers()
	return v
}

// Details adds to a room's summary what GetRoom shows and command
// replies leave out (they would cost up to MaxCustomInfoLen each): the
// custom info.
func Details(v *v1.RoomView, s State) *v1.RoomView {
	v.CustomInfo = maps.Clone(s.CustomInfo())
	v.HasPassword = s.HasPassword()
	return v
}

// SeatRequestViews lists pending seat requests by user id; nil for none.
func SeatRequestViews(m map[string]SeatRequest) []*v1.SeatRequest {
	if len(m) == 0 {
		return nil
	}
	out := make([]*v1.SeatRequest, 0, len(m))
	for _, u := range slices.Sorted(maps.Keys(m)) {
		r := m[u]
		out = append(out, &v1.SeatRequest{UserId: u, Seat: int32(r.Seat), OperatorUserId: r.OperatorUserID, ExpiresAtMs: r.ExpiresAtMs})
	}
	return out
}

func checkQueryIDs(appCode, roomID, requestID string) error {
	if err := checkID("app_code", appCode); err != nil {
		return err
	}
	if err := checkID("room_id", roomID); err != nil {
		return err
	}
	if requestID != "" {
		return checkID("request_id", requestID)
	}
	return nil
}
