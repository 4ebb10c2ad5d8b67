package grpcapi

import (
	"bytes"
	"encoding/json"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
)

// An event's payload is a string of JSON in the proto (RoomEvent,
// RoomLogEvent: the bytes the IM envelope carries, which gRPC clients
// read as they are). In the gateway's JSON that string would be JSON
// quoted inside JSON, which every HTTP client has to parse a second
// time; eventObjects writes it as the object it is. Only the gateway's
// output changes: the proto, and so every gRPC client, keeps the string.

// eventObjects is the gateway's marshaler: base's JSON with every
// event's payload (an object with "event_type" and a "payload" string
// holding JSON) written as that JSON.
type eventObjects struct{ *runtime.JSONPb }

func (m eventObjects) Marshal(v any) ([]byte, error) {
	b, err := m.JSONPb.Marshal(v)
	if err != nil || !bytes.Contains(b, []byte(`"payload"`)) {
		return b, err
	}
	return inlinePayloads(b)
}

// inlinePayloads rewrites the JSON document b with its events' payloads
// as objects. Numbers keep their text (UseNumber) and strings their
// characters (no HTML escaping), so nothing else in b changes meaning.
func inlinePayloads(b []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	if !inline(doc) {
		return b, nil
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), nil
}

// inline replaces, in place, the payload strings of the events under v;
// it reports whether it replaced any.
func inline(v any) bool {
	changed := false
	switch x := v.(type) {
	case map[string]any:
		if _, isEvent := x["event_type"].(string); isEvent {
			if p, ok := x["payload"].(string); ok && json.Valid([]byte(p)) {
				x["payload"] = json.RawMessage(p)
				changed = true
			}
		}
		for k, c := range x {
			if k != "payload" && inline(c) {
				changed = true
			}
		}
	case []any:
		for _, c := range x {
			if inline(c) {
				changed = true
			}
		}
	}
	return changed
}
