package roomim

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/room"
)

// ExtRoomEventsCompact marks a coalesced message in the compact form
// (docs/client-protocol.md). A hot room sends 40 messages/s at most, so
// what one message carries is the room's event rate: the full envelopes of
// ExtRoomEvents fit ~31 join/leave events in 10 KB (1,237 events/s), the
// compact form ~100 in 11 KB.
//
// Data:
//
//	{"app_code":"lalu","room_id":"r1","t0":1710000000000,
//	 "types":["RoomUserJoined","RoomMicTaken"],"events":[
//	  {"s":12,"t":0,"c":"cmd-1","p":{...}},
//	  {"s":13,"i":1,"d":4,"t":1,"c":"cmd-2","p":{...}}]}
//
// per event: s room_seq, i the event's index in its command (0 omitted),
// t its event_type as an index into types, c command_id (empty omitted), d created_at_ms - t0 (0
// omitted), p payload, id the event_id only when it is not
// "<app_code>:<room_id>:<s>:<i>" (room.EventID). request_id is left out: it
// is for tracing only (seed 000) and stays in the outbox row and the logs.
// CloudCustomData is {"first_event_id":..,"last_event_id":..,"events":n}.
const ExtRoomEventsCompact = "room_events_compact"

type compactEvent struct {
	ID      string          `json:"id,omitempty"`
	Seq     int64           `json:"s"`
	Index   int             `json:"i,omitempty"`
	Type    int             `json:"t"`
	Command string          `json:"c,omitempty"`
	Delta   int64           `json:"d,omitempty"`
	Payload json.RawMessage `json:"p,omitempty"`
}

type compactHead struct {
	AppCode string            `json:"app_code"`
	RoomID  string            `json:"room_id"`
	T0      int64             `json:"t0"`
	Types   []string          `json:"types"`
	Events  []json.RawMessage `json:"events"`
}

type compactCloud struct {
	First  string `json:"first_event_id"`
	Last   string `json:"last_event_id"`
	Events int    `json:"events"`
}

// eventIndex is the index the event id was derived with, when it was
// derived by room.EventID from the envelope's own room and seq.
func eventIndex(env persistence.Envelope) (int, bool) {
	prefix := env.AppCode + ":" + env.RoomID + ":" + strconv.FormatInt(env.RoomSeq, 10) + ":"
	rest, ok := strings.CutPrefix(env.EventID, prefix)
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(rest)
	if err != nil || i < 0 || room.EventID(env.AppCode, env.RoomID, env.RoomSeq, i) != env.EventID {
		return 0, false
	}
	return i, true
}

// encodeCompact is one event of a compact batch whose t0 is given, its
// type at index typ of the batch's types.
func encodeCompact(env persistence.Envelope, t0 int64, typ int) ([]byte, error) {
	e := compactEvent{Seq: env.RoomSeq, Type: typ, Command: env.CommandID,
		Delta: env.CreatedAtMs - t0, Payload: env.Payload}
	if i, ok := eventIndex(env); ok {
		e.Index = i
	} else {
		e.ID = env.EventID
	}
	if len(e.Payload) == 0 {
		e.Payload = nil
	}
	return json.Marshal(e)
}

// compactBatch builds one compact message as events join it, keeping an
// exact bound of its size: Data's head, type table and events, Ext, and
// CloudCustomData with its first and last ids taken as long as the
// longest id in the batch (escaped as JSON).
type compactBatch struct {
	t0    int64
	types []string
	index map[string]int
	fixed int // head without types, Ext, CloudCustomData without ids and count
	typeB int // the types' JSON and the commas between them
	evB   int // the encoded events and the commas between them
	n     int
	maxID int
}

func newCompactBatch(first persistence.Envelope) *compactBatch {
	head, _ := json.Marshal(compactHead{AppCode: first.AppCode, RoomID: first.RoomID, T0: first.CreatedAtMs,
		Types: []string{}, Events: []json.RawMessage{}})
	cloud, _ := json.Marshal(compactCloud{})
	// compactCloud{} holds "events":0; the count's digits are added per n.
	return &compactBatch{t0: first.CreatedAtMs, index: map[string]int{},
		fixed: len(head) + len(ExtRoomEventsCompact) + len(cloud) - 1}
}

func jsonLen(s string) int {
	b, _ := json.Marshal(s)
	return len(b)
}

// add encodes env for this batch and takes it if the message stays within
// maxBytes (the first event always: a lone event over the bound is still
// tried alone). It returns the encoded event, or nil when it does not fit.
func (c *compactBatch) add(env persistence.Envelope, maxBytes int) []byte {
	typ, known := c.index[env.EventType]
	typeB := c.typeB
	if !known {
		typ = len(c.types)
		if typ > 0 {
			typeB++
		}
		typeB += jsonLen(env.EventType)
	}
	enc, err := encodeCompact(env, c.t0, typ)
	if err != nil {
		return nil
	}
	evB := c.evB + len(enc)
	if c.n > 0 {
		evB++
	}
	maxID := max(c.maxID, jsonLen(env.EventID)-2)
	size := c.fixed + typeB + evB + 2*maxID + len(strconv.Itoa(c.n+1))
	if c.n > 0 && size > maxBytes {
		return nil
	}
	if !known {
		c.index[env.EventType] = typ
		c.types = append(c.types, env.EventType)
	}
	c.typeB, c.evB, c.maxID = typeB, evB, maxID
	c.n++
	return enc
}

// batchForm builds one coalesced message as events join it, keeping an
// exact bound of its size: compactBatch or envelopeBatch.
type batchForm interface {
	// add encodes env for the batch and takes it if the message stays
	// within maxBytes (the first event always). It returns the encoded
	// event, or nil when it does not fit.
	add(env persistence.Envelope, maxBytes int) []byte
	// message builds Data, Ext and CloudCustomData of the events it took.
	message(batch []*item) (data, ext, cloud string)
}

func (c *compactBatch) message(batch []*item) (data, ext, cloud string) {
	data, cloud = compactMessage(batch, c)
	return data, ExtRoomEventsCompact, cloud
}

// envelopeBatch is the ExtRoomEvents form: {"events":[envelope...]} with
// CloudCustomData {"event_ids":[...]}.
type envelopeBatch struct {
	evB, idB, n int // encoded envelopes and JSON ids, with their commas
}

// envelopeFixed is what an ExtRoomEvents message holds besides its
// envelopes and ids.
var envelopeFixed = len(`{"events":[]}`) + len(ExtRoomEvents) + len(`{"event_ids":[]}`)

func (e *envelopeBatch) add(env persistence.Envelope, maxBytes int) []byte {
	enc, err := json.Marshal(env)
	if err != nil {
		return nil
	}
	evB, idB := e.evB+len(enc), e.idB+jsonLen(env.EventID)
	if e.n > 0 {
		evB, idB = evB+1, idB+1
	}
	if e.n > 0 && envelopeFixed+evB+idB > maxBytes {
		return nil
	}
	e.evB, e.idB = evB, idB
	e.n++
	return enc
}

func (e *envelopeBatch) message(batch []*item) (data, ext, cloud string) {
	var b strings.Builder
	b.WriteString(`{"events":[`)
	ids := make([]string, len(batch))
	for i, it := range batch {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(it.enc)
		ids[i] = it.env.EventID
	}
	b.WriteString(`]}`)
	cc, _ := json.Marshal(struct {
		EventIDs []string `json:"event_ids"`
	}{ids})
	return b.String(), ExtRoomEvents, string(cc)
}

// compactMessage builds a batch's Data and CloudCustomData from events
// already encoded by c.
func compactMessage(batch []*item, c *compactBatch) (data, cloud string) {
	first := batch[0].env
	var b strings.Builder
	head, _ := json.Marshal(compactHead{AppCode: first.AppCode, RoomID: first.RoomID, T0: c.t0, Types: c.types, Events: []json.RawMessage{}})
	b.Write(head[:len(head)-2]) // up to "events":[
	for i, it := range batch {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(it.enc)
	}
	b.WriteString(`]}`)
	cc, _ := json.Marshal(compactCloud{First: first.EventID, Last: batch[len(batch)-1].env.EventID, Events: len(batch)})
	return b.String(), string(cc)
}

// DecodeCompact reads the Data of an ExtRoomEventsCompact message back
// into envelopes (without request_id), in the order sent: what a client
// does, and what the tests check the server against.
func DecodeCompact(data string) ([]persistence.Envelope, error) {
	var h struct {
		AppCode string         `json:"app_code"`
		RoomID  string         `json:"room_id"`
		T0      int64          `json:"t0"`
		Types   []string       `json:"types"`
		Events  []compactEvent `json:"events"`
	}
	if err := json.Unmarshal([]byte(data), &h); err != nil {
		return nil, fmt.Errorf("roomim: compact batch: %w", err)
	}
	out := make([]persistence.Envelope, len(h.Events))
	for i, e := range h.Events {
		if e.Type < 0 || e.Type >= len(h.Types) {
			return nil, fmt.Errorf("roomim: compact batch: event %d has type %d of %d", i, e.Type, len(h.Types))
		}
		id := e.ID
		if id == "" {
			id = room.EventID(h.AppCode, h.RoomID, e.Seq, e.Index)
		}
		out[i] = persistence.Envelope{EventID: id, EventType: h.Types[e.Type], AppCode: h.AppCode, RoomID: h.RoomID,
			RoomSeq: e.Seq, CommandID: e.Command, CreatedAtMs: h.T0 + e.Delta, Payload: e.Payload}
	}
	return out, nil
}
