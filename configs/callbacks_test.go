package configs

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// A callback endpoint switched on without its secret would take anyone's
// word for what happened at Tencent: the start fails, naming the key. Off
// (the default), nothing is needed.
func TestCallbacksFailClosed(t *testing.T) {
	t.Setenv("RC_TEST_EMPTY", "")
	for _, tc := range []struct{ name, yaml, key string }{
		{"trtc callback without key", "trtc: {callback: {enabled: true}}\n", "trtc.callback.key"},
		{"trtc callback with an empty key variable", "trtc: {callback: {enabled: true, key: \"${RC_TEST_EMPTY}\"}}\n", "trtc.callback.key"},
		{"trtc key Tencent would not take", "trtc: {callback: {enabled: true, key: \"has space\"}}\n", "trtc.callback.key"},
		{"trtc answer after Tencent gave up", "trtc: {callback: {enabled: true, key: k1, answer_timeout: 5s}}\n", "trtc.callback.answer_timeout"},
		{"trtc path", "trtc: {callback: {path: \"callbacks\"}}\n", "trtc.callback.path"},
		{"seat grace too long", "trtc: {seat_grace: 1h}\n", "trtc.seat_grace"},
		{"im callback without token", "tencent_im: {callback: {enabled: true}}\n", "tencent_im.callback.token"},
		{"im answer after Tencent gave up", "tencent_im: {callback: {enabled: true, token: t, answer_timeout: 2s}}\n", "tencent_im.callback.answer_timeout"},
	} {
		_, err := Parse([]byte(tc.yaml))
		var ce *Error
		if !errors.As(err, &ce) || ce.Key != tc.key {
			t.Errorf("%s: %v, want an error naming %s", tc.name, err, tc.key)
		}
	}
	c, err := Parse([]byte("trtc: {callback: {enabled: true, key: \"abcDEF123\"}}\ntencent_im: {callback: {enabled: true, token: \"s3cret-token\"}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	tc, ic := c.TRTC.Callback, c.TencentIM.Callback
	if tc.Path != "/callbacks/trtc" || tc.MaxBody != 64<<10 || tc.AnswerTimeout != 3*time.Second || c.TRTC.SeatGrace != 10*time.Second {
		t.Fatalf("trtc callback defaults %+v, grace %s", tc, c.TRTC.SeatGrace)
	}
	if ic.Path != "/callbacks/im" || ic.MaxSkew != time.Minute || ic.AnswerTimeout != 1500*time.Millisecond || ic.ViewTTL != time.Second {
		t.Fatalf("im callback defaults %+v", ic)
	}
	if d := Default(); d.TRTC.Callback.Enabled || d.TencentIM.Callback.Enabled {
		t.Fatal("callbacks must be off by default")
	}
	if _, err := Parse([]byte("trtc: {callback: {enabled: true, key: \"abcDEF123\"}}\n")); err != nil && strings.Contains(err.Error(), "abcDEF123") {
		t.Fatal("an error shows the key")
	}
}
