package tencentim

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/hyapp/roomcell/internal/tlssig"
)

// UserSig verification failures, one per check, so the fake server can
// answer with the Tencent code that matches.
var (
	ErrSigMalformed          = errors.New("usersig malformed")
	ErrSigSDKAppIDMismatch   = errors.New("usersig sdkappid mismatch")
	ErrSigIdentifierMismatch = errors.New("usersig identifier mismatch")
	ErrSigExpired            = errors.New("usersig expired")
	ErrSigMismatch           = errors.New("usersig signature mismatch")
)

// sigDoc is the JSON document inside a v2 UserSig. Numbers stay numbers:
// the verifier parses them as such.
type sigDoc struct {
	Version    string `json:"TLS.ver"`
	Identifier string `json:"TLS.identifier"`
	SDKAppID   int64  `json:"TLS.sdkappid"`
	Expire     int64  `json:"TLS.expire"`
	Time       int64  `json:"TLS.time"`
	Sig        string `json:"TLS.sig"`
}

func sigHMAC(key, identifier string, sdkAppID, now, expire int64) string {
	h := hmac.New(sha256.New, []byte(key))
	h.Write([]byte("TLS.identifier:" + identifier + "\n" +
		"TLS.sdkappid:" + strconv.FormatInt(sdkAppID, 10) + "\n" +
		"TLS.time:" + strconv.FormatInt(now, 10) + "\n" +
		"TLS.expire:" + strconv.FormatInt(expire, 10) + "\n"))
	return base64.StdEncoding.EncodeToString(h.Sum(nil))
}

// GenUserSig returns a v2 (HMAC-SHA256) UserSig for identifier, issued at
// now and valid for expire (whole seconds).
func GenUserSig(sdkAppID int64, key, identifier string, expire time.Duration, now time.Time) (string, error) {
	exp := int64(expire / time.Second)
	if exp <= 0 {
		return "", errors.New("usersig: expire must be at least one second")
	}
	doc := sigDoc{
		Version:    "2.0",
		Identifier: identifier,
		SDKAppID:   sdkAppID,
		Expire:     exp,
		Time:       now.Unix(),
	}
	doc.Sig = sigHMAC(key, identifier, sdkAppID, doc.Time, doc.Expire)
	js, err := json.Marshal(doc)
	if err != nil {
		return "", err
	}
	return tlssig.Encode(js)
}

// SigInfo is what a UserSig claims about itself.
type SigInfo struct {
	Identifier string
	SDKAppID   int64
	IssuedAt   time.Time
	Expire     time.Duration
}

// ParseUserSig decodes a UserSig without checking its signature.
func ParseUserSig(sig string) (SigInfo, error) {
	doc, err := parseSig(sig)
	if err != nil {
		return SigInfo{}, err
	}
	return SigInfo{
		Identifier: doc.Identifier,
		SDKAppID:   doc.SDKAppID,
		IssuedAt:   time.Unix(doc.Time, 0),
		Expire:     time.Duration(doc.Expire) * time.Second,
	}, nil
}

func parseSig(sig string) (sigDoc, error) {
	var doc sigDoc
	if err := tlssig.Decode(sig, &doc); err != nil || doc.Sig == "" {
		return sigDoc{}, ErrSigMalformed
	}
	return doc, nil
}

// VerifyUserSig checks sig the way Tencent's server does:
// sdkappid, identifier, expiry at now, then the HMAC under key. The error
// is one of the ErrSig* values.
func VerifyUserSig(sig string, sdkAppID int64, key, identifier string, now time.Time) error {
	doc, err := parseSig(sig)
	if err != nil {
		return err
	}
	if doc.SDKAppID != sdkAppID {
		return ErrSigSDKAppIDMismatch
	}
	if doc.Identifier != identifier {
		return ErrSigIdentifierMismatch
	}
	if now.Unix() > doc.Time+doc.Expire {
		return ErrSigExpired
	}
	want := sigHMAC(key, doc.Identifier, doc.SDKAppID, doc.Time, doc.Expire)
	if !hmac.Equal([]byte(want), []byte(doc.Sig)) {
		return ErrSigMismatch
	}
	return nil
}
