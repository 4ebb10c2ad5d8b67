package imfake

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// The client side of IM that reaches the app's server through Tencent's
// third-party callbacks (IM "Third-Party Callback Overview",
// cloud.tencent.com document 269/1522): Tencent POSTs JSON to the app's
// callback URL with SdkAppid, CallbackCommand, contenttype, ClientIP and
// OptPlatform in the query and, with callback authentication on, Sign =
// hex(sha256(token + RequestTime)) and RequestTime (IM console "Callback
// Configuration", 269/32431). "Before" callbacks are asked and obeyed
// (ErrorCode 0 goes on, anything else refuses; no answer within 2 s lets
// the request go on); "after" ones and State.StateChange are told.

// ErrRefusedByApp is a client request the app's server refused through a
// "before" callback (Tencent gives the client 10016).
var ErrRefusedByApp = errors.New("imfake: refused by the app's callback (10016)")

// Refusals of a client's message by Tencent itself.
var (
	ErrNotInGroup = errors.New("imfake: not in the group")
	ErrMuted      = errors.New("imfake: muted in the group")
)

// Callbacks is the callback URL and token of an app.
type Callbacks struct {
	URL      string
	Token    string
	SDKAppID int64
	Client   *http.Client // nil: 2 s timeout, Tencent's for "before" callbacks

	mu  sync.Mutex
	Log []string // commands posted, in order (tests)
}

// SetCallbacks makes the fake reach the app's server through cb (nil: no
// callbacks).
func (s *Server) SetCallbacks(cb *Callbacks) {
	s.mu.Lock()
	s.cb = cb
	s.mu.Unlock()
}

func (s *Server) callbacks() *Callbacks {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cb
}

// post sends one callback; ok false when there was no usable answer.
func (cb *Callbacks) post(command, platform string, now time.Time, body any) (errorCode int, ok bool) {
	rt := strconv.FormatInt(now.Unix(), 10)
	sum := sha256.Sum256([]byte(cb.Token + rt))
	q := url.Values{"SdkAppid": {strconv.FormatInt(cb.SDKAppID, 10)}, "CallbackCommand": {command}, "contenttype": {"json"},
		"ClientIP": {"127.0.0.1"}, "OptPlatform": {platform}, "Sign": {hex.EncodeToString(sum[:])}, "RequestTime": {rt}}
	b, _ := json.Marshal(body)
	client := cb.Client
	if client == nil {
		client = &http.Client{Timeout: 2 * time.Second}
	}
	cb.mu.Lock()
	cb.Log = append(cb.Log, command)
	cb.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cb.URL+"?"+q.Encode(), bytes.NewReader(b))
	if err != nil {
		return 0, false
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	var a struct {
		ActionStatus string
		ErrorCode    int
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&a) != nil {
		return 0, false
	}
	return a.ErrorCode, true
}

// StateChange is a user's login, logout or disconnect (action Login,
// Logout or Disconnect), told to the app's server as State.StateChange.
func (s *Server) StateChange(userID, action, reason string) {
	cb := s.callbacks()
	if cb == nil {
		return
	}
	now := s.now()
	cb.post("State.StateChange", "Android", now, map[string]any{"CallbackCommand": "State.StateChange", "EventTime": now.UnixMilli(),
		"Info": map[string]string{"Action": action, "To_Account": userID, "Reason": reason}})
}

// SendFromClient is a user's client sending a text message to a group it
// is in: a muted member is refused by Tencent itself; then the app's
// server is asked (Group.CallbackBeforeSendMsg) and a refusal stops the
// message (ErrRefusedByApp). It returns whether the message went out.
func (s *Server) SendFromClient(groupID, userID, text string) error {
	if !s.InGroup(groupID, userID) {
		return ErrNotInGroup
	}
	if until, muted := s.MutedUntil(groupID, userID); muted && until.After(s.now()) {
		return ErrMuted
	}
	if cb := s.callbacks(); cb != nil {
		s.mu.Lock()
		typ := ""
		if g := s.groups[groupID]; g != nil {
			typ = g.Type
		}
		s.mu.Unlock()
		now := s.now()
		code, ok := cb.post("Group.CallbackBeforeSendMsg", "Android", now, map[string]any{"CallbackCommand": "Group.CallbackBeforeSendMsg",
			"GroupId": groupID, "Type": typ, "From_Account": userID, "Operator_Account": userID, "Random": now.UnixNano() % 1e9,
			"MsgBody": []any{map[string]any{"MsgType": "TIMTextElem", "MsgContent": map[string]string{"Text": text}}}, "EventTime": now.UnixMilli()})
		if ok && code != 0 {
			return ErrRefusedByApp
		}
	}
	s.mu.Lock()
	s.clientMsgs = append(s.clientMsgs, ClientMessage{GroupID: groupID, From: userID, Text: text})
	s.mu.Unlock()
	return nil
}

// JoinFromClient is a user's client applying to join a group: the app's
// server is asked first (Group.CallbackBeforeApplyJoinGroup), then the
// join goes as EnterGroup (a ban still refuses it).
func (s *Server) JoinFromClient(groupID, userID string) error {
	if cb := s.callbacks(); cb != nil {
		now := s.now()
		code, ok := cb.post("Group.CallbackBeforeApplyJoinGroup", "Android", now, map[string]any{"CallbackCommand": "Group.CallbackBeforeApplyJoinGroup",
			"GroupId": groupID, "Requestor_Account": userID, "EventTime": now.UnixMilli()})
		if ok && code != 0 {
			return ErrRefusedByApp
		}
	}
	return s.EnterGroup(groupID, userID)
}

// ClientMessage is a message a user's client sent that went out.
type ClientMessage struct {
	GroupID, From, Text string
}

// ClientMessages returns the client messages that went out, in order.
func (s *Server) ClientMessages() []ClientMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ClientMessage(nil), s.clientMsgs...)
}
