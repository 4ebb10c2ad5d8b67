package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/hyapp/roomcell/persistence"
)

// CommandRanger is the bounded command log read a room's event log
// (ListRoomEvents) uses; memdb and MySQL have it.
type CommandRanger interface {
	persistence.Store
	LoadCommandRange(ctx context.Context, key persistence.RoomKey, afterSeq int64, limit int) ([]persistence.CommandRecord, error)
}

// RunCommandRange: LoadCommandRange is LoadCommands' first limit rows, of
// the one room, in seq order, with their events.
func RunCommandRange(t *testing.T, open func(t *testing.T) CommandRanger) {
	s := open(t)
	ctx := t.Context()
	for _, seq := range []int64{3, 1, 5, 2, 4} {
		mustAppend(t, s, persistence.Append{Command: command(roomA, seq, fmt.Sprintf("cmd-%d", seq), 1000+seq, fmt.Sprintf("ev-%d", seq))})
	}
	mustAppend(t, s, persistence.Append{Command: command(persistence.RoomKey{AppCode: "app1", RoomID: "room-b"}, 1, "other", 1000)})
	for _, tc := range []struct {
		after int64
		limit int
		want  []int64
	}{
		{0, 2, []int64{1, 2}},
		{0, 100, []int64{1, 2, 3, 4, 5}},
		{2, 2, []int64{3, 4}},
		{4, 10, []int64{5}},
		{5, 10, nil},
		{0, 0, nil},
	} {
		got, err := s.LoadCommandRange(ctx, roomA, tc.after, tc.limit)
		mustNoErr(t, "LoadCommandRange", err)
		if !slices.Equal(seqs(got), tc.want) {
			t.Fatalf("LoadCommandRange(after %d, limit %d): seqs %v, want %v", tc.after, tc.limit, seqs(got), tc.want)
		}
		for _, r := range got {
			if r.Key() != roomA || len(r.Events) != 1 || r.Events[0].EventID != fmt.Sprintf("ev-%d", r.Seq) {
				t.Fatalf("LoadCommandRange row %d: %+v", r.Seq, r)
			}
		}
	}
}
