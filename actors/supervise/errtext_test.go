package supervise

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestErrorTextStripsSecretsAndTruncates(t *testing.T) {
	secretURL := "https://console.tim.qq.com/v4/group_open_http_svc/send_group_system_notification?sdkappid=1400&identifier=admin&usersig=eJwSECRETSIG&random=7"
	httpErr := &url.Error{Op: "Post", URL: secretURL, Err: errors.New("dial tcp 1.2.3.4:443: i/o timeout")}
	cases := []struct {
		err      error
		want     []string
		notWants []string
	}{
		{fmt.Errorf("tencent im: %w", httpErr),
			[]string{"https://console.tim.qq.com/v4/group_open_http_svc/send_group_system_notification", "i/o timeout"},
			[]string{"eJwSECRETSIG", "usersig", "sdkappid"}},
		{errors.New("store: Error 1045: access denied for root:hunter2@tcp(127.0.0.1:3306)/roomcell"),
			[]string{"root:REDACTED@tcp(", "access denied"}, []string{"hunter2"}},
		{errors.New("bad request: secret_key=abc123 token=tok-999\nline two"),
			[]string{"secret_key=REDACTED", "token=REDACTED", "line two"}, []string{"abc123", "tok-999", "\n"}},
	}
	for _, c := range cases {
		got := ErrorText(c.err)
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("ErrorText(%v) = %q, want it to contain %q", c.err, got, w)
			}
		}
		for _, nw := range c.notWants {
			if strings.Contains(got, nw) {
				t.Errorf("ErrorText(%v) = %q leaks %q", c.err, got, nw)
			}
		}
	}
	long := ErrorText(errors.New(strings.Repeat("房", 200)))
	if len(long) > maxErrorBytes || !utf8.ValidString(long) || len(long) < maxErrorBytes-3 {
		t.Fatalf("truncated to %d bytes (valid utf-8: %v), want <= %d and whole runes", len(long), utf8.ValidString(long), maxErrorBytes)
	}
	if ErrorText(nil) != "" {
		t.Fatal("nil error must give an empty last_error")
	}
}

// Seed 000, Observability: the log fields on every outcome.
