package mysql

import (
	"bytes"
	"encoding/json"
	"fmt"
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
			RoomSeq: int64(i) - 5, CommandID: s, RequestID: strs[(i+2)%len(strs)], TraceParent: strs[(i+4)%len(strs)], CreatedAtMs: -int64(i) << 40,
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

// interpolate renders statements as the driver's InterpolateParams sends
// them (for these arguments: no quote or backslash to escape).
func interpolate(sts []statement) string {
	var b strings.Builder
	for _, st := range sts {
		args := st.args
		for _, ch := range st.query {
			if ch != '?' {
				b.WriteRune(ch)
				continue
			}
			switch v := args[0].(type) {
			case nil:
				b.WriteString("NULL")
			case int64:
				fmt.Fprint(&b, v)
			case string:
				fmt.Fprintf(&b, "'%s'", v)
			case []byte:
				fmt.Fprintf(&b, "_binary'%s'", v)
			default:
				panic(fmt.Sprintf("%T", v))
			}
			args = args[1:]
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// goldenBatch is a fenced gift with a snapshot and a fenced join with an
// outbox lease.
func goldenBatch(t *testing.T) []*pendingAppend {
	ev := func(key persistence.RoomKey, seq int64, typ, payload string) persistence.Envelope {
		return persistence.Envelope{EventID: fmt.Sprintf("%s:%d", key.RoomID, seq), EventType: typ, AppCode: key.AppCode, RoomID: key.RoomID,
			RoomSeq: seq, CommandID: "c" + key.RoomID, CreatedAtMs: -1, Payload: json.RawMessage(payload)}
	}
	g, j := persistence.RoomKey{AppCode: "a", RoomID: "r0"}, persistence.RoomKey{AppCode: "a", RoomID: "r1"}
	as := []persistence.Append{{
		Command: persistence.CommandRecord{AppCode: "a", RoomID: "r0", Seq: 50, CommandID: "cr0", CommandType: "SendGift", RequestHash: "h",
			Reply: []byte("reply"), CreatedAtMs: 1700000000001, Sealed: []byte("seal"), Events: []persistence.Envelope{ev(g, 50, "RoomGiftSent", `{"n":1}`)}},
		Gift: true, Epoch: 2, Snapshot: &persistence.Snapshot{AppCode: "a", RoomID: "r0", Seq: 50, State: []byte("state"), UpdatedAtMs: 99},
	}, {
		Command: persistence.CommandRecord{AppCode: "a", RoomID: "r1", Seq: 7, CommandID: "cr1", CommandType: "JoinRoom",
			CreatedAtMs: 1700000000002, Events: []persistence.Envelope{ev(j, 7, "RoomUserJoined", `{"u":"x"}`)}},
		Epoch: 3, Lease: &persistence.OutboxLease{Owner: "node-1", UntilMs: 1700000000003},
	}}
	var ps []*pendingAppend
	for _, a := range as {
		p, err := prepareAppend(a)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	return ps
}

// The statements of a batch as the server receives them: integers are
// literals in the text, strings and bytes parameters.
func TestBuildStatementsText(t *testing.T) {
	got := interpolate(buildStatements(goldenBatch(t), persistence.OutboxMQPending))
	want := "INSERT INTO room_fences (app_code, room_id, epoch) VALUES ('a','r0',2),('a','r1',3) ON DUPLICATE KEY UPDATE epoch = IF(VALUES(epoch) >= epoch, VALUES(epoch), NULL)\n" +
		"INSERT INTO room_command_log (app_code, room_id, seq, command_id, command_type, request_hash, reply, events, created_at_ms, sealed) VALUES ('a','r0',50,'cr0','SendGift','h',_binary'reply',_binary'[{\"event_id\":\"r0:50\",\"event_type\":\"RoomGiftSent\",\"app_code\":\"a\",\"room_id\":\"r0\",\"room_seq\":50,\"command_id\":\"cr0\",\"created_at_ms\":-1,\"payload\":{\"n\":1}}]',1700000000001,_binary'seal'),('a','r1',7,'cr1','JoinRoom','',_binary'',_binary'[{\"event_id\":\"r1:7\",\"event_type\":\"RoomUserJoined\",\"app_code\":\"a\",\"room_id\":\"r1\",\"room_seq\":7,\"command_id\":\"cr1\",\"created_at_ms\":-1,\"payload\":{\"u\":\"x\"}}]',1700000000002,NULL)\n" +
		"INSERT INTO room_gift_outcomes (app_code, room_id, command_id, outcome, created_at_ms) VALUES ('a','r0','cr0','sent',1700000000001)\n" +
		"INSERT INTO room_outbox (event_id, app_code, room_id, room_seq, event_type, envelope, status, retry_count, locked_by, lock_until_ms, next_retry_at_ms, created_at_ms, updated_at_ms, event_index) VALUES ('r0:50','a','r0',50,'RoomGiftSent',_binary'{\"event_id\":\"r0:50\",\"event_type\":\"RoomGiftSent\",\"app_code\":\"a\",\"room_id\":\"r0\",\"room_seq\":50,\"command_id\":\"cr0\",\"created_at_ms\":-1,\"payload\":{\"n\":1}}','pending',0,NULL,0,-1,-1,-1,0),('r1:7','a','r1',7,'RoomUserJoined',_binary'{\"event_id\":\"r1:7\",\"event_type\":\"RoomUserJoined\",\"app_code\":\"a\",\"room_id\":\"r1\",\"room_seq\":7,\"command_id\":\"cr1\",\"created_at_ms\":-1,\"payload\":{\"u\":\"x\"}}','pending',0,'node-1',1700000000003,-1,-1,-1,0)\n" +
		"INSERT INTO room_outbox_mq (event_id, app_code, room_id, room_seq, event_index, created_at_ms) VALUES ('r0:50','a','r0',50,0,-1),('r1:7','a','r1',7,0,-1)\n" +
		"INSERT INTO room_snapshots (app_code, room_id, seq, state, updated_at_ms) VALUES ('a','r0',50,_binary'state',99) ON DUPLICATE KEY UPDATE state = IF(VALUES(seq) > seq, VALUES(state), state), updated_at_ms = IF(VALUES(seq) > seq, VALUES(updated_at_ms), updated_at_ms), seq = GREATEST(seq, VALUES(seq))\n"
	if got != want {
		t.Fatalf("statements\n%s\nwant\n%s", got, want)
	}
}

// With the MQ fanout off an append writes no room_outbox_mq row: the
// fanout's progress costs a durable event nothing then.
func TestBuildStatementsFanoutOffWritesNoMQRow(t *testing.T) {
	for _, st := range buildStatements(goldenBatch(t), persistence.OutboxMQNone) {
		if strings.Contains(st.query, "room_outbox_mq") {
			t.Fatalf("fanout off, yet a statement writes room_outbox_mq: %s", st.query)
		}
	}
	n := 0
	for _, st := range buildStatements(goldenBatch(t), persistence.OutboxMQPending) {
		if strings.HasPrefix(st.query, insertOutboxMQ) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("fanout on: %d room_outbox_mq INSERTs, want 1", n)
	}
}
