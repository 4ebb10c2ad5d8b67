// Package tlssig is the envelope of Tencent's TLS signatures v2 (UserSigs
// and PrivateMapKeys): a JSON document, zlib-wrapped (stored, not
// compressed, as Tencent's libraries write it), in standard base64 with
// '+' '/' '=' written '*' '-' '_'. The documents and their HMACs belong to
// the callers (delivery/tencentim, delivery/trtc).
package tlssig

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"sync"
)

// Encoding is the signatures' base64 alphabet.
var Encoding = base64.NewEncoding("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789*-").WithPadding('_')

// ErrMalformed: not base64 in the alphabet, not zlib, too long or not JSON.
var ErrMalformed = errors.New("tls signature malformed")

// maxDocument bounds what a decoded signature may expand to.
const maxDocument = 8192

// writers are reused: a zlib writer allocates ~700 KB of compressor
// state, a hundred times the cost of the signature it wraps.
var writers = sync.Pool{New: func() any {
	w, _ := zlib.NewWriterLevel(nil, zlib.NoCompression)
	return w
}}

// Encode wraps the JSON document js.
func Encode(js []byte) (string, error) {
	var b bytes.Buffer
	b.Grow(len(js) + 64)
	w := writers.Get().(*zlib.Writer)
	defer writers.Put(w)
	w.Reset(&b)
	if _, err := w.Write(js); err != nil {
		return "", err
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	return Encoding.EncodeToString(b.Bytes()), nil
}

// Decode unwraps a signature into v (a JSON target); every failure is
// ErrMalformed.
func Decode(sig string, v any) error {
	raw, err := Encoding.DecodeString(sig)
	if err != nil {
		return ErrMalformed
	}
	r, err := zlib.NewReader(bytes.NewReader(raw))
	if err != nil {
		return ErrMalformed
	}
	js, err := io.ReadAll(io.LimitReader(r, maxDocument+1))
	if err != nil || len(js) > maxDocument {
		return ErrMalformed
	}
	if err := json.Unmarshal(js, v); err != nil {
		return ErrMalformed
	}
	return nil
}
