package imfake

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/tencentim"
	"github.com/hyapp/roomcell/internal/loopserve"
)

// Defaults of a fake started without options.
const (
	DefaultSDKAppID = 1400000000
	DefaultAdmin    = "administrator"
)

// Server is a fake Tencent IM REST endpoint on loopback.
type Server struct {
	sdkAppID int64
	secret   string
	admins   map[string]bool
	now      func() time.Time
	log      *slog.Logger

	srv *loopserve.Server

	mu       sync.Mutex
	accounts map[string]bool
	groups   map[string]*group
	messages []Message
	// recordedBytes is recordedSize summed over messages.
	recordedBytes int
	calls         []Call
	groupDedupe   *dedupe[groupKey]
	c2cDedupe     *dedupe[c2cKey]
	duplicates    int
	autoGroupID   int
	faults        faults
	groupSends    map[string][]time.Time // for the optional per-group rate check
	goodSigs      map[string]tencentim.SigInfo
	// viewers: group → users a test put in through EnterGroup (members.go).
	viewers map[string]map[string]*viewer
	// cb and clientMsgs: the app's callbacks and the messages clients
	// sent through them (callbacks.go).
	cb         *Callbacks
	clientMsgs []ClientMessage
}

type group struct {
	ID    string
	Type  string
	Name  string
	Owner string
	// ownerIn is the owner's membership and members everyone else's,
	// made on the first: most groups (every AVChatRoom) only ever hold
	// their owner, and a map per group was ~250 bytes of each room on a
	// dev node.
	ownerIn bool
	members map[string]bool
	Seq     uint64
	// banned: user → end of their ban (ban_group_member); nil until one.
	banned map[string]time.Time
	// muted: user → end of their mute (forbid_send_msg); nil until one.
	muted map[string]time.Time
}

func (g *group) isMember(user string) bool {
	return (user == g.Owner && g.ownerIn) || g.members[user]
}

func (g *group) addMember(user string) {
	if user == g.Owner {
		g.ownerIn = true
		return
	}
	if g.members == nil {
		g.members = map[string]bool{}
	}
	g.members[user] = true
}

func (g *group) removeMember(user string) {
	if user == g.Owner {
		g.ownerIn = false
	}
	delete(g.members, user)
}

// memberList is the members, sorted.
func (g *group) memberList() []string {
	out := make([]string, 0, len(g.members)+1)
	if g.ownerIn {
		out = append(out, g.Owner)
	}
	for m := range g.members {
		out = append(out, m)
	}
	slices.Sort(out)
	return out
}

// GroupInfo is a group as the fake holds it.
type GroupInfo struct {
	ID      string
	Type    string
	Name    string
	Owner   string
	Members []string
	LastSeq uint64
}

// Message is one message the fake accepted (duplicates are not recorded,
// only counted).
type Message struct {
	ID              int       `json:"id"`   // acceptance order, from 1
	Kind            string    `json:"kind"` // "group" or "c2c"
	GroupID         string    `json:"group_id,omitempty"`
	To              string    `json:"to,omitempty"`
	From            string    `json:"from,omitempty"`
	MsgSeq          uint64    `json:"msg_seq"`
	Random          uint32    `json:"random"`
	Priority        string    `json:"priority,omitempty"`
	Data            string    `json:"data"`
	Desc            string    `json:"desc,omitempty"`
	Ext             string    `json:"ext,omitempty"`
	CloudCustomData string    `json:"cloud_custom_data,omitempty"`
	EventIDs        []string  `json:"event_ids"`
	At              time.Time `json:"at"`
}

// Call is one request the fake received, whatever its outcome.
type Call struct {
	API        string    `json:"api"`
	At         time.Time `json:"at"` // arrival, before any injected delay
	Code       int       `json:"code"`
	HTTPStatus int       `json:"http_status"`
	// SigIssuedAt is the TLS.time of the request's UserSig (zero if it
	// did not parse).
	SigIssuedAt time.Time `json:"sig_issued_at"`
}

type groupKey struct {
	group  string
	random uint32
}

type c2cKey struct {
	from         string
	seq, random  uint32
	contentCRC32 uint32
}

type dedupeHit struct {
	at     time.Time
	seq    uint64
	msgKey string
}

// Option configures a Server.
type Option func(*Server)

// WithSDKAppID sets the app id the fake accepts.
func WithSDKAppID(id int64) Option { return func(s *Server) { s.sdkAppID = id } }

// WithSecretKey sets the key UserSigs must be signed with.
func WithSecretKey(key string) Option { return func(s *Server) { s.secret = key } }

// WithAdmins sets the App administrator identifiers (default
// "administrator").
func WithAdmins(ids ...string) Option {
	return func(s *Server) {
		s.admins = map[string]bool{}
		for _, id := range ids {
			s.admins[id] = true
		}
	}
}

// WithLogger sets the logger the accepted messages are logged to.
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = l } }

// WithClock replaces time.Now for UserSig expiry and the dedupe windows.
func WithClock(now func() time.Time) Option { return func(s *Server) { s.now = now } }

// Start listens on addr (which must be a loopback address; port 0 picks
// one) and serves until Close.
func Start(addr string, opts ...Option) (*Server, error) {
	if err := loopserve.Check("imfake", addr); err != nil {
		return nil, err
	}
	s := &Server{
		sdkAppID:    DefaultSDKAppID,
		admins:      map[string]bool{DefaultAdmin: true},
		now:         time.Now,
		log:         slog.Default(),
		accounts:    map[string]bool{},
		groups:      map[string]*group{},
		groupDedupe: newDedupe[groupKey](groupDedupeWindow),
		c2cDedupe:   newDedupe[c2cKey](c2cDedupeWindow),
		groupSends:  map[string][]time.Time{},
		goodSigs:    map[string]tencentim.SigInfo{},
		viewers:     map[string]map[string]*viewer{},
	}
	for _, o := range opts {
		o(s)
	}
	if s.secret == "" {
		s.secret = randomSecret()
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/v4/", s.handleAPI)
	mux.HandleFunc("GET /debug/messages", s.handleDebugMessages)
	mux.HandleFunc("GET /{$}", s.handleIndex)
	srv, err := loopserve.Start("imfake", addr, mux)
	if err != nil {
		return nil, err
	}
	s.srv = srv
	return s, nil
}

// StartDev starts a fake on a free loopback port with a random secret and
// returns the configuration that points the real client at it. Dev mode
// (--dev) uses it in place of Tencent; the received messages are logged
// and listed at URL()+"/".
func StartDev(logger *slog.Logger) (*Server, configs.TencentIMConfig, error) {
	secret := randomSecret()
	s, err := Start("127.0.0.1:0", WithSecretKey(secret), WithLogger(logger))
	if err != nil {
		return nil, configs.TencentIMConfig{}, err
	}
	logger.Info("fake tencent im started", "url", s.URL(), "messages", s.URL()+"/debug/messages")
	return s, s.ClientConfig(), nil
}

// ClientConfig returns a client configuration aimed at this fake with its
// credentials. Enabled stays false: the process is not talking to Tencent.
func (s *Server) ClientConfig() configs.TencentIMConfig {
	var admin string
	for a := range s.admins {
		if admin == "" || a < admin {
			admin = a
		}
	}
	return configs.TencentIMConfig{
		SDKAppID:        s.sdkAppID,
		SecretKey:       s.secret,
		AdminIdentifier: admin,
		BaseURL:         s.URL(),
		Timeout:         4 * time.Second,
	}
}

func randomSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// URL is the fake's base URL (http://127.0.0.1:port).
func (s *Server) URL() string { return s.srv.URL() }

// Close stops the server; in-flight requests (even delayed ones) end.
func (s *Server) Close() error { return s.srv.Close() }

// apiError is a Tencent-style failure: HTTP 200, envelope with a code.
type apiError struct {
	code int
	info string
}

func fail(code int, info string) *apiError { return &apiError{code: code, info: info} }

func (s *Server) handleAPI(w http.ResponseWriter, r *http.Request) {
	arrived := s.now()
	// A clone: the path shares the request URL's backing string, UserSig and
	// all (~460 bytes a call kept by the call log).
	call := Call{API: strings.Clone(strings.TrimPrefix(r.URL.Path, "/v4/")), At: arrived}
	if r.Method != http.MethodPost {
		call.HTTPStatus = http.StatusMethodNotAllowed
		s.recordCall(call)
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	delay, status := s.faults.preflight(&s.mu)

	var resp map[string]any
	var aerr *apiError
	if status != 0 {
		call.HTTPStatus = status
	} else {
		resp, aerr = s.serve(r, &call)
	}
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
		}
		t.Stop()
	}
	if status != 0 {
		s.recordCall(call)
		http.Error(w, http.StatusText(status), status)
		return
	}
	if aerr != nil {
		call.Code = aerr.code
		resp = map[string]any{"ActionStatus": "FAIL", "ErrorCode": aerr.code, "ErrorInfo": aerr.info}
	} else {
		resp["ActionStatus"], resp["ErrorCode"], resp["ErrorInfo"] = "OK", 0, ""
	}
	s.recordCall(call)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

func (s *Server) recordCall(c Call) {
	s.mu.Lock()
	if len(s.calls) >= maxRecorded {
		s.calls = slices.Delete(s.calls, 0, len(s.calls)/2)
	}
	s.calls = append(s.calls, c)
	s.mu.Unlock()
}

// serve checks the request the way Tencent's gateway does,
// applies injected failures, then runs the API.
func (s *Server) serve(r *http.Request, call *Call) (map[string]any, *apiError) {
	q := r.URL.Query()
	for _, k := range []string{"sdkappid", "identifier", "usersig", "random", "contenttype"} {
		if !q.Has(k) {
			if k == "usersig" {
				return nil, fail(70002, "usersig is empty")
			}
			return nil, fail(60002, "missing query parameter "+k)
		}
	}
	if q.Get("contenttype") != "json" {
		return nil, fail(60002, "contenttype must be json")
	}
	if _, err := strconv.ParseUint(q.Get("random"), 10, 32); err != nil {
		return nil, fail(60002, "random must be a uint32")
	}
	appID, err := strconv.ParseInt(q.Get("sdkappid"), 10, 64)
	if err != nil || appID != s.sdkAppID {
		return nil, fail(70020, "sdkappid not found")
	}
	identifier, sig := q.Get("identifier"), q.Get("usersig")
	if sig == "" {
		return nil, fail(70002, "usersig is empty")
	}
	info, err := s.checkSig(sig, appID, identifier)
	call.SigIssuedAt = info.IssuedAt
	switch {
	case err == nil:
	case errors.Is(err, tencentim.ErrSigExpired):
		return nil, fail(70001, "usersig expired")
	case errors.Is(err, tencentim.ErrSigSDKAppIDMismatch):
		return nil, fail(70014, "sdkappid in usersig does not match")
	case errors.Is(err, tencentim.ErrSigIdentifierMismatch):
		return nil, fail(70013, "identifier in usersig does not match")
	case errors.Is(err, tencentim.ErrSigMismatch):
		return nil, fail(70009, "usersig verification failed")
	default:
		return nil, fail(70003, "usersig invalid")
	}
	if !s.admins[identifier] {
		return nil, fail(60010, "identifier is not an app administrator")
	}
	body, err := readBody(r, 1<<20)
	if err != nil || len(body) == 0 || !parsesWhole[call.API] && !json.Valid(body) {
		return nil, fail(60003, errInvalidJSON)
	}
	if code, ok := s.faults.injected(&s.mu, call.API); ok {
		return nil, fail(code, "injected fault")
	}
	h, ok := apis[call.API]
	if !ok {
		return nil, fail(60002, "unknown api")
	}
	return h(s, body)
}

// errInvalidJSON is the message of 60003, a body that is not JSON.
const errInvalidJSON = "invalid json body"

// parsesWhole are the APIs whose handler decodes the whole body first with
// encoding/json and answers a syntax error with 60003 itself: their
// bodies are scanned once instead of twice (json.Valid, then the decode's
// own scan), which was a third of the fake's cost per room message. Their
// injected faults (FailNext, FailFraction) come before that check.
var parsesWhole = map[string]bool{tencentim.APISendGroupMsg: true}

// readBody reads at most limit bytes of r's body, in one allocation when
// its length is known: io.ReadAll grows from 512 bytes, and a message's
// body cost ~2.5 KB of copies that every end-to-end figure paid for the
// test double.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	n := r.ContentLength
	if n <= 0 || n > limit {
		return io.ReadAll(io.LimitReader(r.Body, limit))
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r.Body, b); err != nil {
		return nil, err
	}
	return b, nil
}

// checkSig verifies a UserSig, remembering the ones whose HMAC checked
// out: inflating every request's sig would dominate the fake's cost.
// Expiry and the sdkappid/identifier match are checked every time.
func (s *Server) checkSig(sig string, appID int64, identifier string) (tencentim.SigInfo, error) {
	now := s.now()
	s.mu.Lock()
	info, ok := s.goodSigs[sig]
	s.mu.Unlock()
	if !ok {
		info, err := tencentim.ParseUserSig(sig)
		if err != nil {
			return tencentim.SigInfo{}, err
		}
		if err := tencentim.VerifyUserSig(sig, appID, s.secret, identifier, now); err != nil {
			return info, err
		}
		s.mu.Lock()
		if len(s.goodSigs) >= 1024 {
			clear(s.goodSigs)
		}
		s.goodSigs[sig] = info
		s.mu.Unlock()
		return info, nil
	}
	switch {
	case info.SDKAppID != appID:
		return info, tencentim.ErrSigSDKAppIDMismatch
	case info.Identifier != identifier:
		return info, tencentim.ErrSigIdentifierMismatch
	case now.After(info.IssuedAt.Add(info.Expire)):
		return info, tencentim.ErrSigExpired
	}
	return info, nil
}

var apis = map[string]func(*Server, []byte) (map[string]any, *apiError){
	tencentim.APIAccountImport:             (*Server).accountImport,
	tencentim.APISendMsg:                   (*Server).sendMsg,
	tencentim.APISendGroupMsg:              (*Server).sendGroupMsg,
	tencentim.APICreateGroup:               (*Server).createGroup,
	tencentim.APIDeleteGroupMember:         (*Server).deleteGroupMember,
	tencentim.APIDestroyGroup:              (*Server).destroyGroup,
	tencentim.APIBanGroupMember:            (*Server).banGroupMember,
	tencentim.APIForbidSendMsg:             (*Server).forbidSendMsg,
	tencentim.APIUnbanGroupMember:          (*Server).unbanGroupMember,
	tencentim.APIGetGroupBanMember:         (*Server).getGroupBanMember,
	"group_open_http_svc/add_group_member": (*Server).addGroupMember,
}
