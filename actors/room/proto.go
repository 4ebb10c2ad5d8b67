package room

import (
	v1 "github.com/hyapp/roomcell/grpcapi/roomcellv1"
)

// CommandFromProto turns the grain protocol's command into a domain
// command decided at nowMs. ok is false for an empty oneof or GetRoom.
func CommandFromProto(rc *v1.RoomCommand, nowMs int64) (Command, bool) {
	c := Command{NowMs: nowMs}
	switch m := rc.GetCommand().(type) {
	case *v1.RoomCommand_CreateRoom:
		r := m.CreateRoom
		c.Type, c.CommandID, c.RequestID, c.AppCode, c.RoomID, c.UserID = CmdCreateRoom, r.CommandId, r.RequestId, r.AppCode, r.RoomId, r.UserId
		c.Name, c.MicSeats, c.Admins = r.Name, int(r.MicSeats), r.AdminUserIds
	case *v1.RoomCommand_JoinRoom:
		r := m.JoinRoom
		c.Type, c.CommandID, c.RequestID, c.AppCode, c.RoomID, c.UserID = CmdJoinRoom, r.CommandId, r.RequestId, r.AppCode, r.RoomId, r.UserId
	case *v1.RoomCommand_LeaveRoom:
		r := m.LeaveRoom
		c.Type, c.CommandID, c.RequestID, c.AppCode, c.RoomID, c.UserID = CmdLeaveRoom, r.CommandId, r.RequestId, r.AppCode, r.RoomId, r.UserId
		c.Reason = r.Reason
	case *v1.RoomCommand_TakeMic:
		r := m.TakeMic
		c.Type, c.CommandID, c.RequestID, c.AppCode, c.RoomID, c.UserID = CmdTakeMic, r.CommandId, r.RequestId, r.AppCode, r.RoomId, r.UserId
		c.Seat = int(r.Seat)
	case *v1.RoomCommand_ReleaseMic:
		r := m.ReleaseMic
		c.Type, c.CommandID, c.RequestID, c.AppCode, c.RoomID, c.UserID = CmdReleaseMic, r.CommandId, r.RequestId, r.AppCode, r.RoomId, r.UserId
	case *v1.RoomCommand_SendGift:
		r := m.SendGift
		c.Type, c.CommandID, c.RequestID, c.AppCode, c.RoomID, c.UserID = CmdSendGift, r.CommandId, r.RequestId, r.AppCode, r.RoomId, r.UserId
		c.ToUserID, c.GiftID, c.GiftCount = r.ToUserId, r.GiftId, r.GiftCount
	case *v1.RoomCommand_KickUser:
		r := m.KickUser
		c.Type, c.CommandID, c.RequestID, c.AppCode, c.RoomID, c.UserID = CmdKickUser, r.CommandId, r.RequestId, r.AppCode, r.RoomId, r.UserId
		c.TargetUserID, c.BanSeconds, c.Reason = r.TargetUserId, r.BanSeconds, r.Reason
	case *v1.RoomCommand_CloseRoom:
		r := m.CloseRoom
		c.Type, c.CommandID, c.RequestID, c.AppCode, c.RoomID, c.UserID = CmdCloseRoom, r.CommandId, r.RequestId, r.AppCode, r.RoomId, r.UserId
		c.Reason = r.Reason
	case *v1.RoomCommand_Heartbeat:
		r := m.Heartbeat
		c.Type, c.CommandID, c.RequestID, c.AppCode, c.RoomID, c.UserID = CmdHeartbeat, r.CommandId, r.RequestId, r.AppCode, r.RoomId, r.UserId
	default:
		return Command{}, false
	}
	return c, true
}

// KeyOf returns the app_code and room_id a command addresses.
func KeyOf(rc *v1.RoomCommand) (appCode, roomID string) {
	type addressed interface {
		GetAppCode() string
		GetRoomId() string
	}
	var a addressed
	switch m := rc.GetCommand().(type) {
	case *v1.RoomCommand_CreateRoom:
		a = m.CreateRoom
	case *v1.RoomCommand_JoinRoom:
		a = m.JoinRoom
	case *v1.RoomCommand_LeaveRoom:
		a = m.LeaveRoom
	case *v1.RoomCommand_TakeMic:
		a = m.TakeMic
	case *v1.RoomCommand_ReleaseMic:
		a = m.ReleaseMic
	case *v1.RoomCommand_SendGift:
		a = m.SendGift
	case *v1.RoomCommand_KickUser:
		a = m.KickUser
	case *v1.RoomCommand_CloseRoom:
		a = m.CloseRoom
	case *v1.RoomCommand_Heartbeat:
		a = m.Heartbeat
	case *v1.RoomCommand_GetRoom:
		a = m.GetRoom
	default:
		return "", ""
	}
	return a.GetAppCode(), a.GetRoomId()
}

// View is the public view of a room state.
func View(s State) *v1.RoomView {
	v := &v1.RoomView{
		AppCode:      s.AppCode,
		RoomId:       s.RoomID,
		OwnerUserId:  s.Owner,
		Name:         s.Name,
		Status:       s.Status,
		Seq:          s.Seq,
		Members:      s.SortedMembers(),
		AdminUserIds: append([]string(nil), s.Admins...),
		Heat:         s.Heat,
		CreatedAtMs:  s.CreatedAtMs,
	}
	for i, u := range s.Seats {
		v.Seats = append(v.Seats, &v1.Seat{Seat: int32(i), UserId: u})
	}
	return v
}
