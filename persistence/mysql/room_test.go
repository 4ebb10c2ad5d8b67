package mysql

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/hyapp/roomcell/persistence"
)

// prepareAppend writes the envelopes without encoding/json; the bytes must
// be encodeEnvelope's, escape for escape, or stored rows would change.
func TestWriteEnvelopeMatchesEncoder(t *testing.T) {
	strs := []string{"", "plain", `quote " and \ back`, "<b>&amp;</b>", "tab\tnl\nret\rbs\bff\f",
		"\x00\x01\x1f\x7f", "é漢字😀", "\u2028\u2029", "bad \xff\xfe utf8 \xe2\x82", "\xed\xa0\x80 surrogate"}
	payloads := []json.RawMessage{nil, json.RawMessage(`{}`), json.RawMessage(" { \"a\" : [1, 2 ,\n3] , \"b\":\"<&>\\u2028\" } "),
		json.RawMessage(`"x"`), json.RawMessage(`null`), json.RawMessage(`12.5e3`)}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		b := make([]byte, 1+rng.IntN(12))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		strs = append(strs, string(b))
	}
	var envs []persistence.Envelope
	for i, s := range strs {
		envs = append(envs, persistence.Envelope{
			EventID: s, EventType: strs[(i+1)%len(strs)], AppCode: s, RoomID: strs[(i+3)%len(strs)],
			RoomSeq: int64(i) - 5, CommandID: s, RequestID: strs[(i+2)%len(strs)], CreatedAtMs: -int64(i) << 40,
			Payload: payloads[i%len(payloads)],
		})
	}
	for _, e := range envs {
		want, err := encodeEnvelope(e)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if !writeEnvelope(&buf, e) || !bytes.Equal(buf.Bytes(), want) {
			t.Fatalf("writeEnvelope(%+v)\n got %s\nwant %s", e, buf.Bytes(), want)
		}
	}
	p, err := prepareAppend(persistence.Append{Command: persistence.CommandRecord{
		AppCode: "a", RoomID: "r", Seq: 1, CommandID: "c", Events: envs[1:41:41]}})
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for i, e := range envs[1:41] {
		want, _ := encodeEnvelope(e)
		if !bytes.Equal(p.envelopes[i], want) {
			t.Fatalf("envelope %d: got %s, want %s", i, p.envelopes[i], want)
		}
		parts = append(parts, string(want))
	}
	if want := "[" + strings.Join(parts, ",") + "]"; string(p.events) != want {
		t.Fatalf("events\n got %s\nwant %s", p.events, want)
	}
}

// An invalid payload is refused in encoding/json's words, as before.
func TestPrepareAppendInvalidPayload(t *testing.T) {
	e := persistence.Envelope{EventID: "e1", Payload: json.RawMessage(`{"a":`)}
	_, want := encodeEnvelope(e)
	_, err := prepareAppend(persistence.Append{Command: persistence.CommandRecord{
		AppCode: "a", RoomID: "r", Seq: 1, CommandID: "c", Events: []persistence.Envelope{e}}})
	if want == nil || err == nil || err.Error() != "mysql: invalid append: event e1: "+want.Error() {
		t.Fatalf("got %v, want the encoder's %v", err, want)
	}
}
