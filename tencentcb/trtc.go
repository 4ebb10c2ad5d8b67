package tencentcb

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/roomim"
	"github.com/hyapp/roomcell/delivery/tencentim"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/internal/promset"
	"github.com/hyapp/roomcell/room"
)

// Rooms runs a command in its room wherever the room is served
// (actors/roomgrain.Client).
type Rooms interface {
	Execute(ctx context.Context, rc *v1.RoomCommand) (*v1.CommandReply, error)
}

// TRTC event types this endpoint acts on (TRTC "Room&Media Webhooks"):
// the others (101 created, 105 role change, video and sub-stream, 204
// stopped audio: a 104 stands for it) are answered and counted.
const (
	trtcDismiss    = 102
	trtcEnter      = 103
	trtcExit       = 104
	trtcStartAudio = 203
)

var trtcKinds = map[int]string{trtcDismiss: room.AudioDismiss, trtcEnter: room.AudioEnter, trtcExit: room.AudioExit, trtcStartAudio: room.AudioStart}

// trtcEvent is a callback's body. Tencent adds fields over time: unknown
// ones are ignored.
type trtcEvent struct {
	EventGroupID int   `json:"EventGroupId"`
	EventType    int   `json:"EventType"`
	CallbackTs   int64 `json:"CallbackTs"`
	EventInfo    struct {
		RoomID    json.RawMessage `json:"RoomId"` // a number or a string
		EventTs   int64           `json:"EventTs"`
		EventMsTs int64           `json:"EventMsTs"`
		UserID    string          `json:"UserId"`
		UniqueID  json.RawMessage `json:"UniqueId"`
		Role      int             `json:"Role"`
		Reason    int             `json:"Reason"`
	} `json:"EventInfo"`
}

// TRTC serves TRTC's room & media callbacks.
type TRTC struct {
	cfg      configs.TRTCCallbackConfig
	key      []byte
	sdkAppID string // "" = any
	grace    time.Duration
	leave    time.Duration // presence.stale_after when TRTC is the presence source, else 0
	rooms    Rooms
	log      *slog.Logger
	now      func() time.Time
	// accepted remembers the command ids this node had accepted lately:
	// Tencent's retries of them are answered without a trip to the room
	// (the room's command_id is the dedupe that holds across nodes).
	accepted *tencentim.IDSet
	m        trtcMetrics
}

type trtcMetrics struct {
	callbacks *prometheus.CounterVec // outcome
	removals  *prometheus.CounterVec // reason
	dismissed prometheus.Counter
	answer    prometheus.Histogram
}

// Outcomes of a TRTC callback (roomcell_trtc_callbacks_total).
const (
	OutcomeAccepted    = "accepted"    // the room took the command (a room's duplicate included)
	OutcomeDuplicate   = "duplicate"   // this node had accepted it already
	OutcomeIgnored     = "ignored"     // an event type or a room this endpoint does not act on
	OutcomeRefused     = "refused"     // the room refused the command for good (gone, closed, bad id): nothing to retry
	OutcomeUnsigned    = "unsigned"    // no or a bad Sign: 401
	OutcomeMalformed   = "malformed"   // signed but not a callback: 400
	OutcomeTooLarge    = "too_large"   // over max_body: 413
	OutcomeUnavailable = "unavailable" // the room did not answer in time: 503, Tencent retries
)

// NewTRTC builds the endpoint from its config; sdkAppID (0: any) is
// checked against the SdkAppId header, grace is trtc.seat_grace. reg
// (nil: none) gets its metrics.
func NewTRTC(cfg configs.TRTCCallbackConfig, sdkAppID int64, grace time.Duration, rooms Rooms, log *slog.Logger, reg prometheus.Registerer) (*TRTC, error) {
	if cfg.Key == "" {
		return nil, errors.New("trtc.callback.key: required")
	}
	if log == nil {
		log = slog.Default()
	}
	h := &TRTC{cfg: cfg, key: []byte(cfg.Key), grace: grace, rooms: rooms, log: log, now: time.Now,
		accepted: tencentim.NewIDSet(1 << 16)}
	if sdkAppID > 0 {
		h.sdkAppID = strconv.FormatInt(sdkAppID, 10)
	}
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	s := promset.New(reg, "trtc callbacks")
	h.m = trtcMetrics{
		callbacks: s.CounterVec("roomcell_trtc_callbacks_total", "TRTC room & media callbacks by outcome: accepted, duplicate, ignored, refused, unsigned, malformed, too_large, unavailable.", "outcome"),
		removals:  s.CounterVec("roomcell_trtc_callback_removals_total", "Users the room removed from its audio room on a TRTC callback, by reason (not_member, banned, no_seat, seat_muted, seat_locked).", "reason"),
		dismissed: s.Counter("roomcell_trtc_rooms_dismissed_total", "TRTC dismissals (102) of the audio room of an open room."),
		answer:    s.Histogram("roomcell_trtc_callback_answer_seconds", "Time to answer a TRTC callback.", []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}),
	}
	return h, s.Err()
}

// FollowPresence makes TRTC the presence source (presence.source: trtc):
// an exit (104) carries staleAfter, after which the member leaves the
// room unless they entered again. Call it before serving.
func (h *TRTC) FollowPresence(staleAfter time.Duration) { h.leave = staleAfter }

func (h *TRTC) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	status, outcome := h.serve(r)
	h.m.callbacks.WithLabelValues(outcome).Inc()
	h.m.answer.Observe(time.Since(start).Seconds())
	if status != http.StatusOK {
		http.Error(w, outcome, status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"code":0}`)
}

func (h *TRTC) serve(r *http.Request) (int, string) {
	if r.Method != http.MethodPost {
		return http.StatusMethodNotAllowed, "method"
	}
	// The signature is checked before anything is decoded; the body is
	// read only up to max_body, and only when it is signed at all.
	sign := r.Header.Get("Sign")
	if sign == "" || len(sign) > 128 {
		return http.StatusUnauthorized, OutcomeUnsigned
	}
	if h.sdkAppID != "" && r.Header.Get("SdkAppId") != h.sdkAppID {
		return http.StatusUnauthorized, OutcomeUnsigned
	}
	if r.ContentLength > int64(h.cfg.MaxBody) {
		return http.StatusRequestEntityTooLarge, OutcomeTooLarge
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(h.cfg.MaxBody)+1))
	if err != nil {
		return http.StatusBadRequest, OutcomeMalformed
	}
	if len(body) > h.cfg.MaxBody {
		return http.StatusRequestEntityTooLarge, OutcomeTooLarge
	}
	if !trtcSigned(h.key, body, sign) {
		return http.StatusUnauthorized, OutcomeUnsigned
	}
	var ev trtcEvent
	if err := json.Unmarshal(body, &ev); err != nil || ev.EventType == 0 {
		return http.StatusBadRequest, OutcomeMalformed
	}
	kind, ok := trtcKinds[ev.EventType]
	if !ok {
		return http.StatusOK, OutcomeIgnored
	}
	rc, err := h.command(ev, kind)
	if err != nil {
		h.log.Info("trtc callback not routed", "event_type", ev.EventType, "error", err)
		return http.StatusOK, OutcomeIgnored
	}
	id := rc.GetAudioPresence().GetCommandId()
	if h.accepted.Has(id) {
		return http.StatusOK, OutcomeDuplicate
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.AnswerTimeout)
	defer cancel()
	reply, err := h.rooms.Execute(ctx, rc)
	switch {
	case err == nil:
	case !final(err):
		// Not taken: Tencent retries (at once, then every 10 s for a
		// minute), and the same command id makes the retry one command.
		h.log.Warn("trtc callback: room did not take it; Tencent retries", "command_id", id, "error", err)
		return http.StatusServiceUnavailable, OutcomeUnavailable
	default:
		// The room said no for good (gone, closed, an id it refuses):
		// a retry would get the same answer.
		h.log.Debug("trtc callback refused by the room", "command_id", id, "error", err)
		return http.StatusOK, OutcomeRefused
	}
	h.accepted.Add(id)
	if !reply.GetDuplicate() {
		h.count(rc.GetAudioPresence(), reply)
	}
	return http.StatusOK, OutcomeAccepted
}

// final reports whether the room's refusal holds for every retry: the
// room is gone or closed, or an id in the event is one it refuses. The
// rest (unavailable, overloaded, a conflict, the deadline) may pass.
func final(err error) bool {
	for _, c := range []error{errclass.Invalid, errclass.NotFound, errclass.Precondition, errclass.Permission, errclass.Exists} {
		if errors.Is(err, c) {
			return true
		}
	}
	return false
}

// count notes what the room did about the event.
func (h *TRTC) count(ap *v1.AudioPresenceRequest, reply *v1.CommandReply) {
	for _, e := range reply.GetEvents() {
		switch e.GetEventType() {
		case room.TypeRoomAudioRemoved:
			var rm room.RoomAudioRemoved
			if json.Unmarshal([]byte(e.GetPayload()), &rm) == nil {
				h.m.removals.WithLabelValues(rm.Reason).Inc()
				h.log.Info("trtc: user removed from the audio room", "app_code", ap.AppCode, "room_id", ap.RoomId,
					"user_id", rm.UserID, "reason", rm.Reason, "kind", rm.Kind)
			}
		case room.TypeRoomAudioDismissed:
			h.m.dismissed.Inc()
			h.log.Warn("trtc: the audio room of an open room was dismissed", "app_code", ap.AppCode, "room_id", ap.RoomId)
		}
	}
}

// command maps a callback onto the room's command.
func (h *TRTC) command(ev trtcEvent, kind string) (*v1.RoomCommand, error) {
	var gid string
	if err := json.Unmarshal(ev.EventInfo.RoomID, &gid); err != nil {
		return nil, fmt.Errorf("numeric room id %s: roomcell's audio rooms have string ids", ev.EventInfo.RoomID)
	}
	app, roomID, ok := roomim.RoomOfGroup(gid)
	if !ok {
		return nil, fmt.Errorf("room id %q names no room", gid)
	}
	at := ev.EventInfo.EventMsTs
	if at <= 0 {
		at = ev.EventInfo.EventTs * 1000
	}
	if at <= 0 {
		return nil, errors.New("no event time")
	}
	user := ev.EventInfo.UserID
	if kind == room.AudioDismiss {
		user = "trtc" // the room's own report, about nobody
	}
	var reason string
	var leave int64
	if kind == room.AudioExit {
		reason = "trtc_reason_" + strconv.Itoa(ev.EventInfo.Reason)
		leave = h.leave.Milliseconds()
	}
	// The event's identity: what Tencent sends again on a retry. Not
	// CallbackTs, which is the time of each try.
	sum := sha256.Sum256(bytes.Join([][]byte{[]byte(gid), []byte(strconv.Itoa(ev.EventType)), []byte(ev.EventInfo.UserID),
		ev.EventInfo.UniqueID, []byte(strconv.FormatInt(at, 10))}, []byte{0}))
	id := room.AudioIDPrefix + hex.EncodeToString(sum[:16])
	return &v1.RoomCommand{Command: &v1.RoomCommand_AudioPresence{AudioPresence: &v1.AudioPresenceRequest{
		CommandId: id, AppCode: app, RoomId: roomID, UserId: user, Kind: kind, EventTimeMs: at, Reason: reason,
		SeatGraceMs: h.grace.Milliseconds(), LeaveAfterMs: leave,
	}}}, nil
}
