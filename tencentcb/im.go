package tencentcb

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/roomim"
	"github.com/hyapp/roomcell/internal/promset"
	"github.com/hyapp/roomcell/room"
)

// IM callback commands this endpoint acts on (IM "Callback Command
// List"). Every other command is answered OK and counted.
const (
	IMStateChange     = "State.StateChange"                  // IM "State.StateChange" (cloud.tencent.com 269/2570)
	IMBeforeSendMsg   = "Group.CallbackBeforeSendMsg"        // IM "Before a Group Message Is Sent" (269/1619)
	IMBeforeApplyJoin = "Group.CallbackBeforeApplyJoinGroup" // IM "Before Applying to Join a Group" (269/1665)
	imRefuse          = 1                                    // a "before" callback's ErrorCode that refuses the request
	imRESTAPI         = "RESTAPI"                            // OptPlatform of a request the app's server made
	imMaxViews        = 1 << 16                              // user verdicts kept per node
)

// IM serves Tencent IM's third-party callbacks.
type IM struct {
	cfg      configs.IMCallbackConfig
	sdkAppID string // "" = any
	rooms    Rooms
	log      *slog.Logger
	now      func() time.Time
	m        imMetrics
	presence imPresence // IM is the presence source: apps set

	mu    sync.Mutex
	views map[string]imView // group + NUL + user → the room's word, for view_ttl
}

// imView is the room's word about a user: "" = may speak/join.
type imView struct {
	refusal string
	mutedMs int64 // chat-muted until (ms), 0 none
	// chatOff: the room's chat is disabled for all and user is neither
	// its owner nor an admin.
	chatOff bool
	at      time.Time
}

type imMetrics struct {
	callbacks *prometheus.CounterVec // command, outcome
	states    *prometheus.CounterVec // action
}

// UserRoom names the room userID is in within appCode ("" for none): the
// room directory's user → room entry.
type UserRoom func(ctx context.Context, appCode, userID string) (roomID string, err error)

// imPresence is what makes IM the presence source (presence.source: im).
type imPresence struct {
	apps       []string
	staleAfter time.Duration
	where      UserRoom
}

// FollowPresence makes IM's State.StateChange the rooms' presence: a
// Login or a Logout/Disconnect of a user is sent, as the room's
// AudioPresence (online/offline, leave_after = staleAfter), to the room
// the user is in in each of apps (looked up with where), whose owner
// decides. Call it before serving.
func (h *IM) FollowPresence(apps []string, staleAfter time.Duration, where UserRoom) {
	h.presence = imPresence{apps: apps, staleAfter: staleAfter, where: where}
}

// NewIM builds the endpoint; sdkAppID (0: any) is checked against the
// SdkAppid query parameter, as Tencent asks an app to.
func NewIM(cfg configs.IMCallbackConfig, sdkAppID int64, rooms Rooms, log *slog.Logger, reg prometheus.Registerer) (*IM, error) {
	if cfg.Token == "" {
		return nil, errors.New("tencent_im.callback.token: required")
	}
	if log == nil {
		log = slog.Default()
	}
	h := &IM{cfg: cfg, rooms: rooms, log: log, now: time.Now, views: map[string]imView{}}
	if sdkAppID > 0 {
		h.sdkAppID = strconv.FormatInt(sdkAppID, 10)
	}
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	s := promset.New(reg, "im callbacks")
	h.m = imMetrics{
		callbacks: s.CounterVec("roomcell_im_callbacks_total", "Tencent IM callbacks by command and outcome: allowed, refused, ok, unsigned, malformed, too_large.", "command", "outcome"),
		states:    s.CounterVec("roomcell_im_state_changes_total", "IM State.StateChange callbacks by action (Login, Logout, Disconnect).", "action"),
	}
	return h, s.Err()
}

// imAnswer is the answer every IM callback takes.
type imAnswer struct {
	ActionStatus string `json:"ActionStatus"`
	ErrorCode    int    `json:"ErrorCode"`
	ErrorInfo    string `json:"ErrorInfo"`
}

func (h *IM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	cmd := q.Get("CallbackCommand")
	status, outcome, ans := h.serve(r, cmd, q)
	if len(cmd) > 64 {
		cmd = "long"
	}
	h.m.callbacks.WithLabelValues(cmd, outcome).Inc()
	if status != http.StatusOK {
		http.Error(w, outcome, status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(ans)
}

var imOK = imAnswer{ActionStatus: "OK"}

func (h *IM) serve(r *http.Request, cmd string, q map[string][]string) (int, string, imAnswer) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	if r.Method != http.MethodPost {
		return http.StatusMethodNotAllowed, "method", imAnswer{}
	}
	// Authentication before the body is read.
	if ok, _ := imSigned(h.cfg.Token, get("Sign"), get("RequestTime"), h.now(), h.cfg.MaxSkew); !ok {
		return http.StatusUnauthorized, OutcomeUnsigned, imAnswer{}
	}
	if h.sdkAppID != "" && get("SdkAppid") != h.sdkAppID {
		return http.StatusUnauthorized, OutcomeUnsigned, imAnswer{}
	}
	if r.ContentLength > int64(h.cfg.MaxBody) {
		return http.StatusRequestEntityTooLarge, OutcomeTooLarge, imAnswer{}
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(h.cfg.MaxBody)+1))
	if err != nil {
		return http.StatusBadRequest, OutcomeMalformed, imAnswer{}
	}
	if len(body) > h.cfg.MaxBody {
		return http.StatusRequestEntityTooLarge, OutcomeTooLarge, imAnswer{}
	}
	var ev struct {
		GroupID   string `json:"GroupId"`
		From      string `json:"From_Account"`
		Requestor string `json:"Requestor_Account"`
		EventTime int64  `json:"EventTime"`
		Info      struct {
			Action    string `json:"Action"`
			ToAccount string `json:"To_Account"`
			Reason    string `json:"Reason"`
		} `json:"Info"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		return http.StatusBadRequest, OutcomeMalformed, imAnswer{}
	}
	switch cmd {
	case IMStateChange:
		h.m.states.WithLabelValues(imAction(ev.Info.Action)).Inc()
		h.log.Debug("im state change", "user_id", ev.Info.ToAccount, "action", ev.Info.Action, "reason", ev.Info.Reason)
		if h.presence.where == nil {
			return http.StatusOK, "ok", imOK
		}
		return h.stateChange(r.Context(), ev.Info.ToAccount, ev.Info.Action, ev.Info.Reason, ev.EventTime)
	case IMBeforeSendMsg:
		if get("OptPlatform") == imRESTAPI {
			return http.StatusOK, "allowed", imOK // the app's own server (room events)
		}
		return h.decide(r.Context(), ev.GroupID, ev.From, true)
	case IMBeforeApplyJoin:
		return h.decide(r.Context(), ev.GroupID, ev.Requestor, false)
	}
	return http.StatusOK, "ok", imOK
}

func imAction(a string) string {
	switch a {
	case "Login", "Logout", "Disconnect":
		return a
	}
	return "other"
}

// decide answers a "before" callback from the room's word about user:
// not a member (banned included: a banned user is never a member) →
// refused; speaking while chat-muted, or while the room's chat is
// disabled for all but its owner and admins → refused. A group that is not a
// room's is none of the room's business; a room that does not answer in
// time lets the request through, as Tencent itself does when an answer
// is late.
func (h *IM) decide(ctx context.Context, gid, user string, speak bool) (int, string, imAnswer) {
	app, roomID, ok := roomim.RoomOfGroup(gid)
	if !ok || user == "" {
		return http.StatusOK, "allowed", imOK
	}
	v, ok := h.view(ctx, app, roomID, gid, user)
	if !ok {
		return http.StatusOK, "allowed", imOK
	}
	refusal := v.refusal
	if refusal == "" && speak && v.mutedMs > h.now().UnixMilli() {
		refusal = "muted in the room"
	}
	if refusal == "" && speak && v.chatOff {
		refusal = "chat is disabled in the room"
	}
	if refusal == "" {
		return http.StatusOK, "allowed", imOK
	}
	return http.StatusOK, "refused", imAnswer{ActionStatus: "OK", ErrorCode: imRefuse, ErrorInfo: refusal}
}

// view is the room's word about user, at most view_ttl old; ok false when
// the room did not answer.
func (h *IM) view(ctx context.Context, app, roomID, gid, user string) (imView, bool) {
	key := gid + "\x00" + user
	now := h.now()
	h.mu.Lock()
	v, hit := h.views[key]
	h.mu.Unlock()
	if hit && now.Sub(v.at) < h.cfg.ViewTTL {
		return v, true
	}
	ctx, cancel := context.WithTimeout(ctx, h.cfg.AnswerTimeout)
	defer cancel()
	// Heartbeat is the room's unlogged membership check; its reply
	// carries the room's chat mutes.
	reply, err := h.rooms.Execute(ctx, &v1.RoomCommand{Command: &v1.RoomCommand_Heartbeat{Heartbeat: &v1.HeartbeatRequest{
		AppCode: app, RoomId: roomID, UserId: user}}})
	v = imView{at: now}
	switch {
	case err == nil:
		r := reply.GetRoom()
		for _, m := range r.GetMutedMembers() {
			if m.GetUserId() == user {
				v.mutedMs = m.GetMutedUntilMs()
			}
		}
		v.chatOff = r.GetChatDisabled() && user != r.GetOwnerUserId() && !slices.Contains(r.GetAdminUserIds(), user)
	case errors.Is(err, room.ErrNotMember), errors.Is(err, room.ErrBanned):
		v.refusal = "not a member of the room"
	case errors.Is(err, room.ErrRoomNotFound), errors.Is(err, room.ErrRoomClosed):
		v.refusal = "the room is closed"
	default:
		h.log.Warn("im callback: the room did not answer; the request goes through", "group_id", gid, "user_id", user, "error", err)
		return imView{}, false
	}
	h.mu.Lock()
	if len(h.views) >= imMaxViews {
		clear(h.views) // a burst of distinct users: start over rather than grow
	}
	h.views[key] = v
	h.mu.Unlock()
	return v, true
}

// stateChange sends a user's login or logout to the room they are in in
// each of the presence apps. The command id is derived from the report
// (user, action, event time: what IM sends again), so a duplicate, on
// any node, is one command; the room orders a member's reports by their
// event time. A room that did not take it is answered 503 (nothing is
// lost by asking IM to try again).
func (h *IM) stateChange(ctx context.Context, user, action, reason string, eventMs int64) (int, string, imAnswer) {
	var kind string
	switch action {
	case "Login":
		kind = room.PresenceOnline
	case "Logout", "Disconnect":
		kind = room.PresenceOffline
	default:
		return http.StatusOK, "ok", imOK // a custom status: not presence
	}
	if user == "" || eventMs <= 0 {
		return http.StatusBadRequest, OutcomeMalformed, imAnswer{}
	}
	sum := sha256.Sum256([]byte(user + "\x00" + action + "\x00" + strconv.FormatInt(eventMs, 10)))
	id := room.AudioIDPrefix + "im-" + hex.EncodeToString(sum[:16])
	ctx, cancel := context.WithTimeout(ctx, h.cfg.AnswerTimeout)
	defer cancel()
	for _, app := range h.presence.apps {
		roomID, err := h.presence.where(ctx, app, user)
		if err != nil {
			h.log.Warn("im state change: the user's room could not be looked up", "app_code", app, "user_id", user, "error", err)
			return http.StatusServiceUnavailable, OutcomeUnavailable, imAnswer{}
		}
		if roomID == "" {
			continue
		}
		_, err = h.rooms.Execute(ctx, &v1.RoomCommand{Command: &v1.RoomCommand_AudioPresence{AudioPresence: &v1.AudioPresenceRequest{
			CommandId: id, AppCode: app, RoomId: roomID, UserId: user, Kind: kind, EventTimeMs: eventMs, Reason: reason,
			LeaveAfterMs: h.presence.staleAfter.Milliseconds()}}})
		switch {
		case err == nil:
		case final(err):
			h.log.Debug("im state change refused by the room", "app_code", app, "room_id", roomID, "user_id", user, "error", err)
		default:
			h.log.Warn("im state change: the room did not take it", "app_code", app, "room_id", roomID, "user_id", user, "command_id", id, "error", err)
			return http.StatusServiceUnavailable, OutcomeUnavailable, imAnswer{}
		}
	}
	return http.StatusOK, "ok", imOK
}
