package main

import (
	"context"
	"time"

	"github.com/hyapp/roomcell/actors/supervise"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/grpcapi"
)

// imBanReconcileWorker is the periodic IM ban reconcile's worker name.
const imBanReconcileWorker = "im_ban_reconcile"

// imBanRound is what one round of the periodic reconcile did.
type imBanRound struct {
	Rooms, Banned, Unbanned, Failed int
}

// imBanReconcileOn: the periodic reconcile runs on room nodes with
// tencent_im.ban_reconcile_interval set.
func imBanReconcileOn(a *App) bool {
	return a.cfg.HasRole(configs.RoleRoom) && a.cfg.TencentIM.BanReconcileInterval > 0 && a.imPub != nil && a.hosted != nil
}

// startIMBanReconcile runs, every tencent_im.ban_reconcile_interval, the
// repair of roomctl im reconcile-bans over the rooms this node hosts (each
// room is hosted by one node, so each is repaired once a round). A room
// that fails is logged and tried again next round.
func startIMBanReconcile(a *App, sup *supervise.Supervisor, _ workerInputs) (stopper, error) {
	every := a.cfg.TencentIM.BanReconcileInterval
	log := a.log.With("component", "im", "worker", imBanReconcileWorker)
	rooms := a.roomClient()
	round := func(ctx context.Context) (time.Duration, imBanRound) {
		var r imBanRound
		for _, key := range a.hosted.Rooms() {
			if ctx.Err() != nil {
				break
			}
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			plan, _, err := grpcapi.ReconcileRoomBans(cctx, rooms, a.imPub, key.AppCode, key.RoomID)
			cancel()
			r.Rooms++
			if err != nil {
				r.Failed++
				log.Warn("im ban reconcile of a room failed; next round retries", "app_code", key.AppCode, "room_id", key.RoomID, "error", err)
				continue
			}
			r.Banned += len(plan.Ban)
			r.Unbanned += len(plan.Unban)
		}
		if r.Banned+r.Unbanned+r.Failed > 0 {
			log.Info("im ban reconcile round", "rooms", r.Rooms, "banned", r.Banned, "unbanned", r.Unbanned, "failed", r.Failed)
		}
		return every, r
	}
	return supervise.StartPoller(sup, supervise.PollerSpec[imBanRound]{Name: imBanReconcileWorker, FirstDelay: every,
		New: func() supervise.Round[imBanRound] { return round }})
}
