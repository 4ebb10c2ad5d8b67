package grpcapi

import (
	"context"
	"errors"
	"log/slog"
	"time"

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

func init() {
	registerValidated(
		&roomcellv1.CreateRoomRequest{}, &roomcellv1.JoinRoomRequest{}, &roomcellv1.LeaveRoomRequest{},
		&roomcellv1.TakeMicRequest{}, &roomcellv1.ReleaseMicRequest{}, &roomcellv1.SendGiftRequest{},
		&roomcellv1.KickUserRequest{}, &roomcellv1.CloseRoomRequest{}, &roomcellv1.HeartbeatRequest{},
		&roomcellv1.GetRoomRequest{},
	)
}

var errNoReply = errors.New("room backend returned neither a reply nor an error")

func (s *RoomServer) execute(ctx context.Context, cmd *roomcellv1.RoomCommand) (*roomcellv1.CommandReply, error) {
	if s.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.timeout)
		defer cancel()
	}
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

func (s *RoomServer) CreateRoom(ctx context.Context, r *roomcellv1.CreateRoomRequest) (*roomcellv1.CommandReply, error) {
	if err := validateCreateRoom(r); err != nil {
		return nil, s.invalid(ctx, err)
	}
	r.RequestId = requestIDFor(ctx, r.RequestId)
	return s.execute(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_CreateRoom{CreateRoom: r}})
}

func (s *RoomServer) JoinRoom(ctx context.Context, r *roomcellv1.JoinRoomRequest) (*roomcellv1.CommandReply, error) {
	if err := validateJoinRoom(r); err != nil {
		return nil, s.invalid(ctx, err)
	}
	r.RequestId = requestIDFor(ctx, r.RequestId)
	return s.execute(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_JoinRoom{JoinRoom: r}})
}

func (s *RoomServer) LeaveRoom(ctx context.Context, r *roomcellv1.LeaveRoomRequest) (*roomcellv1.CommandReply, error) {
	if err := validateLeaveRoom(r); err != nil {
		return nil, s.invalid(ctx, err)
	}
	r.RequestId = requestIDFor(ctx, r.RequestId)
	return s.execute(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_LeaveRoom{LeaveRoom: r}})
}

func (s *RoomServer) TakeMic(ctx context.Context, r *roomcellv1.TakeMicRequest) (*roomcellv1.CommandReply, error) {
	if err := validateTakeMic(r); err != nil {
		return nil, s.invalid(ctx, err)
	}
	r.RequestId = requestIDFor(ctx, r.RequestId)
	return s.execute(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_TakeMic{TakeMic: r}})
}

func (s *RoomServer) ReleaseMic(ctx context.Context, r *roomcellv1.ReleaseMicRequest) (*roomcellv1.CommandReply, error) {
	if err := validateReleaseMic(r); err != nil {
		return nil, s.invalid(ctx, err)
	}
	r.RequestId = requestIDFor(ctx, r.RequestId)
	return s.execute(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_ReleaseMic{ReleaseMic: r}})
}

func (s *RoomServer) SendGift(ctx context.Context, r *roomcellv1.SendGiftRequest) (*roomcellv1.CommandReply, error) {
	if err := validateSendGift(r); err != nil {
		return nil, s.invalid(ctx, err)
	}
	r.RequestId = requestIDFor(ctx, r.RequestId)
	return s.execute(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_SendGift{SendGift: r}})
}

func (s *RoomServer) KickUser(ctx context.Context, r *roomcellv1.KickUserRequest) (*roomcellv1.CommandReply, error) {
	if err := validateKickUser(r); err != nil {
		return nil, s.invalid(ctx, err)
	}
	r.RequestId = requestIDFor(ctx, r.RequestId)
	return s.execute(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_KickUser{KickUser: r}})
}

func (s *RoomServer) CloseRoom(ctx context.Context, r *roomcellv1.CloseRoomRequest) (*roomcellv1.CommandReply, error) {
	if err := validateCloseRoom(r); err != nil {
		return nil, s.invalid(ctx, err)
	}
	r.RequestId = requestIDFor(ctx, r.RequestId)
	return s.execute(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_CloseRoom{CloseRoom: r}})
}

func (s *RoomServer) Heartbeat(ctx context.Context, r *roomcellv1.HeartbeatRequest) (*roomcellv1.CommandReply, error) {
	if err := validateHeartbeat(r); err != nil {
		return nil, s.invalid(ctx, err)
	}
	r.RequestId = requestIDFor(ctx, r.RequestId)
	return s.execute(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_Heartbeat{Heartbeat: r}})
}

func (s *RoomServer) GetRoom(ctx context.Context, r *roomcellv1.GetRoomRequest) (*roomcellv1.GetRoomReply, error) {
	if err := validateGetRoom(r); err != nil {
		return nil, s.invalid(ctx, err)
	}
	r.RequestId = requestIDFor(ctx, r.RequestId)
	reply, err := s.execute(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_GetRoom{GetRoom: r}})
	if err != nil {
		return nil, err
	}
	if reply.GetRoom() == nil {
		// A grain of a room nobody created may answer with an empty view.
		return nil, toStatus(ctx, s.log, room.ErrRoomNotFound)
	}
	return &roomcellv1.GetRoomReply{Room: reply.GetRoom()}, nil
}
