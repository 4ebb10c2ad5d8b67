package imfake

import (
	"bytes"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

// readBody reads what io.ReadAll under the limit would: the whole body
// when its length is known or not, the first limit bytes of a longer one,
// and an error for a body shorter than its declared length.
func TestReadBodyAsReadAllUnderTheLimit(t *testing.T) {
	const limit = 64
	body := `{"GroupId":"g1","Random":7}`
	long := strings.Repeat("x", limit+10)
	for _, tc := range []struct {
		name    string
		body    string
		length  int64 // ContentLength; -1 unknown
		want    string
		wantErr bool
	}{
		{"known length", body, int64(len(body)), body, false},
		{"unknown length", body, -1, body, false},
		{"over the limit, known length", long, int64(len(long)), long[:limit], false},
		{"over the limit, unknown length", long, -1, long[:limit], false},
		{"shorter than declared", body, int64(len(body)) + 5, "", true},
		{"empty", "", 0, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/v4/x", io.NopCloser(strings.NewReader(tc.body)))
			r.ContentLength = tc.length
			got, err := readBody(r, limit)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if !tc.wantErr && !bytes.Equal(got, []byte(tc.want)) {
				t.Fatalf("read %q, want %q", got, tc.want)
			}
		})
	}
}
