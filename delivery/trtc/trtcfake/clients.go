package trtcfake

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hyapp/roomcell/delivery/tencentim"
	"github.com/hyapp/roomcell/delivery/trtc"
)

// The client SDK's side of the fake: users who enter a room with their
// UserSig (and, when the app runs TRTC's advanced permission control, a
// PrivateMapKey), start and stop sending audio, and lose their connection.
// It follows Tencent's pages: "Enabling Advanced Permission Control"
// (cloud.tencent.com/document/product/647/32240; trtc.io/document/35157):
// with the control on, entering needs a key for that room and user with
// bit 2 (enter), sending audio needs bit 3; a key is checked when it is
// presented (enter, publish, updatePrivateMapKey), so one issued before
// a user's rights shrank keeps working until it expires or the user is
// removed. A user whose connection is gone is dropped after TRTC's
// timeout (30 s by default) with the exit reason "timeout".

// Exit reasons of Activity, as TRTC's room and media callbacks name them.
const (
	ExitLeft      = "left"      // the user left (exitRoom)
	ExitTimeout   = "timeout"   // the connection was gone for the silence timeout
	ExitRemoved   = "removed"   // RemoveUserByStrRoomId
	ExitDismissed = "dismissed" // DismissRoomByStrRoomId
)

// Activity kinds.
const (
	ActEnter      = "enter"
	ActExit       = "exit"
	ActStartAudio = "start_audio"
	ActStopAudio  = "stop_audio"
)

// Activity is one thing a user did or had done to them in an audio room,
// in the order it happened: what TRTC reports in its room and media
// callbacks (103 enter, 104 exit, 203/204 audio).
type Activity struct {
	RoomID string
	UserID string
	Kind   string
	Reason string // exits only
	At     time.Time
}

// Refusals of the client side.
var (
	ErrUserSig       = errors.New("trtcfake: UserSig refused")
	ErrPrivateMapKey = errors.New("trtcfake: PrivateMapKey refused")
	ErrNoPermission  = errors.New("trtcfake: the PrivateMapKey lacks the permission")
	ErrNotInRoom     = errors.New("trtcfake: not in the room")
)

// DefaultSilenceTimeout is how long TRTC keeps a user whose connection is
// gone.
const DefaultSilenceTimeout = 30 * time.Second

// clientSide is the fake's client-SDK state, under Server.mu.
type clientSide struct {
	permission bool          // advanced permission control on
	silence    time.Duration // a cut connection is dropped after it
	sessions   map[string]map[string]*session
	observer   func(Activity)

	done chan struct{}
	once sync.Once
	qmu  sync.Mutex
	q    []Activity
	wake chan struct{}
}

type session struct {
	privileges uint32 // of the last key presented (all bits without the control)
	keyExpires int64  // Unix seconds; 0 without the control
	publishing bool
	cutAt      time.Time // zero: connected
}

func (c *clientSide) init() {
	c.silence = DefaultSilenceTimeout
	c.sessions = map[string]map[string]*session{}
	c.done = make(chan struct{})
	c.wake = make(chan struct{}, 1)
}

func (c *clientSide) stop() { c.once.Do(func() { close(c.done) }) }

// WithAdvancedPermission turns on TRTC's advanced permission control:
// entering and publishing check the user's PrivateMapKey.
func WithAdvancedPermission() Option { return func(s *Server) { s.clients.permission = true } }

// WithSilenceTimeout replaces TRTC's 30 s before a user whose connection
// is gone is dropped (tests).
func WithSilenceTimeout(d time.Duration) Option { return func(s *Server) { s.clients.silence = d } }

// WithActivity calls fn with every Activity, in order, on one goroutine
// of its own (never under the fake's lock, so fn may call the fake).
func WithActivity(fn func(Activity)) Option { return func(s *Server) { s.clients.observer = fn } }

// startClients runs the sweeper (cut connections time out) and the
// activity dispatcher until Close.
func (s *Server) startClients() {
	go func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-s.clients.done:
				return
			case <-t.C:
				s.sweep()
			}
		}
	}()
	if s.clients.observer == nil {
		return
	}
	go func() {
		for {
			select {
			case <-s.clients.done:
				return
			case <-s.clients.wake:
			}
			s.clients.qmu.Lock()
			batch := s.clients.q
			s.clients.q = nil
			s.clients.qmu.Unlock()
			for _, a := range batch {
				s.clients.observer(a)
			}
		}
	}()
}

// emitLocked queues an Activity (called under s.mu, so in order).
func (s *Server) emitLocked(a Activity) {
	if s.cb != nil {
		s.cb.activity(a) // posts behind, never calls the fake
	}
	if s.clients.observer == nil {
		return
	}
	s.clients.qmu.Lock()
	s.clients.q = append(s.clients.q, a)
	s.clients.qmu.Unlock()
	select {
	case s.clients.wake <- struct{}{}:
	default:
	}
}

// leftLocked ends userID's session in roomID (under s.mu): the room's
// membership is the caller's to change.
func (s *Server) leftLocked(roomID, userID, reason string) {
	now := s.now()
	if ss := s.clients.sessions[roomID][userID]; ss != nil && ss.publishing {
		s.emitLocked(Activity{RoomID: roomID, UserID: userID, Kind: ActStopAudio, At: now})
	}
	delete(s.clients.sessions[roomID], userID)
	s.emitLocked(Activity{RoomID: roomID, UserID: userID, Kind: ActExit, Reason: reason, At: now})
}

// checkKey is the permission control's check of a presented key.
func (s *Server) checkKey(roomID, userID, key string, need uint32) (trtc.UserBuf, error) {
	rec, err := trtc.VerifyPrivateMapKey(key, s.sdkAppID, s.sigKey, userID, roomID, s.now())
	if err != nil {
		return rec, fmt.Errorf("%w: %v", ErrPrivateMapKey, err)
	}
	if rec.Privileges&need != need {
		return rec, fmt.Errorf("%w: bits %d, need %d", ErrNoPermission, rec.Privileges, need)
	}
	return rec, nil
}

// Join is the client SDK's enterRoom with a string room id: the UserSig
// must be the app's for userID; with the permission control on, the
// PrivateMapKey must be for this user and room, unexpired, with the enter
// bit. Entering again (a reconnect) replaces the session's key.
func (s *Server) Join(roomID, userID, userSig, privateMapKey string) error {
	if err := tencentim.VerifyUserSig(userSig, s.sdkAppID, s.sigKey, userID, s.now()); err != nil {
		return fmt.Errorf("%w: %v", ErrUserSig, err)
	}
	ss := &session{privileges: 0xFF}
	if s.clients.permission {
		rec, err := s.checkKey(roomID, userID, privateMapKey, trtc.PrivilegeEnterRoom)
		if err != nil {
			return err
		}
		ss.privileges, ss.keyExpires = rec.Privileges, rec.ExpiresAt
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.enterLocked(roomID, userID)
	if s.clients.sessions[roomID] == nil {
		s.clients.sessions[roomID] = map[string]*session{}
	}
	s.clients.sessions[roomID][userID] = ss
	s.emitLocked(Activity{RoomID: roomID, UserID: userID, Kind: ActEnter, At: s.now()})
	return nil
}

// session returns userID's live session (under s.mu).
func (s *Server) sessionLocked(roomID, userID string) *session {
	if !s.rooms[roomID][userID] {
		return nil
	}
	return s.clients.sessions[roomID][userID]
}

// UpdatePrivateMapKey is the SDK's updatePrivateMapKey: a new key for the
// room the user is in, checked like one presented on enter.
func (s *Server) UpdatePrivateMapKey(roomID, userID, privateMapKey string) error {
	var rec trtc.UserBuf
	if s.clients.permission {
		var err error
		if rec, err = s.checkKey(roomID, userID, privateMapKey, trtc.PrivilegeEnterRoom); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.sessionLocked(roomID, userID)
	if ss == nil {
		return ErrNotInRoom
	}
	if s.clients.permission {
		ss.privileges, ss.keyExpires = rec.Privileges, rec.ExpiresAt
	}
	return nil
}

// StartAudio is the SDK's startLocalAudio in the anchor role: with the
// permission control on, the session's key must carry the send-audio bit
// and must not have expired.
func (s *Server) StartAudio(roomID, userID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.sessionLocked(roomID, userID)
	if ss == nil {
		return ErrNotInRoom
	}
	if s.clients.permission {
		if ss.privileges&trtc.PrivilegeSendAudio == 0 {
			return fmt.Errorf("%w: bits %d, need send audio", ErrNoPermission, ss.privileges)
		}
		if s.now().Unix() > ss.keyExpires {
			return fmt.Errorf("%w: %v", ErrPrivateMapKey, trtc.ErrKeyExpired)
		}
	}
	if !ss.publishing {
		ss.publishing = true
		s.emitLocked(Activity{RoomID: roomID, UserID: userID, Kind: ActStartAudio, At: s.now()})
	}
	return nil
}

// StopAudio is the SDK's stopLocalAudio.
func (s *Server) StopAudio(roomID, userID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss := s.sessionLocked(roomID, userID); ss != nil && ss.publishing {
		ss.publishing = false
		s.emitLocked(Activity{RoomID: roomID, UserID: userID, Kind: ActStopAudio, At: s.now()})
	}
}

// Leave is the SDK's exitRoom.
func (s *Server) Leave(roomID, userID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rooms[roomID][userID] {
		s.leftLocked(roomID, userID, ExitLeft)
		delete(s.rooms[roomID], userID)
	}
}

// CutAudio is the dev switch that cuts a user's connection (a crashed app,
// lost network): they stay in the room until the silence timeout, then
// exit with reason timeout. Reconnect undoes it before then.
func (s *Server) CutAudio(roomID, userID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss := s.sessionLocked(roomID, userID); ss != nil && ss.cutAt.IsZero() {
		ss.cutAt = s.now()
	}
}

// Reconnect restores a cut connection still within the timeout.
func (s *Server) Reconnect(roomID, userID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss := s.sessionLocked(roomID, userID); ss != nil {
		ss.cutAt = time.Time{}
	}
}

// Publishing reports whether userID sends audio in roomID.
func (s *Server) Publishing(roomID, userID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.sessionLocked(roomID, userID)
	return ss != nil && ss.publishing
}

// sweep drops users whose connection has been gone for the timeout.
func (s *Server) sweep() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for roomID, users := range s.clients.sessions {
		for userID, ss := range users {
			if !ss.cutAt.IsZero() && now.Sub(ss.cutAt) >= s.clients.silence && s.rooms[roomID][userID] {
				s.leftLocked(roomID, userID, ExitTimeout)
				delete(s.rooms[roomID], userID)
			}
		}
	}
}
