package grpcapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/hyapp/roomcell/api/roomcellv1"
)

// payloadWatchAfter makes the fake watch send events with payloads.
const payloadWatchAfter = 2000

// trickyPayload has what a re-encoding could change: a number past
// float64's exact range, HTML characters, a unicode escape, nesting.
const trickyPayload = `{"user_id":"u<1>&","big":9007199254740993,"nested":{"tags":["a","\u00e9"]},"s":"{\"not\":\"inlined\"}"}`

func watchEvents(after, seq int64) []*roomcellv1.RoomLogEvent {
	if after != payloadWatchAfter {
		return nil
	}
	return []*roomcellv1.RoomLogEvent{{RoomSeq: seq, EventId: "a:r1:x:0", EventType: "RoomUserJoined", Payload: trickyPayload}}
}

// checkPayloadObject: the event's payload in the gateway's JSON is the
// payload's JSON itself, equal as a value to what gRPC carries as text.
func checkPayloadObject(t *testing.T, what string, ev any, want string) {
	t.Helper()
	m, ok := ev.(map[string]any)
	if !ok {
		t.Fatalf("%s: event %v is not an object", what, ev)
	}
	got, ok := m["payload"].(map[string]any)
	if !ok {
		t.Fatalf("%s: payload %#v is not an object", what, m["payload"])
	}
	var wantV any
	dec := json.NewDecoder(strings.NewReader(want))
	dec.UseNumber()
	if err := dec.Decode(&wantV); err != nil {
		t.Fatal(err)
	}
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(wantV)
	if string(gb) != string(wb) {
		t.Fatalf("%s: payload %s, want %s", what, gb, wb)
	}
}

func decodeJSON(t *testing.T, s string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("%v: %s", err, s)
	}
	return m
}

// Over HTTP an event's payload is an object (ListRoomEvents, WatchRoom,
// a command's reply), with its numbers and strings intact; over gRPC it
// stays the string it always was.
func TestGatewayEventPayloadsAreObjects(t *testing.T) {
	base, b := startGateway(t)
	code, out, _ := httpDo(t, "GET", base+"/api/v1/rooms/events?app_code=app1&room_id=r1&after_room_seq=10", clientTok, "")
	if code != http.StatusOK {
		t.Fatalf("events: %d %s", code, out)
	}
	evs, _ := decodeJSON(t, out)["events"].([]any)
	want := gatewayEventsReply().Events
	if len(evs) != len(want) {
		t.Fatalf("events %s", out)
	}
	for i, e := range evs {
		checkPayloadObject(t, "list", e, want[i].Payload)
	}
	if !strings.Contains(out, `"head_seq":"12"`) || !strings.Contains(out, `"event_id":"a:r1:11:0"`) {
		t.Fatalf("other fields changed: %s", out)
	}

	code, out, _ = httpDo(t, "GET", base+"/api/v1/rooms/watch?app_code=app1&room_id=r1&after_room_seq=2000", clientTok, "")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != http.StatusOK || len(lines) != 3 {
		t.Fatalf("watch: %d\n%s", code, out)
	}
	for _, l := range lines[:2] {
		res, _ := decodeJSON(t, l)["result"].(map[string]any)
		evs, _ := res["events"].([]any)
		if len(evs) != 1 {
			t.Fatalf("watch line %s", l)
		}
		checkPayloadObject(t, "watch", evs[0], trickyPayload)
	}
	if !strings.Contains(out, `u<1>&`) || !strings.Contains(out, `9007199254740993`) {
		t.Fatalf("characters or digits changed: %s", out)
	}

	canned := cannedReply()
	canned.Events = []*roomcellv1.RoomEvent{{EventId: "app1:r1:7:0", EventType: "RoomUserKicked", Payload: `{"target_user_id":"u2","ban_until_ms":0}`}}
	b.mu.Lock()
	b.reply = func(_ context.Context, _ *roomcellv1.RoomCommand) (*roomcellv1.CommandReply, error) {
		return canned, nil
	}
	b.mu.Unlock()
	code, out, _ = httpDo(t, "POST", base+"/api/v1/rooms/user/kick", clientTok,
		`{"command_id":"k1","app_code":"app1","room_id":"r1","user_id":"u1","target_user_id":"u2"}`)
	if code != http.StatusOK {
		t.Fatalf("kick: %d %s", code, out)
	}
	evs, _ = decodeJSON(t, out)["events"].([]any)
	if len(evs) != 1 {
		t.Fatalf("reply events: %s", out)
	}
	checkPayloadObject(t, "reply", evs[0], canned.Events[0].Payload)
}

// A payload that is not JSON (none is; an older row could be) stays the
// string it is rather than breaking the reply.
func TestInlinePayloadsLeavesNonJSON(t *testing.T) {
	in := `{"events":[{"event_type":"X","payload":"not json"},{"event_type":"Y","payload":"{\"a\":1}"}],"payload":"{\"b\":2}"}`
	out, err := inlinePayloads([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	m := decodeJSON(t, string(out))
	evs := m["events"].([]any)
	if p := evs[0].(map[string]any)["payload"]; p != "not json" {
		t.Fatalf("non-JSON payload became %#v", p)
	}
	if _, ok := evs[1].(map[string]any)["payload"].(map[string]any); !ok {
		t.Fatalf("event payload not inlined: %s", out)
	}
	if m["payload"] != `{"b":2}` {
		t.Fatalf("a payload outside an event changed: %s", out)
	}
}

// payloadsAsText is a ListRoomEvents reply's gateway JSON with each
// event's payload object written back as the string the proto holds.
func payloadsAsText(t *testing.T, out string) []byte {
	t.Helper()
	var top map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &top); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var evs []map[string]json.RawMessage
	if err := json.Unmarshal(top["events"], &evs); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, e := range evs {
		if len(e["payload"]) == 0 || e["payload"][0] != '{' {
			t.Fatalf("payload %s is not an object", e["payload"])
		}
		e["payload"], _ = json.Marshal(string(e["payload"]))
	}
	top["events"], _ = json.Marshal(evs)
	b, _ := json.Marshal(top)
	return b
}
