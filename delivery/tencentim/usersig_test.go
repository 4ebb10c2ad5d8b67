package tencentim

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/hyapp/roomcell/internal/tlssig"
)

// The key is the sample key of Tencent's tls-sig-api-v2 SDK tests. The
// expected values were computed outside Go (Python's hmac/zlib/base64 on
// the four-line content Tencent signs), so this is a vector, not a replay
// of our own code.
const (
	goldenKey      = "5bd2850fff3ecb11d7c805251c51ee463a25727bddc2385f3fa8bfee1bb93b5e"
	goldenHMAC     = "yLAe+w7WUeUuqbV9h/TX78u21oTGi+i9Zp1u3PpnY60="
	goldenUserSig  = "eAEArgBR-3siVExTLnZlciI6IjIuMCIsIlRMUy5pZGVudGlmaWVyIjoiYWRtaW5pc3RyYXRvciIsIlRMUy5zZGthcHBpZCI6MTQwMDAwMDAwMCwiVExTLmV4cGlyZSI6ODY0MDAsIlRMUy50aW1lIjoxNzAwMDAwMDAwLCJUTFMuc2lnIjoieUxBZSt3N1dVZVV1cWJWOWgvVFg3OHUyMW9UR2kraTlacDF1M1Bwblk2MD0ifQEAAP--vIgzkg__"
	goldenAppID    = 1400000000
	goldenIssuedAt = 1700000000
)

func TestUserSigGolden(t *testing.T) {
	sig, err := GenUserSig(goldenAppID, goldenKey, "administrator", 86400*time.Second, time.Unix(goldenIssuedAt, 0))
	if err != nil {
		t.Fatal(err)
	}
	if sig != goldenUserSig {
		t.Fatalf("UserSig = %s\nwant      %s", sig, goldenUserSig)
	}
	if strings.ContainsAny(sig, "+/=") {
		t.Fatalf("UserSig %q holds characters outside *-_ alphabet", sig)
	}

	// Decode by hand: base64 with the alphabet swapped back, zlib, JSON
	// with numbers (not strings) for sdkappid, expire and time.
	raw, err := base64.StdEncoding.DecodeString(strings.NewReplacer("*", "+", "-", "/", "_", "=").Replace(sig))
	if err != nil {
		t.Fatal(err)
	}
	zr, err := zlib.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	js, _ := io.ReadAll(zr)
	var doc map[string]any
	if err := json.Unmarshal(js, &doc); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"TLS.ver": "2.0", "TLS.identifier": "administrator",
		"TLS.sdkappid": float64(goldenAppID), "TLS.expire": float64(86400),
		"TLS.time": float64(goldenIssuedAt), "TLS.sig": goldenHMAC,
	}
	for k, v := range want {
		if doc[k] != v {
			t.Errorf("%s = %#v, want %#v", k, doc[k], v)
		}
	}
	if len(doc) != len(want) {
		t.Errorf("document has %d fields, want %d: %s", len(doc), len(want), js)
	}
}

func TestUserSigVerify(t *testing.T) {
	issued := time.Unix(goldenIssuedAt, 0)
	sig, err := GenUserSig(goldenAppID, goldenKey, "administrator", time.Hour, issued)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		sig        string
		appID      int64
		key, ident string
		at         time.Time
		want       error
	}{
		{"valid", sig, goldenAppID, goldenKey, "administrator", issued.Add(time.Minute), nil},
		{"valid at the last second", sig, goldenAppID, goldenKey, "administrator", issued.Add(time.Hour), nil},
		{"expired", sig, goldenAppID, goldenKey, "administrator", issued.Add(time.Hour + time.Second), ErrSigExpired},
		{"other app", sig, goldenAppID + 1, goldenKey, "administrator", issued, ErrSigSDKAppIDMismatch},
		{"other identifier", sig, goldenAppID, goldenKey, "admin2", issued, ErrSigIdentifierMismatch},
		{"other key", sig, goldenAppID, "wrong", "administrator", issued, ErrSigMismatch},
		{"garbage", "not-a-sig", goldenAppID, goldenKey, "administrator", issued, ErrSigMalformed},
		{"golden", goldenUserSig, goldenAppID, goldenKey, "administrator", time.Unix(goldenIssuedAt+86400, 0), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := VerifyUserSig(tc.sig, tc.appID, tc.key, tc.ident, tc.at)
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Fatalf("VerifyUserSig = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestUserSigTamperedDocumentFails(t *testing.T) {
	// Re-sign nothing, just lengthen expire: the HMAC must catch it.
	issued := time.Unix(goldenIssuedAt, 0)
	doc := sigDoc{Version: "2.0", Identifier: "administrator", SDKAppID: goldenAppID, Expire: 60, Time: goldenIssuedAt}
	doc.Sig = sigHMAC(goldenKey, doc.Identifier, doc.SDKAppID, doc.Time, doc.Expire)
	doc.Expire = 86400 * 365
	js, _ := json.Marshal(doc)
	var b bytes.Buffer
	w := zlib.NewWriter(&b) // a compressed (level > 0) sig must parse too
	w.Write(js)
	w.Close()
	forged := tlssig.Encoding.EncodeToString(b.Bytes())
	if err := VerifyUserSig(forged, goldenAppID, goldenKey, "administrator", issued.Add(time.Hour)); !errors.Is(err, ErrSigMismatch) {
		t.Fatalf("forged expire: %v, want ErrSigMismatch", err)
	}
	info, err := ParseUserSig(forged)
	if err != nil || info.Expire != 365*24*time.Hour || !info.IssuedAt.Equal(issued) {
		t.Fatalf("ParseUserSig = %+v, %v", info, err)
	}
}

func TestGenUserSigRejectsZeroExpire(t *testing.T) {
	if _, err := GenUserSig(1, "k", "a", 0, time.Now()); err == nil {
		t.Fatal("zero expire accepted")
	}
}

func TestClassifyCodeTable(t *testing.T) {
	tests := []struct {
		code  int
		class Class
		retry bool
	}{
		{20004, ClassTransient, true},
		{10002, ClassTransient, true},
		{90994, ClassTransient, true},
		{60007, ClassRateLimited, true},
		{10023, ClassRateLimited, true},
		{60008, ClassAmbiguous, true},
		{70001, ClassAuth, false},
		{70009, ClassAuth, false},
		{60010, ClassNotAdmin, false},
		{20003, ClassAccountMissing, false},
		{90012, ClassAccountMissing, false},
		{10010, ClassGroupMissing, false},
		{10021, ClassAlreadyExists, false},
		{60003, ClassBadRequest, false},
		{90011, ClassContent, false},
		{80002, ClassContent, false},
		{93000, ClassContent, false},
		{20006, ClassRejected, false},
		{125000, ClassRejected, false},
		{60020, ClassAppState, false},
		{4242, ClassUnknown, true},
	}
	for _, tc := range tests {
		c, r := ClassifyCode(tc.code)
		if c != tc.class || r != tc.retry {
			t.Errorf("ClassifyCode(%d) = %s, %v; want %s, %v", tc.code, c, r, tc.class, tc.retry)
		}
	}
}

func TestErrorIsClasses(t *testing.T) {
	rl := &Error{API: APISendGroupMsg, Code: 10023, Class: ClassRateLimited, Retryable: true}
	if !errors.Is(rl, ErrRateLimited) || !errors.Is(rl, ErrRetryable) || errors.Is(rl, ErrPermanent) {
		t.Fatalf("rate limited error classes wrong: %v", rl)
	}
	perm := &Error{API: APISendMsg, Code: 80001, Class: ClassContent}
	if errors.Is(perm, ErrRetryable) || !errors.Is(perm, ErrPermanent) || errors.Is(perm, ErrRateLimited) {
		t.Fatalf("permanent error classes wrong: %v", perm)
	}
	if got := perm.Error(); got != "tencent im openim/sendmsg: code 80001 (content)" {
		t.Fatalf("Error() = %q", got)
	}
}

func TestShortReasonBounds(t *testing.T) {
	long := strings.Repeat("é", 100) + "\n\x00"
	got := shortReason(long)
	if len(got) > maxReason+len("…") || strings.ContainsAny(got, "\n\x00") {
		t.Fatalf("shortReason left %d bytes: %q", len(got), got)
	}
	if !strings.HasSuffix(got, "…") || !strings.HasPrefix(got, "éé") {
		t.Fatalf("shortReason = %q", got)
	}
}
