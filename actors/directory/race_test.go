package directory

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// A room's directory worker checks that a join is still the user's
// membership and then writes it; the user can leave and join elsewhere in
// between. Here w's write of bob's join is held after that check until bob
// has left w and joined x and x's write is done. The late write must not
// evict bob from x, and the directory must end up naming x.
func TestDirectoryJoinWriteRacingALeaveDoesNotEvict(t *testing.T) {
	d := newDirFixture(t, time.Hour)
	d.room("w")
	d.room("x")
	d.mustExec(create("w", "c1", "ow"))
	d.mustExec(create("x", "c1", "ox"))
	waitFor(t, func() bool { return d.userRoom("ow") == "w" && d.userRoom("ox") == "x" })
	arrived, release := d.sw.hold("w")
	d.mustExec(join("w", "j1", "bob"))
	<-arrived // w's worker has passed its check and is about to write
	d.mustExec(leaveRoom("w", "l1", "bob"))
	d.mustExec(join("x", "j2", "bob"))
	waitFor(t, func() bool { return d.userRoom("bob") == "x" })
	release()
	time.Sleep(200 * time.Millisecond) // a wrong leave to x would have landed now
	if !contains(d.members("x"), "bob") {
		t.Fatal("a directory write of bob's old join evicted him from the room he is in")
	}
	if left := d.leftEvents("x"); len(left) != 0 {
		t.Fatalf("x emitted %+v, want no leave", left)
	}
	waitFor(t, func() bool { return d.userRoom("bob") == "x" })
}

// Many users switch rooms at once while the directory answers slowly (a
// remote round trip) and rooms refresh often. Every acknowledged join holds
// until its user leaves: a user's leave of the room they just joined never
// finds them gone, and after the last join of each user they are in
// exactly that room, which the directory names.
func TestDirectoryUsersSwitchingRoomsKeepEveryAcknowledgedJoin(t *testing.T) {
	d := newDirFixture(t, 50*time.Millisecond)
	d.sw.jitter = 2 * time.Millisecond
	const rooms, users, rounds = 8, 16, 15
	for i := range rooms {
		r := fmt.Sprint("r", i)
		d.room(r)
		d.mustExec(create(r, "c1", "owner-"+r))
	}
	final := make([]string, users)
	var wg sync.WaitGroup
	errs := make(chan error, users)
	for u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user := fmt.Sprint("u", u)
			for k := range rounds {
				r := fmt.Sprint("r", rand.N(rooms))
				if _, err := d.exec(join(r, fmt.Sprint(user, "-j", k), user)); err != nil {
					errs <- fmt.Errorf("%s join %s: %w", user, r, err)
					return
				}
				final[u] = r
				if rand.N(3) == 0 {
					continue // switch without leaving: the next join moves the user
				}
				if _, err := d.exec(leaveRoom(r, fmt.Sprint(user, "-l", k), user)); err != nil {
					errs <- fmt.Errorf("%s leave %s right after joining it: %w", user, r, err)
					return
				}
				final[u] = ""
			}
			r := fmt.Sprint("r", rand.N(rooms))
			if _, err := d.exec(join(r, user+"-last", user)); err != nil {
				errs <- fmt.Errorf("%s join %s: %w", user, r, err)
				return
			}
			final[u] = r
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// settled reports what still differs from each user's last join ("" =
	// nothing).
	settled := func() string {
		in := map[string][]string{}
		for i := range rooms {
			r := fmt.Sprint("r", i)
			for _, m := range d.members(r) {
				in[m] = append(in[m], r)
			}
		}
		for u := range users {
			user := fmt.Sprint("u", u)
			if len(in[user]) != 1 || in[user][0] != final[u] || d.userRoom(user) != final[u] {
				return fmt.Sprintf("%s: last joined %s, member of %v, directory names %q", user, final[u], in[user], d.userRoom(user))
			}
		}
		return ""
	}
	deadline := time.Now().Add(10 * time.Second)
	for diff := settled(); diff != ""; diff = settled() {
		if time.Now().After(deadline) {
			t.Fatalf("not settled after 10s: %s", diff)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The directory work still in flight (refreshes, leaves) must not
	// change that.
	for range 10 {
		time.Sleep(50 * time.Millisecond)
		if diff := settled(); diff != "" {
			t.Fatalf("a user lost the room of their last acknowledged join, or is in another one too: %s", diff)
		}
	}
}
