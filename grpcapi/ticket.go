package grpcapi

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/delivery/roomim"
	"github.com/hyapp/roomcell/delivery/trtc"
)

// TicketSigner signs join tickets (delivery/trtc.Tickets).
type TicketSigner interface {
	Issue(userID, roomID string, sendAudio bool) (trtc.Ticket, error)
}

// SetTickets sets the signer of GetJoinTicket's UserSig and
// PrivateMapKey; without one, a ticket carries the audio room and the
// rights only (the app signs its users itself).
func (s *RoomServer) SetTickets(t TicketSigner) { s.tickets = t }

// GetJoinTicket reads the user's rights from the room's grain (a read,
// no log row) and signs them here, off the room's one thread.
func (s *RoomServer) GetJoinTicket(ctx context.Context, r *roomcellv1.GetJoinTicketRequest) (*roomcellv1.GetJoinTicketReply, error) {
	reply, err := s.command(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_GetJoinTicket{GetJoinTicket: r}})
	if err != nil {
		return nil, err
	}
	rights := reply.GetJoinRights()
	if rights == nil {
		return nil, status.Error(codes.Internal, "the room answered a ticket without rights")
	}
	out := &roomcellv1.GetJoinTicketReply{
		TrtcRoomId: roomim.GroupID(r.GetAppCode(), r.GetRoomId()),
		Privileges: trtc.Privileges(rights.GetSendAudio()),
		SendAudio:  rights.GetSendAudio(),
		Seat:       rights.GetSeat(),
		RoomSeq:    reply.GetRoomSeq(),
	}
	if s.tickets == nil {
		return out, nil
	}
	t, err := s.tickets.Issue(r.GetUserId(), out.TrtcRoomId, rights.GetSendAudio())
	if err != nil {
		s.log.ErrorContext(ctx, "join ticket not signed", "error", err)
		return nil, status.Error(codes.Internal, "the ticket could not be signed")
	}
	out.SdkAppId, out.UserSig, out.PrivateMapKey = t.SDKAppID, t.UserSig, t.PrivateMapKey
	out.ExpiresAtMs = t.ExpiresAt.UnixMilli()
	return out, nil
}
