package trtc

import (
	"errors"
	"time"

	lru "github.com/hashicorp/golang-lru"

	"github.com/hyapp/roomcell/delivery/tencentim"
)

// Ticket is what a user needs to enter a TRTC room: the app, a UserSig
// (the login) and a PrivateMapKey (the room and the rights), and when the
// key stops being accepted.
type Ticket struct {
	SDKAppID      int64
	UserSig       string
	PrivateMapKey string
	Privileges    uint32
	ExpiresAt     time.Time
}

// Privileges are the PrivateMapKey bits for a user the room lets in:
// enter and receive audio, and send audio when sendAudio.
func Privileges(sendAudio bool) uint32 {
	p := PrivilegeEnterRoom | PrivilegeReceiveAudio
	if sendAudio {
		p |= PrivilegeSendAudio
	}
	return p
}

// TicketConfig configures a Tickets signer.
type TicketConfig struct {
	SDKAppID int64
	// SigKey is the app's UserSig key (the TRTC console's SDKSecretKey),
	// not the Cloud API key pair; never logged.
	SigKey string
	// TTL is a PrivateMapKey's life (short: rights change).
	TTL time.Duration
	// UserSigTTL is a UserSig's life; a cached one is reused until half
	// of it is gone.
	UserSigTTL time.Duration
	// CacheSize bounds the cached UserSigs (default 100,000 users).
	CacheSize int
	Now       func() time.Time
}

// Tickets signs join tickets. UserSigs do not depend on the room or the
// rights, so they are cached per user: a ticket costs one PrivateMapKey.
// Safe for concurrent use.
type Tickets struct {
	cfg  TicketConfig
	sigs *lru.Cache // user -> cachedSig
}

type cachedSig struct {
	sig      string
	issuedAt time.Time
}

// NewTickets returns a signer; the key, app id and lifetimes are required.
func NewTickets(cfg TicketConfig) (*Tickets, error) {
	if cfg.SDKAppID <= 0 || cfg.SigKey == "" {
		return nil, errors.New("trtc tickets: sdk app id and signing key are required")
	}
	if cfg.TTL < time.Second || cfg.UserSigTTL < time.Second {
		return nil, errors.New("trtc tickets: lifetimes must be at least one second")
	}
	if cfg.CacheSize <= 0 {
		cfg.CacheSize = 100_000
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c, err := lru.New(cfg.CacheSize)
	if err != nil {
		return nil, err
	}
	return &Tickets{cfg: cfg, sigs: c}, nil
}

// Issue signs userID's ticket for the audio room roomID with the rights.
func (t *Tickets) Issue(userID, roomID string, sendAudio bool) (Ticket, error) {
	now := t.cfg.Now()
	sig, err := t.userSig(userID, now)
	if err != nil {
		return Ticket{}, err
	}
	bits := Privileges(sendAudio)
	pmk, err := GenPrivateMapKey(t.cfg.SDKAppID, t.cfg.SigKey, userID, roomID, bits, t.cfg.TTL, now)
	if err != nil {
		return Ticket{}, err
	}
	return Ticket{SDKAppID: t.cfg.SDKAppID, UserSig: sig, PrivateMapKey: pmk, Privileges: bits,
		ExpiresAt: time.Unix(now.Unix()+int64(t.cfg.TTL/time.Second), 0)}, nil
}

// userSig is the user's cached UserSig, signed again once half its life
// is gone (or the clock went back), so a ticket's UserSig always has at
// least half of UserSigTTL left.
func (t *Tickets) userSig(userID string, now time.Time) (string, error) {
	if v, ok := t.sigs.Get(userID); ok {
		c := v.(cachedSig)
		if age := now.Sub(c.issuedAt); age >= 0 && age < t.cfg.UserSigTTL/2 {
			return c.sig, nil
		}
	}
	sig, err := tencentim.GenUserSig(t.cfg.SDKAppID, t.cfg.SigKey, userID, t.cfg.UserSigTTL, now)
	if err != nil {
		return "", err
	}
	t.sigs.Add(userID, cachedSig{sig: sig, issuedAt: now})
	return sig, nil
}
