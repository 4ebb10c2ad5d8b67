package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/hyapp/roomcell/actors/roomgrain"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/roomim"
	"github.com/hyapp/roomcell/delivery/trtc/trtcfake"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/tencentcb"
)

// roomClient reaches any room from this node, wherever it is served.
func (a *App) roomClient() *roomgrain.Client {
	return &roomgrain.Client{Cluster: a.member.Cluster, AttemptTimeout: a.cfg.Cluster.RequestTimeout, Owners: a.clientOwners()}
}

// mountCallbacks puts Tencent's callback endpoints on the HTTP listener
// when they are on (trtc.callback, tencent_im.callback): Tencent posts to
// the public URL in front of http.addr, any node may take a callback.
func (a *App) mountCallbacks(mux *http.ServeMux) error {
	if c := a.cfg.TRTC.Callback; c.Enabled {
		h, err := tencentcb.NewTRTC(c, a.cfg.TRTC.SDKAppID, a.cfg.TRTC.SeatGrace, a.roomClient(),
			a.log.With("component", "trtc_callback"), a.registry)
		if err != nil {
			return fmt.Errorf("trtc.callback: %w", err)
		}
		if a.cfg.Presence.Source == configs.PresenceTRTC {
			h.FollowPresence(a.cfg.Presence.StaleAfter)
		}
		mux.Handle(c.Path, h)
		a.log.Info("trtc callbacks served", "path", c.Path)
	}
	if c := a.cfg.TencentIM.Callback; c.Enabled {
		h, err := tencentcb.NewIM(c, a.cfg.TencentIM.SDKAppID, a.roomClient(), a.log.With("component", "im_callback"), a.registry)
		if err != nil {
			return fmt.Errorf("tencent_im.callback: %w", err)
		}
		if p := a.cfg.Presence; p.Source == configs.PresenceIM {
			if a.directory == nil {
				return fmt.Errorf("presence.source: im needs the room directory on the node that takes IM callbacks")
			}
			h.FollowPresence(p.AppCodes, p.StaleAfter, a.userRoom)
		}
		mux.Handle(c.Path, h)
		a.log.Info("tencent im callbacks served", "path", c.Path)
	}
	if a.fakeTRTC != nil {
		mux.HandleFunc("POST /debug/fake-trtc/cut", a.fakeTRTCCut)
	}
	return nil
}

// userRoom is the room userID is in within appCode, from the room
// directory ("" for none).
func (a *App) userRoom(ctx context.Context, appCode, userID string) (string, error) {
	ur, err := a.directory.UserRoom(ctx, appCode, userID)
	if errors.Is(err, persistence.ErrNotFound) {
		return "", nil
	}
	return ur.RoomID, err
}

// reportFakeTRTC makes dev mode's fake TRTC post its callbacks to this
// node's own endpoint, as Tencent would, when the endpoint is on.
func (a *App) reportFakeTRTC() {
	c := a.cfg.TRTC.Callback
	if a.fakeTRTC == nil || !c.Enabled {
		return
	}
	cb := trtcfake.NewCallbacks("http://"+a.HTTPAddr()+c.Path, c.Key, a.cfg.TRTC.SDKAppID)
	a.fakeTRTC.SetCallbacks(cb)
	a.closers = append(a.closers, cb.Close)
}

// fakeTRTCCut is the dev switch that cuts a user's audio connection
// (?app_code=&room_id=&user_id=): the fake TRTC drops them from the
// room's audio room and reports the exit (reason timeout), as TRTC does
// for an app that died or lost the network, without TRTC's 30 s wait.
func (a *App) fakeTRTCCut(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	app, roomID, user := q.Get("app_code"), q.Get("room_id"), q.Get("user_id")
	if app == "" || roomID == "" || user == "" {
		http.Error(w, "want app_code, room_id and user_id", http.StatusBadRequest)
		return
	}
	gid := roomim.GroupID(app, roomID)
	a.fakeTRTC.UserExits(gid, user, trtcfake.ExitTimeout)
	a.log.Warn("fake TRTC: audio cut", "app_code", app, "room_id", roomID, "user_id", user)
	fmt.Fprintf(w, "%s dropped from audio room %s at %s\n", user, gid, time.Now().UTC().Format(time.RFC3339))
}
