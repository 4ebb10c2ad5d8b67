package supervise

import (
	"errors"
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"
)

// maxErrorBytes bounds last_error: the seed wants a short reason, not a
// response body.
const maxErrorBytes = 256

var (
	// A URL keeps scheme, host and path; its query (Tencent IM puts the
	// UserSig there) and user info are dropped.
	urlRe = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^\s"'<>]+`)
	// key=value pairs whose key smells of a credential.
	secretKV = regexp.MustCompile(`(?i)\b(usersig|user_sig|sig|signature|secret[a-z_]*|password|passwd|pwd|token|access_token|api_key|key)=([^&\s,;"']+)`)
	// go-sql-driver DSNs: user:password@tcp(host)/db.
	dsnRe = regexp.MustCompile(`([A-Za-z0-9_.-]+):([^@\s/]+)@(tcp|unix)\(`)
	space = regexp.MustCompile(`\s+`)
)

// ErrorText turns a publish error into last_error: one line, at most 256
// bytes, with URLs reduced to scheme://host/path and anything that looks
// like a credential replaced. Publishers must not put secrets into errors in
// the first place; this is the second line of defence, since last_error is
// shown to operators and logged.
func ErrorText(err error) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	var ue *url.Error
	if errors.As(err, &ue) {
		// net/http errors quote the whole request URL, query included.
		msg = strings.ReplaceAll(msg, ue.URL, redactURL(ue.URL))
	}
	msg = urlRe.ReplaceAllStringFunc(msg, redactURL)
	msg = secretKV.ReplaceAllString(msg, "$1=REDACTED")
	msg = dsnRe.ReplaceAllString(msg, "$1:REDACTED@$3(")
	msg = strings.TrimSpace(space.ReplaceAllString(msg, " "))
	return truncate(msg, maxErrorBytes)
}

func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		// Not parseable: keep only what precedes a query.
		if i := strings.IndexAny(raw, "?#"); i >= 0 {
			return raw[:i]
		}
		return raw
	}
	return u.Scheme + "://" + u.Host + u.EscapedPath()
}

// truncate cuts s to at most n bytes without splitting a UTF-8 sequence.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
