package configs

import (
	"net/url"
	"time"
)

// TRTCConfig: the rooms' audio side, Tencent TRTC through Tencent Cloud
// API 3.0. Off by default: no TRTC call is made, kicks and closes stop at
// IM. On, a kick removes the user from the room's audio room and a close
// dismisses it (RemoveUserByStrRoomId, DismissRoomByStrRoomId), as room
// effects through the outbox.
type TRTCConfig struct {
	Enabled  bool  `yaml:"enabled"`
	SDKAppID int64 `yaml:"sdk_app_id"`
	// SecretID and SecretKey are a Tencent Cloud API key pair (CAM), not
	// the IM secret: use ${TENCENTCLOUD_SECRET_ID} / ${TENCENTCLOUD_SECRET_KEY};
	// never logged.
	SecretID  string `yaml:"secret_id"`
	SecretKey string `yaml:"secret_key"`
	// Region of the calls (X-TC-Region): the TRTC room APIs take
	// ap-beijing, ap-guangzhou, ap-singapore.
	Region string `yaml:"region"`
	// Endpoint: https://trtc.tencentcloudapi.com (China) or
	// https://trtc.intl.tencentcloudapi.com.
	Endpoint string `yaml:"endpoint"`
	// Timeout per call.
	Timeout time.Duration `yaml:"timeout"`
	// RatePerSecond per action (Tencent: 20).
	RatePerSecond int `yaml:"rate_per_second"`
	// Callback: the endpoint of TRTC's room & media callbacks (callbacks.go).
	Callback TRTCCallbackConfig `yaml:"callback"`
	// SeatGrace: how long the seat of a member whose audio dropped (TRTC
	// exit) waits for them to enter again before it is freed (default 10s).
	SeatGrace time.Duration `yaml:"seat_grace"`
	// SigKey signs GetJoinTicket's UserSig and PrivateMapKey: the TRTC
	// application's SDKSecretKey (console: Application Management), not
	// the Cloud API key pair; use ${TRTC_SIG_KEY}; never logged. Empty:
	// tickets carry the audio room and the rights, unsigned (the app
	// signs its users itself). Needs sdk_app_id; trtc.enabled is not
	// required (signing calls nobody).
	SigKey string `yaml:"sig_key"`
	// TicketTTL is a PrivateMapKey's life: short, because rights change
	// and a key cannot be taken back (default 5m).
	TicketTTL time.Duration `yaml:"ticket_ttl"`
	// UserSigTTL is the life of a ticket's UserSig, cached per user and
	// signed again at half-life (default 24h).
	UserSigTTL time.Duration `yaml:"user_sig_ttl"`
	// EnforceTickets: the deployment runs TRTC's advanced permission
	// control, so rights that shrink (kicked off a seat, seat muted or
	// locked, banned) also remove the user from the audio room, and they
	// re-enter with a new ticket. Needs enabled and sig_key.
	EnforceTickets bool `yaml:"enforce_tickets"`
}

// WithDefaults is c with every key left zero at its default, as a loaded
// config has it: what the TRTC client gives a hand-built config, so the
// defaults are written here only.
func (c TRTCConfig) WithDefaults() TRTCConfig {
	c.setDefaults()
	return c
}

func (c *TRTCConfig) setDefaults() {
	if c.Region == "" {
		c.Region = "ap-guangzhou"
	}
	if c.Endpoint == "" {
		c.Endpoint = "https://trtc.tencentcloudapi.com"
	}
	c.Timeout = durationOr(c.Timeout, 5*time.Second)
	c.RatePerSecond = intOr(c.RatePerSecond, 20)
	c.Callback.setDefaults()
	c.SeatGrace = durationOr(c.SeatGrace, 10*time.Second)
	c.TicketTTL = durationOr(c.TicketTTL, 5*time.Minute)
	c.UserSigTTL = durationOr(c.UserSigTTL, 24*time.Hour)
}

func (c TRTCConfig) validate() error {
	if u, err := url.Parse(c.Endpoint); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return errorf("trtc.endpoint", "must be an http(s) URL, got %q", c.Endpoint)
	}
	if err := c.Callback.validate(); err != nil {
		return err
	}
	if c.SeatGrace > 10*time.Minute {
		return errorf("trtc.seat_grace", "at most 10m, got %s", c.SeatGrace)
	}
	if c.TicketTTL < 10*time.Second || c.TicketTTL > 24*time.Hour {
		return errorf("trtc.ticket_ttl", "must be between 10s and 24h, got %s", c.TicketTTL)
	}
	if c.UserSigTTL < 2*c.TicketTTL {
		return errorf("trtc.user_sig_ttl", "must be at least twice trtc.ticket_ttl (%s), got %s", c.TicketTTL, c.UserSigTTL)
	}
	if c.SigKey != "" && c.SDKAppID <= 0 {
		return errorf("trtc.sdk_app_id", "required when trtc.sig_key is set")
	}
	if c.EnforceTickets && c.SigKey == "" {
		return errorf("trtc.sig_key", "required when trtc.enforce_tickets is true: with advanced permission control on, nobody enters without a signed ticket")
	}
	if c.EnforceTickets && !c.Enabled {
		return errorf("trtc.enforce_tickets", "needs trtc.enabled: removing a user whose rights shrank is a TRTC call")
	}
	if !c.Enabled {
		return nil
	}
	if c.SDKAppID <= 0 {
		return errorf("trtc.sdk_app_id", "required when trtc.enabled is true")
	}
	if c.SecretID == "" {
		return errorf("trtc.secret_id", "required when trtc.enabled is true (set it from the environment: \"${TENCENTCLOUD_SECRET_ID}\")")
	}
	if c.SecretKey == "" {
		return errorf("trtc.secret_key", "required when trtc.enabled is true (set it from the environment: \"${TENCENTCLOUD_SECRET_KEY}\")")
	}
	switch c.Region {
	case "ap-beijing", "ap-guangzhou", "ap-singapore":
	default:
		return errorf("trtc.region", "the TRTC room APIs take ap-beijing, ap-guangzhou or ap-singapore, got %q", c.Region)
	}
	return nil
}
