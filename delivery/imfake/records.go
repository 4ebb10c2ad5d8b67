package imfake

import (
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"slices"
)

// maxRecorded and maxRecordedBytes bound the message and call logs of a
// long-running dev fake (past either, the older half goes); tests stay far
// below them. The byte bound matters: a hot room's messages carry up to
// 12 KB each, so 100,000 of them alone were over a gigabyte of a dev
// node's heap.
const (
	maxRecorded      = 100_000
	maxRecordedBytes = 64 << 20
)

// recordedSize is what a recorded message keeps on the heap, roughly.
func recordedSize(m Message) int {
	n := len(m.Data) + len(m.CloudCustomData) + len(m.Ext) + len(m.Desc) + 200
	for _, id := range m.EventIDs {
		n += len(id) + 16
	}
	return n
}

// eventIDs reads the event ids a message carries: CloudCustomData's
// "event_id" / "event_ids" first, else the Data envelope(s) or compact
// batch.
func eventIDs(cloud, data string) []string {
	var c struct {
		EventID  string   `json:"event_id"`
		EventIDs []string `json:"event_ids"`
	}
	if json.Unmarshal([]byte(cloud), &c) == nil {
		if len(c.EventIDs) > 0 {
			return c.EventIDs
		}
		if c.EventID != "" {
			return []string{c.EventID}
		}
	}
	var d struct {
		EventID string `json:"event_id"`
		// A compact batch (roomim.ExtRoomEventsCompact) names its room
		// once; an event without "id" is "<app_code>:<room_id>:<s>:<i>".
		AppCode string `json:"app_code"`
		RoomID  string `json:"room_id"`
		Events  []struct {
			EventID string `json:"event_id"`
			ID      string `json:"id"`
			Seq     int64  `json:"s"`
			Index   int    `json:"i"`
		} `json:"events"`
	}
	if json.Unmarshal([]byte(data), &d) == nil {
		if d.EventID != "" {
			return []string{d.EventID}
		}
		ids := make([]string, 0, len(d.Events))
		for _, e := range d.Events {
			switch {
			case e.EventID != "":
				ids = append(ids, e.EventID)
			case e.ID != "":
				ids = append(ids, e.ID)
			default:
				ids = append(ids, fmt.Sprintf("%s:%s:%d:%d", d.AppCode, d.RoomID, e.Seq, e.Index))
			}
		}
		return ids
	}
	return nil
}

// recordLocked keeps an accepted message. Its event ids are read from it
// when a reader first asks (eventIDsLocked), not here: the parse of Data
// was a sixth of the fake's cost per room message, on the path of every
// dev command, for ids that only tests and the debug page read.
func (s *Server) recordLocked(m Message) {
	m.EventIDs = nil
	size := recordedSize(m)
	if len(s.messages) >= maxRecorded || s.recordedBytes+size > maxRecordedBytes {
		half := len(s.messages) / 2
		for _, old := range s.messages[:half] {
			s.recordedBytes -= recordedSize(old)
		}
		s.messages = slices.Delete(s.messages, 0, half)
	}
	s.recordedBytes += size
	m.ID = 1
	if n := len(s.messages); n > 0 {
		m.ID = s.messages[n-1].ID + 1
	}
	s.messages = append(s.messages, m)
	if !s.log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	m = s.withEventIDsLocked(len(s.messages) - 1)
	args := []any{"kind", m.Kind, "msg_seq", m.MsgSeq, "event_ids", m.EventIDs, "bytes", len(m.Data)}
	if m.Kind == "group" {
		args = append(args, "group_id", m.GroupID)
	} else {
		args = append(args, "to", m.To, "ext", m.Ext)
	}
	// Debug: a load run sends thousands a second; /debug/messages lists them.
	s.log.Debug("fake tencent im accepted message", args...)
}

// withEventIDsLocked is message i with its event ids, read from it once
// (an empty list when it carries none). Callers hold mu.
func (s *Server) withEventIDsLocked(i int) Message {
	m := &s.messages[i]
	if m.EventIDs == nil {
		m.EventIDs = eventIDs(m.CloudCustomData, m.Data)
		if m.EventIDs == nil {
			m.EventIDs = []string{}
		}
		s.recordedBytes += recordedSize(*m) - recordedSize(Message{Data: m.Data, CloudCustomData: m.CloudCustomData, Ext: m.Ext, Desc: m.Desc})
	}
	return *m
}

// messagesLocked is the messages from index from on, with their event
// ids. Callers hold mu.
func (s *Server) messagesLocked(from int) []Message {
	out := make([]Message, 0, len(s.messages)-from)
	for i := from; i < len(s.messages); i++ {
		out = append(out, s.withEventIDsLocked(i))
	}
	return out
}

// Messages returns every accepted message in acceptance order.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.messagesLocked(0)
}

// GroupMessages returns the accepted messages of one group.
func (s *Server) GroupMessages(groupID string) []Message {
	return s.filter(func(m Message) bool { return m.Kind == "group" && m.GroupID == groupID })
}

// C2CMessages returns the accepted C2C messages to one user.
func (s *Server) C2CMessages(userID string) []Message {
	return s.filter(func(m Message) bool { return m.Kind == "c2c" && m.To == userID })
}

func (s *Server) filter(keep func(Message) bool) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for i := range s.messages {
		if m := s.withEventIDsLocked(i); keep(m) {
			out = append(out, m)
		}
	}
	return out
}

// EventIDCounts counts, per event id, the accepted messages carrying it:
// a count above one is a duplicate that reached users.
func (s *Server) EventIDCounts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	counts := map[string]int{}
	for i := range s.messages {
		for _, id := range s.withEventIDsLocked(i).EventIDs {
			counts[id]++
		}
	}
	return counts
}

// Duplicates counts the messages Tencent's dedupe windows swallowed.
func (s *Server) Duplicates() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.duplicates
}

// Calls returns every request received, in arrival order.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// CallCount counts the requests received for api ("" = all).
func (s *Server) CallCount(api string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		if api == "" || c.API == api {
			n++
		}
	}
	return n
}

// HasAccount reports whether userID was imported.
func (s *Server) HasAccount(userID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accounts[userID]
}

// ForgetAccount deletes an imported account, as if it was removed on
// Tencent's side.
func (s *Server) ForgetAccount(userID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.accounts, userID)
}

// Group returns a group's state.
func (s *Server) Group(groupID string) (GroupInfo, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.groups[groupID]
	if !ok {
		return GroupInfo{}, false
	}
	return GroupInfo{ID: g.ID, Type: g.Type, Name: g.Name, Owner: g.Owner, Members: g.memberList(), LastSeq: g.Seq}, true
}

// ClearRecords forgets recorded messages, calls and the duplicate count;
// accounts, groups, dedupe windows and faults stay.
func (s *Server) ClearRecords() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.messages, s.calls, s.duplicates, s.recordedBytes = nil, nil, 0, 0
}

func (s *Server) handleDebugMessages(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	out := struct {
		Messages   []Message `json:"messages"`
		Duplicates int       `json:"duplicates"`
		Calls      int       `json:"calls"`
	}{s.messagesLocked(0), s.duplicates, len(s.calls)}
	s.mu.Unlock()
	if out.Messages == nil {
		out.Messages = []Message{}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

var indexTmpl = template.Must(template.New("index").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>fake Tencent IM</title>
<style>body{font-family:sans-serif}td,th{border:1px solid #ccc;padding:2px 6px;vertical-align:top}
table{border-collapse:collapse}code{white-space:pre-wrap;word-break:break-all}</style></head>
<body><h1>fake Tencent IM</h1>
<p>{{.Total}} messages accepted, {{.Duplicates}} duplicates dropped, {{.Calls}} calls. Newest first, last {{len .Messages}} shown. JSON: <a href="/debug/messages">/debug/messages</a></p>
<table><tr><th>#</th><th>time</th><th>to</th><th>ext</th><th>event ids</th><th>data</th></tr>
{{range .Messages}}<tr><td>{{.ID}}</td><td>{{.At.Format "15:04:05.000"}}</td>
<td>{{if eq .Kind "group"}}group {{.GroupID}} #{{.MsgSeq}}{{else}}user {{.To}}{{end}}</td>
<td>{{.Ext}}</td><td>{{range .EventIDs}}{{.}}<br>{{end}}</td><td><code>{{.Data}}</code></td></tr>
{{end}}</table></body></html>`))

func (s *Server) handleIndex(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	n := len(s.messages)
	shown := s.messagesLocked(max(0, n-200))
	data := struct {
		Total, Duplicates, Calls int
		Messages                 []Message
	}{n, s.duplicates, len(s.calls), shown}
	s.mu.Unlock()
	slices.Reverse(data.Messages)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = indexTmpl.Execute(w, data)
}

// AddGroupMember puts userID into a non-AVChatRoom group directly, as the
// client SDK's join would.
func (s *Server) AddGroupMember(groupID, userID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[groupID]
	if g == nil {
		return fmt.Errorf("imfake: no group %q", groupID)
	}
	if g.Type == "AVChatRoom" {
		return fmt.Errorf("imfake: %q is an AVChatRoom; it has no member list", groupID)
	}
	g.addMember(userID)
	return nil
}
