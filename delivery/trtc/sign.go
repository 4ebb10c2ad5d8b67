package trtc

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
)

// Algorithm is Tencent Cloud API 3.0's signature algorithm.
const Algorithm = "TC3-HMAC-SHA256"

// Request is what a TC3 signature covers of one POST: the host and
// content type (the two signed headers), the body, the service (the
// first label of the host: "trtc") and the time.
type Request struct {
	Host        string
	ContentType string
	Payload     []byte
	Service     string
	Timestamp   int64 // Unix seconds; also the X-TC-Timestamp header
}

// signedHeaders are the headers the signature covers, sorted.
const signedHeaders = "content-type;host"

// CanonicalRequest is step 1 of TC3: the request as the signer sees it.
// A POST has no query string; header names and values are lowercased.
func (r Request) CanonicalRequest() string {
	return "POST\n/\n\n" +
		"content-type:" + strings.ToLower(strings.TrimSpace(r.ContentType)) + "\n" +
		"host:" + strings.ToLower(strings.TrimSpace(r.Host)) + "\n\n" +
		signedHeaders + "\n" +
		sha256Hex(r.Payload)
}

// date is the UTC date of the timestamp: the credential scope's date is
// UTC whatever the machine's zone (a local date fails at midnight).
func (r Request) date() string { return time.Unix(r.Timestamp, 0).UTC().Format("2006-01-02") }

// CredentialScope is "<date>/<service>/tc3_request".
func (r Request) CredentialScope() string { return r.date() + "/" + r.Service + "/tc3_request" }

// StringToSign is step 2 of TC3.
func (r Request) StringToSign() string {
	return Algorithm + "\n" + strconv.FormatInt(r.Timestamp, 10) + "\n" + r.CredentialScope() + "\n" + sha256Hex([]byte(r.CanonicalRequest()))
}

// Signature is step 3: the hex HMAC of the string to sign under the key
// derived from the secret key, the date and the service.
func (r Request) Signature(secretKey string) string {
	k := hmacSHA256([]byte("TC3"+secretKey), r.date())
	k = hmacSHA256(k, r.Service)
	k = hmacSHA256(k, "tc3_request")
	return hex.EncodeToString(hmacSHA256(k, r.StringToSign()))
}

// Authorization is step 4: the Authorization header.
func (r Request) Authorization(secretID, secretKey string) string {
	return Algorithm + " Credential=" + secretID + "/" + r.CredentialScope() +
		", SignedHeaders=" + signedHeaders + ", Signature=" + r.Signature(secretKey)
}

// ParseAuthorization splits an Authorization header into its secret id,
// credential scope, signed headers and signature (the fake server's
// check); ok is false when it is not a TC3 header.
func ParseAuthorization(h string) (secretID, scope, headers, signature string, ok bool) {
	rest, found := strings.CutPrefix(h, Algorithm+" ")
	if !found {
		return "", "", "", "", false
	}
	for _, part := range strings.Split(rest, ", ") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "Credential":
			secretID, scope, _ = strings.Cut(v, "/")
		case "SignedHeaders":
			headers = v
		case "Signature":
			signature = v
		}
	}
	return secretID, scope, headers, signature, secretID != "" && scope != "" && headers != "" && signature != ""
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func hmacSHA256(key []byte, msg string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}
