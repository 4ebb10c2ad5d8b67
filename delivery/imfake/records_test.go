package imfake

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
)

// A long-running dev fake keeps a bounded log: past the byte bound (or the
// count) the older half of the messages goes, the newest stay, ids keep
// counting; the call log is bounded by count.
func TestRecordsStayBounded(t *testing.T) {
	s := &Server{log: slog.New(slog.DiscardHandler)}
	data := strings.Repeat("x", 12<<10) // a full hot-room message
	const n = 20_000                    // ~240 MB of data if nothing went
	s.mu.Lock()
	for range n {
		s.recordLocked(Message{Kind: "group", GroupID: "g", Data: data})
		if s.recordedBytes > maxRecordedBytes {
			s.mu.Unlock()
			t.Fatalf("%d bytes recorded, bound %d", s.recordedBytes, maxRecordedBytes)
		}
	}
	want := 0
	for _, m := range s.messages {
		want += recordedSize(m)
	}
	last := s.messages[len(s.messages)-1].ID
	kept := len(s.messages)
	bytes := s.recordedBytes
	s.mu.Unlock()
	if bytes != want {
		t.Fatalf("recordedBytes %d, the kept messages' sizes add up to %d", bytes, want)
	}
	if last != n || kept == 0 || kept > maxRecordedBytes/len(data) {
		t.Fatalf("newest id %d (want %d), %d kept", last, n, kept)
	}
	for range maxRecorded + 10 {
		s.recordCall(Call{API: "send_group_msg"})
	}
	if c := len(s.Calls()); c > maxRecorded || c < maxRecorded/2 {
		t.Fatalf("%d calls kept, bound %d", c, maxRecorded)
	}
}

// A message's event ids are read from it when first asked for, not when it
// is accepted: every reader still sees them, and the byte count of the
// log keeps the ids once read, so the bound still holds after the older
// half goes.
func TestEventIDsReadWhenAsked(t *testing.T) {
	s := &Server{log: slog.New(slog.DiscardHandler)}
	compact := func(seq int) string {
		return fmt.Sprintf(`{"app_code":"a","room_id":"r","t0":1,"types":["T"],"events":[{"s":%d,"t":0},{"s":%d,"i":1,"t":0},{"id":"x-%d","s":%d,"t":0}]}`, seq, seq, seq, seq)
	}
	sum := func() (got, want int) {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, m := range s.messages {
			want += recordedSize(m)
		}
		return s.recordedBytes, want
	}
	s.mu.Lock()
	for i := range 3 {
		s.recordLocked(Message{Kind: "group", GroupID: "g", Data: compact(i + 1), EventIDs: []string{"stale"}})
	}
	s.recordLocked(Message{Kind: "group", GroupID: "g", Data: `{"no":"ids"}`})
	s.mu.Unlock()
	msgs := s.GroupMessages("g")
	if len(msgs) != 4 {
		t.Fatalf("%d messages", len(msgs))
	}
	for i, m := range msgs[:3] {
		want := []string{fmt.Sprintf("a:r:%d:0", i+1), fmt.Sprintf("a:r:%d:1", i+1), fmt.Sprintf("x-%d", i+1)}
		if !slices.Equal(m.EventIDs, want) {
			t.Fatalf("message %d: ids %v, want %v", i, m.EventIDs, want)
		}
	}
	if msgs[3].EventIDs == nil || len(msgs[3].EventIDs) != 0 {
		t.Fatalf("a message without ids: %#v", msgs[3].EventIDs)
	}
	if c := s.EventIDCounts(); c["a:r:2:1"] != 1 || c["stale"] != 0 || len(c) != 9 {
		t.Fatalf("counts %v", c)
	}
	if got, want := sum(); got != want {
		t.Fatalf("recordedBytes %d after the ids were read, the messages' sizes add up to %d", got, want)
	}
	data := strings.Repeat("x", 12<<10)
	s.mu.Lock()
	for range 10_000 {
		s.recordLocked(Message{Kind: "group", GroupID: "h", Data: data})
	}
	s.mu.Unlock()
	_ = s.Messages()
	if got, want := sum(); got != want || got > maxRecordedBytes {
		t.Fatalf("recordedBytes %d, the messages' sizes add up to %d, bound %d", got, want, maxRecordedBytes)
	}
}
