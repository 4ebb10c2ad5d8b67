package tencentcb

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"strconv"
	"time"
)

// trtcSign is TRTC's callback signature: base64(HMAC-SHA256(key, body)),
// over the body's bytes as received (TRTC "Verify Signature Example",
// trtc.io document 54912).
func trtcSign(key, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write(body)
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// trtcSigned reports whether sign is body's signature under key, in
// constant time.
func trtcSigned(key, body []byte, sign string) bool {
	if sign == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(trtcSign(key, body)), []byte(sign)) == 1
}

// imSign is IM's callback authentication: hex(sha256(token + RequestTime))
// (IM console "Callback Configuration", cloud.tencent.com document
// 269/32431).
func imSign(token, requestTime string) string {
	sum := sha256.Sum256([]byte(token + requestTime))
	return hex.EncodeToString(sum[:])
}

// imSigned checks an IM callback's Sign and RequestTime (unix seconds):
// the signature under token, and the time within maxSkew of now (an older
// one is a replay, a later one a forgery or a broken clock).
func imSigned(token, sign, requestTime string, now time.Time, maxSkew time.Duration) (ok bool, why string) {
	if sign == "" || requestTime == "" {
		return false, "no Sign or RequestTime"
	}
	if subtle.ConstantTimeCompare([]byte(imSign(token, requestTime)), []byte(sign)) != 1 {
		return false, "bad Sign"
	}
	secs, err := strconv.ParseInt(requestTime, 10, 64)
	if err != nil {
		return false, "bad RequestTime"
	}
	if d := now.Sub(time.Unix(secs, 0)); d > maxSkew || d < -maxSkew {
		return false, "stale RequestTime"
	}
	return true, ""
}
