package shardmap

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
)

type failingReader struct{}

func (failingReader) RoomOutboxAfter(context.Context, string, int64, string, int) ([]persistence.OutboxRow, error) {
	return nil, persistence.ErrUnavailable
}

// Paging through two databases' kicks with a small limit returns every
// row once, in (created_at_ms, event_id) order over both; a database that
// fails fails the read, named, rather than being skipped.
func TestRoomOutboxesReadTheUnionInCursorOrder(t *testing.T) {
	ctx := context.Background()
	a, b := memdb.New(), memdb.New()
	var want []string
	for i := range 12 {
		s, room := a, "ra"
		if i%3 == 1 {
			s, room = b, "rb"
		}
		created := int64(100 + 10*(i/2)) // pairs share a time: ids break the tie
		id := fmt.Sprintf("%s:%02d", room, i)
		env := persistence.Envelope{EventID: id, EventType: "RoomUserKicked", AppCode: "app", RoomID: room, RoomSeq: int64(i + 1),
			CommandID: fmt.Sprint("c", i), CreatedAtMs: created, Payload: []byte("{}")}
		rec := persistence.CommandRecord{AppCode: "app", RoomID: room, Seq: int64(i + 1), CommandID: env.CommandID, CommandType: "KickUser",
			Reply: []byte("{}"), Events: []persistence.Envelope{env}, CreatedAtMs: created}
		// Seqs per room must follow on: count this room's rows so far.
		rows, _ := s.LoadCommands(ctx, persistence.RoomKey{AppCode: "app", RoomID: room}, 0)
		rec.Seq, rec.Events[0].RoomSeq = int64(len(rows)+1), int64(len(rows)+1)
		if err := s.Append(ctx, persistence.Append{Command: rec}); err != nil {
			t.Fatal(err)
		}
		want = append(want, fmt.Sprintf("%d/%s", created, id))
	}
	slices.Sort(want) // created is zero-padded enough (3 digits) for text order
	o := RoomOutboxes{Keys: []string{"default", "b"}, Readers: []persistence.RoomOutboxReader{a, b}}
	var got []string
	afterMs, afterID := int64(0), ""
	for page := 0; page < 20; page++ {
		rows, err := o.RoomOutboxAfter(ctx, "RoomUserKicked", afterMs, afterID, 5)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) == 0 {
			break
		}
		for _, r := range rows {
			got = append(got, fmt.Sprintf("%d/%s", r.CreatedAtMs, r.Envelope.EventID))
		}
		last := rows[len(rows)-1]
		afterMs, afterID = last.CreatedAtMs, last.Envelope.EventID
	}
	if !slices.Equal(got, want) {
		t.Fatalf("paged union\n got %v\nwant %v", got, want)
	}
	o.Readers[1] = failingReader{}
	if _, err := o.RoomOutboxAfter(ctx, "RoomUserKicked", 0, "", 5); !errors.Is(err, persistence.ErrUnavailable) || !strings.Contains(err.Error(), `"b"`) {
		t.Fatalf("a failing database: %v, want ErrUnavailable naming b", err)
	}
}
