package grpcapi

import (
	"context"
	"log/slog"

	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/delivery/roomim"
	"github.com/hyapp/roomcell/room"
)

// BanReconciler puts a room's IM group's bans in line with the room's
// (user → end, unix ms); *roomim.Publisher is it.
type BanReconciler interface {
	ReconcileBans(ctx context.Context, appCode, roomID string, roomBans map[string]int64) (roomim.BanPlan, error)
}

// banPage is the ListBans page the reconcile reads (the room's largest).
const banPage = 1000

// RoomBans reads a room's bans in force from the room itself, every page
// of ListBans (at most room.MaxBans), as user → end (unix ms).
func RoomBans(ctx context.Context, rooms RoomBackend, appCode, roomID string) (map[string]int64, error) {
	bans := map[string]int64{}
	token := ""
	for {
		reply, err := rooms.Execute(ctx, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_ListBans{ListBans: &roomcellv1.ListBansRequest{
			AppCode: appCode, RoomId: roomID, PageSize: banPage, PageToken: token}}})
		if err != nil {
			return nil, err
		}
		for _, b := range reply.GetBans() {
			bans[b.GetUserId()] = b.GetBannedUntilMs()
		}
		if token = reply.GetNextPageToken(); token == "" {
			return bans, nil
		}
	}
}

// ReconcileRoomBans reads the room's bans (RoomBans) and has im put the
// room's IM group in line with them: the one path of the operator RPC
// and the periodic reconcile (tencent_im.ban_reconcile_interval).
func ReconcileRoomBans(ctx context.Context, rooms RoomBackend, im BanReconciler, appCode, roomID string) (plan roomim.BanPlan, roomBans int, err error) {
	bans, err := RoomBans(ctx, rooms, appCode, roomID)
	if err != nil {
		return roomim.BanPlan{}, 0, err
	}
	plan, err = im.ReconcileBans(ctx, appCode, roomID, bans)
	return plan, len(bans), err
}

// ImAdminServer implements roomcell.v1.ImAdmin (operator-only).
type ImAdminServer struct {
	roomcellv1.UnimplementedImAdminServer
	rooms RoomBackend
	im    BanReconciler
	log   *slog.Logger
}

// NewImAdminServer returns the server over the node's room client and IM
// publisher.
func NewImAdminServer(rooms RoomBackend, im BanReconciler, log *slog.Logger) *ImAdminServer {
	if log == nil {
		log = slog.Default()
	}
	return &ImAdminServer{rooms: rooms, im: im, log: log}
}

// ReconcileImBans implements roomcell.v1.ImAdmin. On an error part of the
// plan may have been applied; running it again finishes it.
func (s *ImAdminServer) ReconcileImBans(ctx context.Context, req *roomcellv1.ReconcileImBansRequest) (*roomcellv1.ReconcileImBansReply, error) {
	if err := room.CheckID("app_code", req.GetAppCode()); err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	if err := room.CheckID("room_id", req.GetRoomId()); err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	plan, n, err := ReconcileRoomBans(ctx, s.rooms, s.im, req.GetAppCode(), req.GetRoomId())
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	reply := &roomcellv1.ReconcileImBansReply{AppCode: req.GetAppCode(), RoomId: req.GetRoomId(), RoomBans: int32(n),
		Banned: int32(len(plan.Ban)), Unbanned: int32(len(plan.Unban)), UnbannedUsers: plan.Unban}
	for _, o := range plan.Ban {
		reply.BannedUsers = append(reply.BannedUsers, o.UserID)
	}
	s.log.Info("im bans reconciled by an operator", "app_code", req.GetAppCode(), "room_id", req.GetRoomId(),
		"room_bans", n, "banned", reply.Banned, "unbanned", reply.Unbanned)
	return reply, nil
}
