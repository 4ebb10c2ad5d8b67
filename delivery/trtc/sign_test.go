package trtc

import "testing"

// TestSignatureDocumentedExample signs Tencent Cloud API 3.0's worked
// example ("Signature v3": CVM DescribeInstances, 2019-02-25) and checks
// every intermediate value the document prints, then the signature.
func TestSignatureDocumentedExample(t *testing.T) {
	r := Request{
		Host:        "cvm.tencentcloudapi.com",
		ContentType: "application/json; charset=utf-8",
		// The body as the document hashes it: \u escapes are its bytes.
		Payload:   []byte(`{"Limit": 1, "Filters": [{"Values": ["\u672a\u547d\u540d"], "Name": "instance-name"}]}`),
		Service:   "cvm",
		Timestamp: 1551113065,
	}
	if got, want := sha256Hex(r.Payload), "35e9c5b0e3ae67532d3c9f17ead6c90222632e5b1ff7f6e89887f1398934f064"; got != want {
		t.Fatalf("hashed payload %s, want %s", got, want)
	}
	wantCanonical := "POST\n/\n\ncontent-type:application/json; charset=utf-8\nhost:cvm.tencentcloudapi.com\n\ncontent-type;host\n" +
		"35e9c5b0e3ae67532d3c9f17ead6c90222632e5b1ff7f6e89887f1398934f064"
	if got := r.CanonicalRequest(); got != wantCanonical {
		t.Fatalf("canonical request\n%q\nwant\n%q", got, wantCanonical)
	}
	wantSTS := "TC3-HMAC-SHA256\n1551113065\n2019-02-25/cvm/tc3_request\n5ffe6a04c0664d6b969fab9a13bdab201d63ee709638e2749d62a09ca18d7031"
	if got := r.StringToSign(); got != wantSTS {
		t.Fatalf("string to sign\n%q\nwant\n%q", got, wantSTS)
	}
	const key = "Gu5t9xGARNpq86cd98joQYCN3EXAMPLE"
	if got, want := r.Signature(key), "72e494ea809ad7a8c8f7a4507b9bddcbaa8e581f516e8da2f66e2c5a96525168"; got != want {
		t.Fatalf("signature %s, want %s", got, want)
	}
	auth := r.Authorization("AKIDz8krbsJ5yKBZQpn74WFkmLPx3EXAMPLE", key)
	want := "TC3-HMAC-SHA256 Credential=AKIDz8krbsJ5yKBZQpn74WFkmLPx3EXAMPLE/2019-02-25/cvm/tc3_request, SignedHeaders=content-type;host, Signature=72e494ea809ad7a8c8f7a4507b9bddcbaa8e581f516e8da2f66e2c5a96525168"
	if auth != want {
		t.Fatalf("authorization\n%s\nwant\n%s", auth, want)
	}
	id, scope, headers, sig, ok := ParseAuthorization(auth)
	if !ok || id != "AKIDz8krbsJ5yKBZQpn74WFkmLPx3EXAMPLE" || scope != "2019-02-25/cvm/tc3_request" || headers != "content-type;host" || sig != r.Signature(key) {
		t.Fatalf("parse: %q %q %q %q %v", id, scope, headers, sig, ok)
	}
}

// TestSignatureDateIsUTC: 1551113065 is 2019-02-26 00:44 in UTC+8; the
// scope's date must still be the UTC one.
func TestSignatureDateIsUTC(t *testing.T) {
	r := Request{Service: "trtc", Timestamp: 1551113065}
	if got := r.CredentialScope(); got != "2019-02-25/trtc/tc3_request" {
		t.Fatalf("scope %s", got)
	}
	// A different key, body, host or time changes the signature.
	base := Request{Host: "trtc.tencentcloudapi.com", ContentType: "application/json", Payload: []byte(`{}`), Service: "trtc", Timestamp: 1700000000}
	sig := base.Signature("k")
	for name, r := range map[string]Request{
		"payload": {Host: base.Host, ContentType: base.ContentType, Payload: []byte(`{ }`), Service: "trtc", Timestamp: base.Timestamp},
		"host":    {Host: "trtc.intl.tencentcloudapi.com", ContentType: base.ContentType, Payload: base.Payload, Service: "trtc", Timestamp: base.Timestamp},
		"time":    {Host: base.Host, ContentType: base.ContentType, Payload: base.Payload, Service: "trtc", Timestamp: base.Timestamp + 1},
	} {
		if r.Signature("k") == sig {
			t.Fatalf("%s change kept the signature", name)
		}
	}
	if base.Signature("k2") == sig {
		t.Fatal("another key, same signature")
	}
}
