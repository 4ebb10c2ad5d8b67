package directory

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hyapp/roomcell/persistence"
)

// listing returns app's listed rooms.
func (d *dirFixture) listing() []persistence.RoomEntry {
	d.t.Helper()
	p, err := d.dir.ListRooms(context.Background(), "app", 0, 10)
	if err != nil {
		d.t.Fatal(err)
	}
	return p.Rooms
}

// Listing writes are paced: the first change after a quiet spell is
// written at once, a burst within ListingGap merges into one write at the
// end of the gap, and that write carries the newest entry. A room closed
// while a write is held back is not listed again by it.
func TestDirectoryListingWritesMergeWithinTheGap(t *testing.T) {
	const gap = 400 * time.Millisecond
	d := newDirFixture(t, time.Hour)
	d.opts.ListingGap = gap
	d.room("r1")
	d.room("r2")

	start := time.Now()
	d.mustExec(create("r1", "c1", "o1"))
	// Leading edge: listed without waiting for the gap.
	waitFor(t, func() bool { return len(d.listing()) == 1 })
	if took := time.Since(start); took >= gap {
		t.Logf("first listing took %v (slow machine); not checking the leading edge", took)
	}
	// A burst: 60 joins and gifts back to back.
	const joins = 60
	for i := range joins {
		d.mustExec(join("r1", fmt.Sprintf("j%d", i), fmt.Sprintf("u%d", i)))
		if i%10 == 0 {
			d.mustExec(gift("r1", fmt.Sprintf("g%d", i), fmt.Sprintf("u%d", i), "o1", 1))
		}
	}
	burst := time.Since(start)
	waitFor(t, func() bool {
		l := d.listing()
		return len(l) == 1 && l[0].MemberCount == joins+1 && l[0].Heat == 60
	})
	// One write per gap at most, plus the leading one and the one at the
	// end of the burst.
	if got, most := d.sw.updates.Load(), int64(burst/gap)+2; got > most {
		t.Fatalf("%d listing writes for a %v burst, want at most %d (gap %v)", got, burst, most, gap)
	}
	// The held-back write must not resurrect the listing after a close:
	// r2 gets a change right after its first write (held back), then closes.
	d.mustExec(create("r2", "c1", "o2"))
	waitFor(t, func() bool { return len(d.listing()) == 2 })
	d.mustExec(join("r2", "j1", "bob"))
	d.mustExec(closeRoom("r2", "x1", "o2"))
	time.Sleep(gap + 200*time.Millisecond)
	l := d.listing()
	if len(l) != 1 || l[0].RoomID != "r1" {
		t.Fatalf("listing after r2 closed: %+v, want only r1", l)
	}
	// After a quiet spell the next change is written at once again.
	before := d.sw.updates.Load()
	d.mustExec(join("r1", "late", "late-user"))
	waitFor(t, func() bool { return d.sw.updates.Load() > before })
	if l := d.listing(); l[0].MemberCount != joins+2 {
		t.Fatalf("member count %d after the quiet spell, want %d", l[0].MemberCount, joins+2)
	}
}
