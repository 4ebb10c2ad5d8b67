package tlssig

import (
	"bytes"
	"compress/zlib"
	"errors"
	"strings"
	"testing"
)

// TestRoundTripAndAlphabet: what Encode writes, Decode reads back, and
// it never holds a character that needs escaping in a URL.
func TestRoundTripAndAlphabet(t *testing.T) {
	for _, doc := range []string{`{"a":1}`, `{"TLS.sig":"+/=+/=="}`, `{"x":"` + strings.Repeat("\xff", 100) + `"}`} {
		s, err := Encode([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		if strings.ContainsAny(s, "+/=") {
			t.Fatalf("%q holds + / or =", s)
		}
		var v map[string]any
		if err := Decode(s, &v); err != nil || len(v) != 1 {
			t.Fatalf("decode %q: %v", s, err)
		}
	}
}

// TestDecodeRefuses garbage, non-zlib, a zlib bomb and non-JSON.
func TestDecodeRefuses(t *testing.T) {
	var b bytes.Buffer
	w := zlib.NewWriter(&b)
	w.Write(bytes.Repeat([]byte(" "), 1<<20))
	w.Close()
	bomb := Encoding.EncodeToString(b.Bytes())
	notJSON, _ := Encode([]byte("hello"))
	for name, s := range map[string]string{"empty": "", "bad base64": "!!", "not zlib": Encoding.EncodeToString([]byte("plain")), "bomb": bomb, "not json": notJSON} {
		var v map[string]any
		if err := Decode(s, &v); !errors.Is(err, ErrMalformed) {
			t.Fatalf("%s: %v", name, err)
		}
	}
}
