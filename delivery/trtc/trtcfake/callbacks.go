package trtcfake

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// TRTC's room & media event types the fake reports (TRTC "Room&Media
// Webhooks", trtc.io document 39558).
const (
	EventDismissRoom = 102
	EventEnterRoom   = 103
	EventExitRoom    = 104
	EventStartAudio  = 203
	EventStopAudio   = 204
)

// Callbacks posts TRTC's room & media callbacks to a URL the way Tencent
// does: a POST of a JSON body with the headers Sign (base64 of the
// HMAC-SHA256 of the body's bytes under the console's callback key) and
// SdkAppId; anything but a 200 within 5 s is a failure, tried again at
// once, then every 10 s, until a minute after the first try. So delivery
// is at least once, and a receiver must expect the same event again and
// events out of order. For tests it also sends each callback twice
// (SetDuplicate) and holds callbacks back to send them in reverse order
// (Hold, ReleaseReversed).
type Callbacks struct {
	url        string
	key        []byte
	sdkAppID   int64
	client     *http.Client
	retryEvery time.Duration
	retryFor   time.Duration
	now        func() time.Time

	seq       atomic.Int64
	delivered atomic.Int64
	gaveUp    atomic.Int64
	// inFlight counts the deliveries still posting or retrying, under
	// flightMu; idle is signalled when it reaches 0. Not a WaitGroup:
	// the fake server reports events (and so starts deliveries) while a
	// test waits, and a WaitGroup's Add from zero must not run
	// concurrently with its Wait.
	flightMu sync.Mutex
	idle     *sync.Cond
	inFlight int
	stop     chan struct{}
	stopOnce sync.Once

	mu      sync.Mutex
	dup     bool
	holding bool
	held    [][]byte
}

// CallbackOption configures Callbacks.
type CallbackOption func(*Callbacks)

// WithRetry replaces Tencent's retry schedule (every 10 s for a minute),
// for tests that cannot wait a minute.
func WithRetry(every, giveUpAfter time.Duration) CallbackOption {
	return func(c *Callbacks) { c.retryEvery, c.retryFor = every, giveUpAfter }
}

// WithCallbackClock replaces time.Now for the events' times.
func WithCallbackClock(now func() time.Time) CallbackOption {
	return func(c *Callbacks) { c.now = now }
}

// NewCallbacks posts to url, signing with key, as sdkAppID.
func NewCallbacks(url, key string, sdkAppID int64, opts ...CallbackOption) *Callbacks {
	c := &Callbacks{url: url, key: []byte(key), sdkAppID: sdkAppID, client: &http.Client{Timeout: 5 * time.Second},
		retryEvery: 10 * time.Second, retryFor: time.Minute, now: time.Now, stop: make(chan struct{})}
	c.idle = sync.NewCond(&c.flightMu)
	for _, o := range opts {
		o(c)
	}
	return c
}

// SetDuplicate makes every callback go twice (or once again).
func (c *Callbacks) SetDuplicate(on bool) {
	c.mu.Lock()
	c.dup = on
	c.mu.Unlock()
}

// Hold keeps the callbacks made from now on until ReleaseReversed.
func (c *Callbacks) Hold() {
	c.mu.Lock()
	c.holding = true
	c.mu.Unlock()
}

// ReleaseReversed sends the held callbacks, newest first.
func (c *Callbacks) ReleaseReversed() {
	c.mu.Lock()
	held := c.held
	c.held, c.holding = nil, false
	c.mu.Unlock()
	slices.Reverse(held)
	for _, b := range held {
		c.deliver(b)
	}
}

// Report posts one event about userID in the audio room roomID (reason:
// a 104's). It returns at once; delivery and its retries run behind.
func (c *Callbacks) Report(eventType int, roomID, userID string, reason int) {
	at := c.now()
	group := 1
	if eventType >= 200 {
		group = 2
	}
	body, _ := json.Marshal(map[string]any{
		"EventGroupId": group, "EventType": eventType, "CallbackTs": at.UnixMilli(),
		"EventInfo": map[string]any{"RoomId": roomID, "EventTs": at.Unix(), "EventMsTs": at.UnixMilli(), "UserId": userID,
			"UniqueId": at.UnixMilli()*1000 + c.seq.Add(1)%1000, "Role": 20, "TerminalType": 3, "UserType": 3, "Reason": reason},
	})
	c.mu.Lock()
	if c.holding {
		c.held = append(c.held, body)
		c.mu.Unlock()
		return
	}
	dup := c.dup
	c.mu.Unlock()
	c.deliver(body)
	if dup {
		c.deliver(body)
	}
}

func (c *Callbacks) deliver(body []byte) {
	c.flightMu.Lock()
	c.inFlight++
	c.flightMu.Unlock()
	go func() {
		defer func() {
			c.flightMu.Lock()
			if c.inFlight--; c.inFlight == 0 {
				c.idle.Broadcast()
			}
			c.flightMu.Unlock()
		}()
		first := time.Now()
		for {
			if c.post(body) {
				c.delivered.Add(1)
				return
			}
			wait := c.retryEvery
			if time.Since(first) < time.Millisecond*10 {
				wait = 0 // Tencent tries again at once after the first failure
			}
			if time.Since(first)+wait > c.retryFor {
				c.gaveUp.Add(1)
				return
			}
			select {
			case <-c.stop:
				return
			case <-time.After(wait):
			}
		}
	}()
}

func (c *Callbacks) post(body []byte) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return false
	}
	m := hmac.New(sha256.New, c.key)
	m.Write(body)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Sign", base64.StdEncoding.EncodeToString(m.Sum(nil)))
	req.Header.Set("SdkAppId", strconv.FormatInt(c.sdkAppID, 10))
	resp, err := c.client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Delivered counts callbacks answered 200; GaveUp those retried for the
// whole minute in vain.
func (c *Callbacks) Delivered() int64 { return c.delivered.Load() }
func (c *Callbacks) GaveUp() int64    { return c.gaveUp.Load() }

// Wait returns when every callback made so far is delivered or given up.
func (c *Callbacks) Wait() {
	c.flightMu.Lock()
	for c.inFlight > 0 {
		c.idle.Wait()
	}
	c.flightMu.Unlock()
}

// Close stops retrying and waits for the posts in flight.
func (c *Callbacks) Close() {
	c.stopOnce.Do(func() { close(c.stop) })
	c.Wait()
}

// exitReasons are the 104 Reason codes the fake reports for its exits
// (TRTC "Room&Media Webhooks": 1 a normal exit, 2 a timeout, 3 kicked
// out; a dismissal is reported here as 3 too).
var exitReasons = map[string]int{ExitLeft: 1, ExitTimeout: 2, ExitRemoved: 3, ExitDismissed: 3}

var activityEvents = map[string]int{ActEnter: EventEnterRoom, ActExit: EventExitRoom, ActStartAudio: EventStartAudio, ActStopAudio: EventStopAudio}

// activity posts what a user did in an audio room as its callback.
func (c *Callbacks) activity(a Activity) {
	if t, ok := activityEvents[a.Kind]; ok {
		c.Report(t, a.RoomID, a.UserID, exitReasons[a.Reason])
	}
}

// WithCallbacks makes the fake report every Activity of its audio rooms
// (enters, exits, audio started and stopped) through cb.
func WithCallbacks(cb *Callbacks) Option { return func(s *Server) { s.cb = cb } }

// UserEnters puts a user in the audio room without the client side's
// checks (EnterRoom) and reports the enter (a 103).
func (s *Server) UserEnters(roomID, userID string) {
	s.EnterRoom(roomID, userID)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.emitLocked(Activity{RoomID: roomID, UserID: userID, Kind: ActEnter, At: s.now()})
}

// UserExits takes a user out of the audio room at once, for reason (one
// of the Exit* reasons), and reports the exit (a 104): what TRTC does at
// the end of CutAudio's silence timeout, without the wait.
func (s *Server) UserExits(roomID, userID, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leftLocked(roomID, userID, reason)
	delete(s.rooms[roomID], userID)
}

// StartFake starts a fake on loopback for a test, closed at its end.
func StartFake(t interface {
	Helper()
	Fatal(...any)
	Cleanup(func())
}, opts ...Option) *Server {
	t.Helper()
	s, err := Start("127.0.0.1:0", opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// SetCallbacks makes a running fake report through cb from now on (nil:
// no reports).
func (s *Server) SetCallbacks(cb *Callbacks) {
	s.mu.Lock()
	s.cb = cb
	s.mu.Unlock()
}
