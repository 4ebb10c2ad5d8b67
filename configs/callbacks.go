package configs

import (
	"strings"
	"time"
)

// TRTCCallbackConfig: the endpoint Tencent TRTC posts its room & media
// callbacks to (TRTC "Room&Media Webhooks", trtc.io document 39558), on the
// HTTP listener (http.addr). Off by default. On, it needs the callback key
// set in the TRTC console: every callback is refused without a valid Sign
// made with it, so an endpoint without a key would take anyone's word.
type TRTCCallbackConfig struct {
	Enabled bool `yaml:"enabled"`
	// Path on the HTTP listener (default /callbacks/trtc); the URL to
	// enter in the TRTC console is https://<public host><path>.
	Path string `yaml:"path"`
	// Key: the console's callback key (up to 32 letters and digits): use
	// "${TRTC_CALLBACK_KEY}"; never logged.
	Key string `yaml:"key"`
	// MaxBody caps a callback's body in bytes (default 64 KiB; Tencent's
	// are under 1 KiB): a bigger one is refused unread.
	MaxBody int `yaml:"max_body"`
	// AnswerTimeout bounds the wait for the room to accept a callback's
	// command (default 3s, under Tencent's 5 s): past it the answer is 503
	// and Tencent retries.
	AnswerTimeout time.Duration `yaml:"answer_timeout"`
}

// IMCallbackConfig: the endpoint Tencent IM posts its third-party
// callbacks to (IM "Third-Party Callback Overview", cloud.tencent.com
// document 269/1522), on the HTTP listener. Off by default. On, it needs
// the callback authentication token (IM console, Callback Configuration:
// "callback authentication"): every callback must carry Sign =
// sha256(token + RequestTime) and a RequestTime within a minute of now.
type IMCallbackConfig struct {
	Enabled bool `yaml:"enabled"`
	// Path on the HTTP listener (default /callbacks/im).
	Path string `yaml:"path"`
	// Token: the console's callback authentication token: use
	// "${TENCENT_IM_CALLBACK_TOKEN}"; never logged.
	Token string `yaml:"token"`
	// MaxSkew: how far RequestTime may be from now (default 1m, Tencent's
	// advice): older ones are replays.
	MaxSkew time.Duration `yaml:"max_skew"`
	// MaxBody caps a callback's body in bytes (default 64 KiB).
	MaxBody int `yaml:"max_body"`
	// AnswerTimeout bounds a "before" callback's answer (default 1500ms,
	// under Tencent's 2 s for message callbacks); past it the message is
	// let through (Tencent's own behaviour on a late answer).
	AnswerTimeout time.Duration `yaml:"answer_timeout"`
	// ViewTTL: how long a room's answer about a user (member, banned,
	// muted) is reused for the next messages (default 1s): the bound on
	// how stale a check may be.
	ViewTTL time.Duration `yaml:"view_ttl"`
}

const defaultCallbackBody = 64 << 10

func (c *TRTCCallbackConfig) setDefaults() {
	if c.Path == "" {
		c.Path = "/callbacks/trtc"
	}
	c.MaxBody = intOr(c.MaxBody, defaultCallbackBody)
	c.AnswerTimeout = durationOr(c.AnswerTimeout, 3*time.Second)
}

func (c *IMCallbackConfig) setDefaults() {
	if c.Path == "" {
		c.Path = "/callbacks/im"
	}
	c.MaxSkew = durationOr(c.MaxSkew, time.Minute)
	c.MaxBody = intOr(c.MaxBody, defaultCallbackBody)
	c.AnswerTimeout = durationOr(c.AnswerTimeout, 1500*time.Millisecond)
	c.ViewTTL = durationOr(c.ViewTTL, time.Second)
}

func checkCallbackPath(key, p string) error {
	if !strings.HasPrefix(p, "/") || strings.ContainsAny(p, " {}?#") {
		return errorf(key, "must be a plain path starting with /, got %q", p)
	}
	return nil
}

func (c TRTCCallbackConfig) validate() error {
	if err := checkCallbackPath("trtc.callback.path", c.Path); err != nil {
		return err
	}
	if !c.Enabled {
		return nil
	}
	if c.Key == "" {
		return errorf("trtc.callback.key", "required when trtc.callback.enabled is true: the TRTC console's callback key (set it from the environment: \"${TRTC_CALLBACK_KEY}\"); without it anyone could post callbacks")
	}
	if len(c.Key) > 32 || strings.IndexFunc(c.Key, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) >= 0 {
		return errorf("trtc.callback.key", "TRTC takes up to 32 letters and digits")
	}
	if c.AnswerTimeout >= 5*time.Second {
		return errorf("trtc.callback.answer_timeout", "must be under Tencent's 5s, got %s", c.AnswerTimeout)
	}
	return nil
}

func (c IMCallbackConfig) validate() error {
	if err := checkCallbackPath("tencent_im.callback.path", c.Path); err != nil {
		return err
	}
	if !c.Enabled {
		return nil
	}
	if c.Token == "" {
		return errorf("tencent_im.callback.token", "required when tencent_im.callback.enabled is true: the IM console's callback authentication token (set it from the environment: \"${TENCENT_IM_CALLBACK_TOKEN}\"); without it anyone could post callbacks")
	}
	if c.AnswerTimeout >= 2*time.Second {
		return errorf("tencent_im.callback.answer_timeout", "must be under Tencent's 2s for message callbacks, got %s", c.AnswerTimeout)
	}
	return nil
}
