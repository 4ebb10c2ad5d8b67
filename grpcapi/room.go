package grpcapi

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/hyapp/roomcell/actors/room"
	"github.com/hyapp/roomcell/grpcapi/roomcellv1"
)

// RoomBackend executes a validated room command at the room's grain. Its
// errors carry a class of actors/room (room.ClassOf): rule errors as
// Decide returns them, room.ErrUnavailable for a store outage or a cluster
// timeout; context errors pass through as they are.
type RoomBackend interface {
	Execute(ctx context.Context, cmd *roomcellv1.RoomCommand) (*roomcellv1.CommandReply, error)
}

// RoomServer implements roomcell.v1.RoomService: it validates each request
// completely, fills in the request id, hands the command to the backend
// and maps the outcome to a status. It keeps no state of its own.
type RoomServer struct {
	roomcellv1.UnimplementedRoomServiceServer
	backend RoomBackend
	log     *slog.Logger
	timeout time.Duration
	dir     DirectoryReader // directory.go; nil: ListRooms/GetUserRoom unimplemented
}

// NewRoomServer returns a RoomServer over backend. commandTimeout, when
// positive, bounds each backend call below the caller's own deadline.
func NewRoomServer(backend RoomBackend, log *slog.Logger, commandTimeout time.Duration) *RoomServer {
	if log == nil {
		log = slog.Default()
	}
	return &RoomServer{backend: backend, log: log, timeout: commandTimeout}
}

// Every request type of the grain protocol's oneof is checked completely
// by room.CheckClientCommand, so all of them may arrive with invalid UTF-8
// and be refused by name.
func init() {
	oneof := (&roomcellv1.RoomCommand{}).ProtoReflect().Descriptor().Oneofs().ByName("command").Fields()
	for i := range oneof.Len() {
		registerValidated(dynamicpb.NewMessage(oneof.Get(i).Message()))
	}
}

var errNoReply = errors.New("room backend returned neither a reply nor an error")

// callCtx bounds a backend call by the command timeout below the caller's
// own deadline. A caller whose deadline comes first (a client's timeout
// as long as ours does: it started counting earlier) keeps its context;
// a second one, registered with it for cancellation, would change nothing.
func (s *RoomServer) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.timeout <= 0 {
		return ctx, func() {}
	}
	if d, ok := ctx.Deadline(); ok && time.Until(d) <= s.timeout {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.timeout)
}

func (s *RoomServer) execute(ctx context.Context, cmd *roomcellv1.RoomCommand) (*roomcellv1.CommandReply, error) {
	ctx, cancel := s.callCtx(ctx)
	defer cancel()
	reply, err := s.backend.Execute(ctx, cmd)
	if err == nil && reply == nil {
		err = errNoReply
	}
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	return reply, nil
}

func (s *RoomServer) invalid(ctx context.Context, err error) error { return toStatus(ctx, s.log, err) }

// command checks a client's command with the room's own rules, fills in
// the request id and runs it.
func (s *RoomServer) command(ctx context.Context, rc *roomcellv1.RoomCommand) (*roomcellv1.CommandReply, error) {
	if err := room.CheckClientCommand(rc); err != nil {
		return nil, s.invalid(ctx, err)
	}
	setRequestID(ctx, room.Request(rc))
	return s.execute(ctx, rc)
}

// setRequestID fills the request_id field every room request has.
func setRequestID(ctx context.Context, req proto.Message) {
	m := req.ProtoReflect()
	fd := m.Descriptor().Fields().ByName("request_id")
	m.Set(fd, protoreflect.ValueOfString(requestIDFor(ctx, m.Get(fd).String())))
}

func (s *RoomServer) CreateRoom(ctx context.Context, r *roomcellv1.CreateRoomRequest) (*roomcellv1.CommandReply, error) {
	return s.command(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_CreateRoom{CreateRoom: r}})
}

func (s *RoomServer) JoinRoom(ctx context.Context, r *roomcellv1.JoinRoomRequest) (*roomcellv1.CommandReply, error) {
	return s.command(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_JoinRoom{JoinRoom: r}})
}

func (s *RoomServer) LeaveRoom(ctx context.Context, r *roomcellv1.LeaveRoomRequest) (*roomcellv1.CommandReply, error) {
	return s.command(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_LeaveRoom{LeaveRoom: r}})
}

func (s *RoomServer) TakeMic(ctx context.Context, r *roomcellv1.TakeMicRequest) (*roomcellv1.CommandReply, error) {
	return s.command(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_TakeMic{TakeMic: r}})
}

func (s *RoomServer) ReleaseMic(ctx context.Context, r *roomcellv1.ReleaseMicRequest) (*roomcellv1.CommandReply, error) {
	return s.command(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_ReleaseMic{ReleaseMic: r}})
}

func (s *RoomServer) SendGift(ctx context.Context, r *roomcellv1.SendGiftRequest) (*roomcellv1.CommandReply, error) {
	return s.command(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_SendGift{SendGift: r}})
}

func (s *RoomServer) KickUser(ctx context.Context, r *roomcellv1.KickUserRequest) (*roomcellv1.CommandReply, error) {
	return s.command(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_KickUser{KickUser: r}})
}

func (s *RoomServer) CloseRoom(ctx context.Context, r *roomcellv1.CloseRoomRequest) (*roomcellv1.CommandReply, error) {
	return s.command(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_CloseRoom{CloseRoom: r}})
}

func (s *RoomServer) Heartbeat(ctx context.Context, r *roomcellv1.HeartbeatRequest) (*roomcellv1.CommandReply, error) {
	return s.command(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_Heartbeat{Heartbeat: r}})
}

func (s *RoomServer) SetAdmin(ctx context.Context, r *roomcellv1.SetAdminRequest) (*roomcellv1.CommandReply, error) {
	return s.command(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_SetAdmin{SetAdmin: r}})
}

func (s *RoomServer) RemoveAdmin(ctx context.Context, r *roomcellv1.RemoveAdminRequest) (*roomcellv1.CommandReply, error) {
	return s.command(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_RemoveAdmin{RemoveAdmin: r}})
}

func (s *RoomServer) MuteSeat(ctx context.Context, r *roomcellv1.MuteSeatRequest) (*roomcellv1.CommandReply, error) {
	return s.command(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_MuteSeat{MuteSeat: r}})
}

func (s *RoomServer) UnmuteSeat(ctx context.Context, r *roomcellv1.UnmuteSeatRequest) (*roomcellv1.CommandReply, error) {
	return s.command(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_UnmuteSeat{UnmuteSeat: r}})
}

func (s *RoomServer) LockSeat(ctx context.Context, r *roomcellv1.LockSeatRequest) (*roomcellv1.CommandReply, error) {
	return s.command(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_LockSeat{LockSeat: r}})
}

func (s *RoomServer) UnlockSeat(ctx context.Context, r *roomcellv1.UnlockSeatRequest) (*roomcellv1.CommandReply, error) {
	return s.command(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_UnlockSeat{UnlockSeat: r}})
}

func (s *RoomServer) UpdateRoom(ctx context.Context, r *roomcellv1.UpdateRoomRequest) (*roomcellv1.CommandReply, error) {
	return s.command(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_UpdateRoom{UpdateRoom: r}})
}

func (s *RoomServer) GetRoom(ctx context.Context, r *roomcellv1.GetRoomRequest) (*roomcellv1.GetRoomReply, error) {
	reply, err := s.command(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_GetRoom{GetRoom: r}})
	if err != nil {
		return nil, err
	}
	if reply.GetRoom() == nil {
		// A grain of a room nobody created may answer with an empty view.
		return nil, toStatus(ctx, s.log, room.ErrRoomNotFound)
	}
	return &roomcellv1.GetRoomReply{Room: reply.GetRoom(), NextPageToken: reply.GetNextPageToken()}, nil
}
