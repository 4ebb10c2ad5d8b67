package memdb

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"

	"github.com/hyapp/roomcell/persistence"
)

func TestZZHeapProfile(t *testing.T) {
	runtime.MemProfileRate = 64
	ctx := context.Background()
	s := New()
	d := NewDirectory(DirectoryOptions{})
	for i := range 5000 {
		if err := createRoom(ctx, s, i, int64(1_700_000_000_000+i)); err != nil {
			t.Fatal(err)
		}
		key := persistence.RoomKey{AppCode: "bench", RoomID: fmt.Sprintf("bench-%d", i)}
		owner := fmt.Sprintf("owner-%d", i)
		d.SetUserRoom(ctx, key, owner, 5)
		d.Heartbeat(ctx, key, owner, 5)
		d.UpdateRoom(ctx, persistence.RoomEntry{AppCode: key.AppCode, RoomID: key.RoomID, Name: "bench", OwnerUserID: owner, MemberCount: 1, Heat: int64(i % 7)})
	}
	runtime.GC()
	f, _ := os.Create("/tmp/memheap/store.heap")
	pprof.WriteHeapProfile(f)
	f.Close()
	runtime.KeepAlive(s)
	runtime.KeepAlive(d)
}
