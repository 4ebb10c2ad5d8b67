// Package trtcfake is a fake Tencent TRTC server API (Cloud API 3.0) on
// loopback for tests and --dev: it checks a request the way Tencent's
// gateway does (POST JSON, the X-TC-* headers, the TC3-HMAC-SHA256
// signature with the fake's key pair, a timestamp within five minutes),
// implements RemoveUserByStrRoomId and DismissRoomByStrRoomId over its
// own audio rooms (which users enter as the client SDK would: Join with
// their UserSig and PrivateMapKey, checked when advanced permission
// control is on, then StartAudio; clients.go),
// records every call and takes injected faults (error codes, a failing
// period, HTTP statuses). It is never a production path, never listens
// off loopback, and touches nothing but its own memory.
package trtcfake

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/trtc"
	"github.com/hyapp/roomcell/internal/loopserve"
)

// DefaultSDKAppID is the app id a fake accepts unless told otherwise.
const DefaultSDKAppID = 1400000001

// Call is one request the fake received, whatever its outcome.
type Call struct {
	Action     string
	RoomID     string
	UserIDs    []string
	Code       string // "" = success
	HTTPStatus int
	At         time.Time
}

// Server is the fake.
type Server struct {
	sdkAppID  int64
	secretID  string
	secretKey string
	sigKey    string // the app's UserSig key: signs and checks tickets
	now       func() time.Time
	log       *slog.Logger

	srv *loopserve.Server

	mu        sync.Mutex
	rooms     map[string]map[string]bool // room → users in it
	removed   map[string][]string        // room → users removed, in order
	dismissed map[string]int             // room → dismissals
	calls     []Call
	failNext  int
	failCode  string
	failing   string // every call fails with this code until cleared
	status    int
	requests  int
	clients   clientSide // the client SDK's side: sessions, keys, publishing (clients.go)

	cb *Callbacks // reports the rooms' events (callbacks.go); nil: none
}

// Option configures a Server.
type Option func(*Server)

// WithSDKAppID sets the app id the fake accepts.
func WithSDKAppID(id int64) Option { return func(s *Server) { s.sdkAppID = id } }

// WithClock replaces time.Now for the timestamp check.
func WithClock(now func() time.Time) Option { return func(s *Server) { s.now = now } }

// WithLogger sets the logger calls are logged to (Debug).
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = l } }

// Start listens on addr (loopback only; port 0 picks one).
func Start(addr string, opts ...Option) (*Server, error) {
	if err := loopserve.Check("trtcfake", addr); err != nil {
		return nil, err
	}
	s := &Server{
		sdkAppID:  DefaultSDKAppID,
		secretID:  "AKIDfake" + random(8),
		secretKey: random(16),
		sigKey:    random(32),
		now:       time.Now,
		log:       slog.Default(),
		rooms:     map[string]map[string]bool{},
		removed:   map[string][]string{},
		dismissed: map[string]int{},
	}
	s.clients.init()
	for _, o := range opts {
		o(s)
	}
	srv, err := loopserve.Start("trtcfake", addr, http.HandlerFunc(s.handle))
	if err != nil {
		return nil, err
	}
	s.srv = srv
	s.startClients()
	return s, nil
}

func random(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// URL is the fake's endpoint.
func (s *Server) URL() string { return s.srv.URL() }

// Transport returns an http.RoundTripper that serves requests to this
// fake in the calling goroutine, without the loopback connection
// (loopserve's Transport): the same handler, signature checks and
// recording as over HTTP. Dev mode points its TRTC client at the fake
// with it. A request for any other host fails.
func (s *Server) Transport() http.RoundTripper { return s.srv.Transport("trtcfake") }

// ClientConfig is a client configuration aimed at this fake with its key
// pair and its app's UserSig key (tickets signed with it pass the fake). Enabled stays false: the process is not talking to Tencent.
func (s *Server) ClientConfig() configs.TRTCConfig {
	return configs.TRTCConfig{SDKAppID: s.sdkAppID, SecretID: s.secretID, SecretKey: s.secretKey,
		Region: "ap-guangzhou", Endpoint: s.URL(), Timeout: 5 * time.Second, RatePerSecond: 1000,
		SigKey: s.sigKey, TicketTTL: 5 * time.Minute, UserSigTTL: 24 * time.Hour}
}

// Close stops the server.
func (s *Server) Close() error {
	s.clients.stop()
	return s.srv.Close()
}

type apiError struct{ code, msg string }

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	call := Call{Action: r.Header.Get("X-TC-Action"), At: s.now()}
	s.mu.Lock()
	status := s.status
	s.mu.Unlock()
	if status != 0 {
		call.HTTPStatus = status
		s.record(call)
		http.Error(w, http.StatusText(status), status)
		return
	}
	aerr := s.serve(r, &call)
	s.mu.Lock()
	s.requests++
	reqID := fmt.Sprintf("fake-%d", s.requests)
	s.mu.Unlock()
	resp := map[string]any{"RequestId": reqID}
	if aerr != nil {
		call.Code = aerr.code
		resp["Error"] = map[string]string{"Code": aerr.code, "Message": aerr.msg}
	}
	s.record(call)
	s.log.Debug("fake trtc call", "action", call.Action, "room_id", call.RoomID, "users", call.UserIDs, "code", call.Code)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"Response": resp})
}

func (s *Server) record(c Call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.calls) >= 100_000 {
		s.calls = slices.Delete(s.calls, 0, len(s.calls)/2)
	}
	s.calls = append(s.calls, c)
}

// serve checks the request as Tencent's gateway does, applies injected
// faults, then runs the action.
func (s *Server) serve(r *http.Request, call *Call) *apiError {
	if r.Method != http.MethodPost {
		return &apiError{"UnsupportedProtocol", "POST only"}
	}
	ct := r.Header.Get("Content-Type")
	if !strings.HasPrefix(ct, "application/json") {
		return &apiError{"UnsupportedProtocol", "Content-Type must be application/json"}
	}
	if r.Header.Get("X-TC-Version") != trtc.Version {
		return &apiError{"NoSuchVersion", "X-TC-Version must be " + trtc.Version}
	}
	if r.Header.Get("X-TC-Region") == "" {
		return &apiError{"MissingParameter", "X-TC-Region is required"}
	}
	ts, err := strconv.ParseInt(r.Header.Get("X-TC-Timestamp"), 10, 64)
	if err != nil {
		return &apiError{"MissingParameter", "X-TC-Timestamp is required"}
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil || !json.Valid(body) {
		return &apiError{"InvalidParameter", "body is not JSON"}
	}
	id, scope, headers, sig, ok := trtc.ParseAuthorization(r.Header.Get("Authorization"))
	if !ok {
		return &apiError{"AuthFailure.SignatureFailure", "Authorization is not TC3-HMAC-SHA256"}
	}
	if id != s.secretID {
		return &apiError{"AuthFailure.SecretIdNotFound", "unknown SecretId"}
	}
	if d := s.now().Sub(time.Unix(ts, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return &apiError{"AuthFailure.SignatureExpire", "timestamp is more than 5 minutes from the server's time"}
	}
	want := trtc.Request{Host: r.Host, ContentType: ct, Payload: body, Service: "trtc", Timestamp: ts}
	if headers != "content-type;host" || scope != want.CredentialScope() || sig != want.Signature(s.secretKey) {
		return &apiError{"AuthFailure.SignatureFailure", "signature mismatch"}
	}
	var req struct {
		SdkAppID *int64   `json:"SdkAppId"`
		RoomID   string   `json:"RoomId"`
		UserIDs  []string `json:"UserIds"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return &apiError{"InvalidParameter", "fields have the wrong types"}
	}
	call.RoomID, call.UserIDs = req.RoomID, req.UserIDs
	if req.SdkAppID == nil {
		return &apiError{"MissingParameter.SdkAppId", "SdkAppId is required"}
	}
	if *req.SdkAppID != s.sdkAppID {
		return &apiError{"UnauthorizedOperation.SdkAppId", "no permission on this SdkAppId"}
	}
	if req.RoomID == "" {
		return &apiError{"MissingParameter.RoomId", "RoomId is required"}
	}
	if len(req.RoomID) > 64 {
		return &apiError{"InvalidParameterValue.RoomId", "RoomId is over 64 bytes"}
	}
	if code, ok := s.injected(); ok {
		return &apiError{code, "injected fault"}
	}
	switch call.Action {
	case trtc.ActionRemoveUser:
		if len(req.UserIDs) == 0 {
			return &apiError{"MissingParameter.UserIds", "UserIds is required"}
		}
		if len(req.UserIDs) > trtc.MaxRemoveUsers {
			return &apiError{"InvalidParameter.UserIds", "at most 10 users"}
		}
		return s.removeUsers(req.RoomID, req.UserIDs)
	case trtc.ActionDismissRoom:
		return s.dismiss(req.RoomID)
	}
	return &apiError{"InvalidAction", "unknown action " + call.Action}
}

func (s *Server) injected() (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failing != "" {
		return s.failing, true
	}
	if s.failNext > 0 {
		s.failNext--
		return s.failCode, true
	}
	return "", false
}

func (s *Server) removeUsers(roomID string, users []string) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.rooms[roomID]
	if in == nil {
		return &apiError{trtc.CodeRoomNotExist, "room does not exist"}
	}
	for _, u := range users {
		if in[u] {
			s.leftLocked(roomID, u, ExitRemoved)
		}
		delete(in, u)
		s.removed[roomID] = append(s.removed[roomID], u)
	}
	return nil
}

func (s *Server) dismiss(roomID string) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rooms[roomID] == nil {
		return &apiError{trtc.CodeRoomNotExist, "room does not exist"}
	}
	for u := range s.rooms[roomID] {
		s.leftLocked(roomID, u, ExitDismissed)
	}
	delete(s.rooms, roomID)
	s.dismissed[roomID]++
	return nil
}

// EnterRoom puts a user in an audio room as the client SDK's enterRoom
// does (a room exists while it has been entered and not dismissed).
func (s *Server) EnterRoom(roomID, userID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.enterLocked(roomID, userID)
}

// enterLocked puts userID in the room, making it (under s.mu).
func (s *Server) enterLocked(roomID, userID string) {
	in := s.rooms[roomID]
	if in == nil {
		in = map[string]bool{}
		s.rooms[roomID] = in
	}
	in[userID] = true
}

// InRoom reports whether userID is in the audio room.
func (s *Server) InRoom(roomID, userID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rooms[roomID][userID]
}

// RoomExists reports whether the audio room exists (entered, not dismissed).
func (s *Server) RoomExists(roomID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rooms[roomID] != nil
}

// Removed returns the users removed from a room, in call order.
func (s *Server) Removed(roomID string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.removed[roomID])
}

// Dismissed returns how many times the room was dismissed.
func (s *Server) Dismissed(roomID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dismissed[roomID]
}

// Calls returns every call received, in order.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// FailNext answers the next n authenticated calls with code.
func (s *Server) FailNext(n int, code string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failNext, s.failCode = n, code
}

// SetFailing answers every authenticated call with code until cleared
// with ""; an outage of the TRTC backend.
func (s *Server) SetFailing(code string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failing = code
}

// SetHTTPStatus fails every call at the gateway with status (0: off).
func (s *Server) SetHTTPStatus(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status = status
}
