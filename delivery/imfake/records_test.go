package imfake

import (
	"log/slog"
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
