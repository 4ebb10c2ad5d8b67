package grpcapi

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/internal/ratelimit"
	"github.com/hyapp/roomcell/room"
)

// RoomBackend executes a validated room command at the room's grain. Its
// errors carry a class of errclass (and a code, for rule errors): rule errors as
// Decide returns them, errclass.Unavailable for a store outage or a cluster
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
	// events.go: nil: ListRoomEvents/WatchRoom unimplemented.
	events   RoomEvents
	maxWatch int64
	watching atomic.Int64
	gifts    []*roomcellv1.Gift // nil: ListGifts unimplemented
	limiter  *ratelimit.Limiter // ratelimit.go; nil: no limits
	tickets  TicketSigner       // ticket.go; nil: tickets carry no signatures
	// getRoomWires: the encodings of recent GetRoom answers (getroomcodec.go).
	getRoomWires getRoomWires
	// likestream.go: Max 0: LikeStream unimplemented.
	likeStreams     LikeStreamOptions
	likeStreamsOpen atomic.Int64
}

// SetGifts sets the catalog ListGifts answers with (the one SendGift
// charges by).
func (s *RoomServer) SetGifts(gifts []*roomcellv1.Gift) { s.gifts = gifts }

// ListGifts lists the gift catalog.
func (s *RoomServer) ListGifts(ctx context.Context, r *roomcellv1.ListGiftsRequest) (*roomcellv1.ListGiftsReply, error) {
	if err := checkOptionalID("request_id", r.GetRequestId()); err != nil {
		return nil, s.invalid(ctx, err)
	}
	if s.gifts == nil {
		return nil, status.Error(codes.Unimplemented, "this node serves no gift catalog")
	}
	out := make([]*roomcellv1.Gift, len(s.gifts))
	for i, g := range s.gifts {
		out[i] = proto.Clone(g).(*roomcellv1.Gift)
	}
	return &roomcellv1.ListGiftsReply{Gifts: out}, nil
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
	// Its fields are checked as GetRoom's.
	registerValidated(&roomcellv1.ListSeatRequestsRequest{}, &roomcellv1.ListGiftsRequest{})
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

// BoundedBackend is a RoomBackend that bounds a call by a duration as
// well as by its context (roomgrain.Client): the command timeout then
// costs no context and timer of its own per call.
type BoundedBackend interface {
	ExecuteWithin(ctx context.Context, cmd *roomcellv1.RoomCommand, within time.Duration) (*roomcellv1.CommandReply, error)
}

func (s *RoomServer) execute(ctx context.Context, cmd *roomcellv1.RoomCommand) (reply *roomcellv1.CommandReply, err error) {
	if b, ok := s.backend.(BoundedBackend); ok {
		reply, err = b.ExecuteWithin(ctx, cmd, s.timeout)
	} else {
		cctx, cancel := s.callCtx(ctx)
		reply, err = s.backend.Execute(cctx, cmd)
		cancel()
	}
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
// The command is read once (room.ParseClientCommand): its checks, the
// room it addresses, its user and its rate class come from that one read.
func (s *RoomServer) command(ctx context.Context, rc *roomcellv1.RoomCommand) (*roomcellv1.CommandReply, error) {
	tok, err := s.admit(ctx, rc)
	if err != nil {
		return nil, err
	}
	return s.run(ctx, rc, tok)
}

// admit is command's first half, on the caller's goroutine: the checks,
// the rate limit's token and the request id. LikeStream admits each
// message on its reader and runs it on a goroutine of its own.
func (s *RoomServer) admit(ctx context.Context, rc *roomcellv1.RoomCommand) (ratelimit.Token, error) {
	p, err := room.ParseClientCommand(rc)
	if err != nil {
		return ratelimit.Token{}, s.invalid(ctx, err)
	}
	tok, err := s.limit(ctx, p)
	if err != nil {
		return tok, err
	}
	setRequestID(ctx, p.Request)
	return tok, nil
}

// run is command's second half: the room's answer to an admitted
// command.
func (s *RoomServer) run(ctx context.Context, rc *roomcellv1.RoomCommand, tok ratelimit.Token) (*roomcellv1.CommandReply, error) {
	reply, err := s.execute(ctx, rc)
	if err == nil && reply.GetDuplicate() {
		// An answered command_id again: the room wrote nothing, so the
		// retry costs its caller nothing either.
		tok.Refund()
	}
	return reply, err
}

// setRequestID fills the request_id field every room request has, when
// the caller left it empty (read through the getter: no reflection for a
// request that carries its own).
func setRequestID(ctx context.Context, req proto.Message) {
	if r, ok := req.(interface{ GetRequestId() string }); ok && r.GetRequestId() != "" {
		return
	}
	m := req.ProtoReflect()
	m.Set(m.Descriptor().Fields().ByName("request_id"), protoreflect.ValueOfString(requestIDFor(ctx, "")))
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

func (s *RoomServer) TransferOwner(ctx context.Context, r *roomcellv1.TransferOwnerRequest) (*roomcellv1.CommandReply, error) {
	return s.command(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_TransferOwner{TransferOwner: r}})
}

func (s *RoomServer) GetRoom(ctx context.Context, r *roomcellv1.GetRoomRequest) (*roomcellv1.GetRoomReply, error) {
	reply, err := s.getRoom(ctx, r)
	if err != nil {
		return nil, err
	}
	return &roomcellv1.GetRoomReply{Room: reply.GetRoom(), NextPageToken: reply.GetNextPageToken()}, nil
}

// getRoom is the room's reply to a GetRoom (RegisterRoomService sends it
// from its kept encoding: getroomcodec.go).
func (s *RoomServer) getRoom(ctx context.Context, r *roomcellv1.GetRoomRequest) (*roomcellv1.CommandReply, error) {
	reply, err := s.command(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_GetRoom{GetRoom: r}})
	if err != nil {
		return nil, err
	}
	if reply.GetRoom() == nil {
		// A grain of a room nobody created may answer with an empty view.
		return nil, toStatus(ctx, s.log, room.ErrRoomNotFound)
	}
	return reply, nil
}

func (s *RoomServer) SetSeatMode(ctx context.Context, r *roomcellv1.SetSeatModeRequest) (*roomcellv1.CommandReply, error) {
	return s.command(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_SetSeatMode{SetSeatMode: r}})
}

func (s *RoomServer) ApplySeat(ctx context.Context, r *roomcellv1.ApplySeatRequest) (*roomcellv1.CommandReply, error) {
	return s.command(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_ApplySeat{ApplySeat: r}})
}

func (s *RoomServer) CancelSeatApplication(ctx context.Context, r *roomcellv1.CancelSeatApplicationRequest) (*roomcellv1.CommandReply, error) {
	return s.command(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_CancelSeatApplication{CancelSeatApplication: r}})
}

func (s *RoomServer) ApproveSeatApplication(ctx context.Context, r *roomcellv1.ApproveSeatApplicationRequest) (*roomcellv1.CommandReply, error) {
	return s.command(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_ApproveSeatApplication{ApproveSeatApplication: r}})
}

func (s *RoomServer) RejectSeatApplication(ctx context.Context, r *roomcellv1.RejectSeatApplicationRequest) (*roomcellv1.CommandReply, error) {
	return s.command(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_RejectSeatApplication{RejectSeatApplication: r}})
}

func (s *RoomServer) InviteToSeat(ctx context.Context, r *roomcellv1.InviteToSeatRequest) (*roomcellv1.CommandReply, error) {
	return s.command(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_InviteToSeat{InviteToSeat: r}})
}

func (s *RoomServer) AcceptSeatInvitation(ctx context.Context, r *roomcellv1.AcceptSeatInvitationRequest) (*roomcellv1.CommandReply, error) {
	return s.command(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_AcceptSeatInvitation{AcceptSeatInvitation: r}})
}

func (s *RoomServer) DeclineSeatInvitation(ctx context.Context, r *roomcellv1.DeclineSeatInvitationRequest) (*roomcellv1.CommandReply, error) {
	return s.command(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_DeclineSeatInvitation{DeclineSeatInvitation: r}})
}

// ListSeatRequests reads the pending lists from the room's summary (a
// GetRoom of one member page: the lists are in every view).
func (s *RoomServer) ListSeatRequests(ctx context.Context, r *roomcellv1.ListSeatRequestsRequest) (*roomcellv1.ListSeatRequestsReply, error) {
	got, err := s.GetRoom(ctx, &roomcellv1.GetRoomRequest{RequestId: r.GetRequestId(), AppCode: r.GetAppCode(), RoomId: r.GetRoomId(), PageSize: 1})
	if err != nil {
		return nil, err
	}
	v := got.GetRoom()
	return &roomcellv1.ListSeatRequestsReply{SeatMode: v.GetSeatMode(), Applications: v.GetSeatApplications(),
		Invitations: v.GetSeatInvitations(), RoomSeq: v.GetSeq()}, nil
}

func (s *RoomServer) KickOffSeat(ctx context.Context, r *roomcellv1.KickOffSeatRequest) (*roomcellv1.CommandReply, error) {
	return s.command(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_KickOffSeat{KickOffSeat: r}})
}

func (s *RoomServer) MoveSeat(ctx context.Context, r *roomcellv1.MoveSeatRequest) (*roomcellv1.CommandReply, error) {
	return s.command(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_MoveSeat{MoveSeat: r}})
}

func (s *RoomServer) SetSeatCount(ctx context.Context, r *roomcellv1.SetSeatCountRequest) (*roomcellv1.CommandReply, error) {
	return s.command(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_SetSeatCount{SetSeatCount: r}})
}

func (s *RoomServer) BanUser(ctx context.Context, r *roomcellv1.BanUserRequest) (*roomcellv1.CommandReply, error) {
	return s.command(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_BanUser{BanUser: r}})
}

func (s *RoomServer) UnbanUser(ctx context.Context, r *roomcellv1.UnbanUserRequest) (*roomcellv1.CommandReply, error) {
	return s.command(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_UnbanUser{UnbanUser: r}})
}

func (s *RoomServer) MuteMember(ctx context.Context, r *roomcellv1.MuteMemberRequest) (*roomcellv1.CommandReply, error) {
	return s.command(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_MuteMember{MuteMember: r}})
}

func (s *RoomServer) UnmuteMember(ctx context.Context, r *roomcellv1.UnmuteMemberRequest) (*roomcellv1.CommandReply, error) {
	return s.command(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_UnmuteMember{UnmuteMember: r}})
}

// ReopenRoom opens a closed room again (its owner only).
func (s *RoomServer) ReopenRoom(ctx context.Context, r *roomcellv1.ReopenRoomRequest) (*roomcellv1.CommandReply, error) {
	return s.command(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_ReopenRoom{ReopenRoom: r}})
}

// SetRoomMetadata replaces the room's category, tags, cover and
// visibility.
func (s *RoomServer) SetRoomMetadata(ctx context.Context, r *roomcellv1.SetRoomMetadataRequest) (*roomcellv1.CommandReply, error) {
	return s.command(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_SetRoomMetadata{SetRoomMetadata: r}})
}

// SetRoomCustomInfo sets and deletes keys of the room's custom info.
func (s *RoomServer) SetRoomCustomInfo(ctx context.Context, r *roomcellv1.SetRoomCustomInfoRequest) (*roomcellv1.CommandReply, error) {
	return s.command(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_SetRoomCustomInfo{SetRoomCustomInfo: r}})
}

// SetRoomPassword sets or clears the room's password.
func (s *RoomServer) SetRoomPassword(ctx context.Context, r *roomcellv1.SetRoomPasswordRequest) (*roomcellv1.CommandReply, error) {
	return s.command(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_SetRoomPassword{SetRoomPassword: r}})
}

// SetAllMicsMuted turns the room's all-mics-muted switch on or off.
func (s *RoomServer) SetAllMicsMuted(ctx context.Context, r *roomcellv1.SetAllMicsMutedRequest) (*roomcellv1.CommandReply, error) {
	return s.command(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_SetAllMicsMuted{SetAllMicsMuted: r}})
}

// SetChatDisabled turns the room's chat-disabled-for-all switch on or off.
func (s *RoomServer) SetChatDisabled(ctx context.Context, r *roomcellv1.SetChatDisabledRequest) (*roomcellv1.CommandReply, error) {
	return s.command(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_SetChatDisabled{SetChatDisabled: r}})
}

// LikeRoom adds likes to the room; answered when their window is stored.
func (s *RoomServer) LikeRoom(ctx context.Context, r *roomcellv1.LikeRoomRequest) (*roomcellv1.CommandReply, error) {
	return s.command(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_LikeRoom{LikeRoom: r}})
}

// ListBans reads one page of the room's bans in force from its grain.
func (s *RoomServer) ListBans(ctx context.Context, r *roomcellv1.ListBansRequest) (*roomcellv1.ListBansReply, error) {
	reply, err := s.command(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_ListBans{ListBans: r}})
	if err != nil {
		return nil, err
	}
	return &roomcellv1.ListBansReply{Bans: reply.GetBans(), NextPageToken: reply.GetNextPageToken(), RoomSeq: reply.GetRoomSeq()}, nil
}

// ListContributors reads one page of the room's contribution ranking from
// its grain (a read, as GetRoom).
func (s *RoomServer) ListContributors(ctx context.Context, r *roomcellv1.ListContributorsRequest) (*roomcellv1.ListContributorsReply, error) {
	reply, err := s.command(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_ListContributors{ListContributors: r}})
	if err != nil {
		return nil, err
	}
	period := r.GetPeriod()
	if period == "" {
		period = room.PeriodLifecycle
	}
	return &roomcellv1.ListContributorsReply{Contributors: reply.GetContributors(), NextPageToken: reply.GetNextPageToken(),
		RoomSeq: reply.GetRoomSeq(), Period: period, Day: reply.GetContributorsDay(), Floor: reply.GetContributorsFloor()}, nil
}
