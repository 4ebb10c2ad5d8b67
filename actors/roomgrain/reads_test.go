package roomgrain

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
)

// lostAck stores an append and then reports it failed, once armed: a
// commit whose acknowledgement was lost.
type lostAck struct {
	*memdb.Store
	armed atomic.Bool
}

func (s *lostAck) Append(ctx context.Context, a persistence.Append) error {
	err := s.Store.Append(ctx, a)
	if err == nil && s.armed.CompareAndSwap(true, false) {
		return persistence.ErrUnavailable
	}
	return err
}

// A kept GetRoom answer is never behind the grain: after every commit the
// first page (at each size, read twice so the second read is the kept
// one; the first size read is the one kept before the commit) shows the
// new seq and exactly the members the room has, and a later page is
// never taken from the kept first page.
func TestGetRoomKeptAnswerFollowsEveryCommit(t *testing.T) {
	f := newFixture(t)
	pid := f.activate("app/r1")
	created := f.mustDo(pid, rcCreate("c", "owner"))
	want := []string{"owner"}
	seq := created.RoomSeq
	check := func(step string) {
		t.Helper()
		for _, size := range []int32{1, 0, 2, 1} {
			for read := range 2 {
				r := f.mustDo(pid, rcPage(size, ""))
				if r.RoomSeq != seq || r.Room.GetMemberCount() != int64(len(want)) {
					t.Fatalf("%s: page size %d read %d: seq %d, %d members; want seq %d, %d", step, size, read, r.RoomSeq, r.Room.GetMemberCount(), seq, len(want))
				}
				n := len(want)
				if size > 0 {
					n = min(n, int(size))
				}
				if !slices.Equal(r.Room.Members, want[:n]) {
					t.Fatalf("%s: page size %d read %d lists %v, want %v", step, size, read, r.Room.Members, want[:n])
				}
			}
		}
		if all := f.allPages(pid, 1); !slices.Equal(all, want) {
			t.Fatalf("%s: pages of 1 list %v, want %v", step, all, want)
		}
	}
	check("created")
	for i := range 20 {
		u := fmt.Sprintf("u%02d", i)
		seq = f.mustDo(pid, rcJoin("j"+u, u)).RoomSeq
		want = append(want, u)
		slices.Sort(want)
		check("join " + u)
		if i%3 == 0 {
			seq = f.mustDo(pid, rcKick("k"+u, "owner", u)).RoomSeq
			want = slices.DeleteFunc(want, func(m string) bool { return m == u })
			check("kick " + u)
		}
	}
}

// An append that was stored but reported failed leaves the grain unsure:
// reads answer from its state (every acknowledged write), and the next
// write reloads. The answers kept before must not outlive the reload:
// the first page read after it shows the stored command as well.
func TestGetRoomKeptAnswerDroppedOnReload(t *testing.T) {
	f := newFixture(t)
	store := &lostAck{Store: f.store}
	f.deps.Store = store
	withGate(&f.deps)
	pid := f.activate("app/r1")
	f.mustDo(pid, rcCreate("c", "owner"))
	before := f.mustDo(pid, rcPage(0, ""))
	store.armed.Store(true)
	if _, err := f.do(pid, rcJoin("j-lost", "lost")); err == nil {
		t.Fatal("the join whose ack was lost answered OK")
	}
	// Unsure: the state still holds every acknowledged write.
	if r := f.mustDo(pid, rcPage(0, "")); r.RoomSeq != before.RoomSeq || r.Room.GetMemberCount() != 1 {
		t.Fatalf("read while unsure: seq %d, %d members; want the acknowledged state (seq %d, 1 member)", r.RoomSeq, r.Room.GetMemberCount(), before.RoomSeq)
	}
	j := f.mustDo(pid, rcJoin("j-next", "next")) // reloads first
	r := f.mustDo(pid, rcPage(0, ""))
	if r.RoomSeq != j.RoomSeq || !slices.Equal(r.Room.Members, []string{"lost", "next", "owner"}) {
		t.Fatalf("after the reload: seq %d, members %v; want seq %d and lost, next, owner", r.RoomSeq, r.Room.Members, j.RoomSeq)
	}
}

func rcRanks(period, token string, size int32) *v1.RoomCommand {
	return &v1.RoomCommand{Command: &v1.RoomCommand_ListContributors{ListContributors: &v1.ListContributorsRequest{
		AppCode: "app", RoomId: "r1", Period: period, PageToken: token, PageSize: size}}}
}

// A kept ranking page is never behind the grain: each page (both
// periods, first and second pages, read twice so the second read is the
// kept one) shows the room's seq and the senders in the order their
// gifts put them after every gift; and a day page read after midnight in
// the ranking zone is the new day's (empty), not the kept one.
func TestRankingKeptPagesFollowEveryGiftAndTheDay(t *testing.T) {
	f := newFixture(t)
	var now atomic.Int64
	now.Store(time.Date(2026, 12, 7, 23, 59, 0, 0, time.UTC).UnixMilli())
	f.deps.Clock = func() time.Time { return time.UnixMilli(now.Load()) }
	pid := f.activate("app/r1")
	f.mustDo(pid, rcCreate("c", "owner"))
	sent := map[string]int{}
	users := []string{"u1", "u2", "u3", "u4"}
	for _, u := range users {
		f.mustDo(pid, rcJoin("j-"+u, u))
	}
	for i := range 12 {
		from := users[(i*7)%len(users)]
		r := f.mustDo(pid, rcGift(fmt.Sprint("g", i), from, "owner"))
		sent[from]++
		want := slices.Clone(users)
		slices.SortStableFunc(want, func(a, b string) int { return sent[b] - sent[a] })
		want = slices.DeleteFunc(want, func(u string) bool { return sent[u] == 0 })
		for _, period := range []string{"", "day"} {
			var got []string
			token := ""
			for page := range 3 {
				var first *v1.CommandReply
				for read := range 2 {
					p := f.mustDo(pid, rcRanks(period, token, 2))
					if p.RoomSeq != r.RoomSeq {
						t.Fatalf("gift %d, period %q, page %d, read %d: seq %d, want %d", i, period, page, read, p.RoomSeq, r.RoomSeq)
					}
					if read == 1 && (len(p.Contributors) != len(first.Contributors) || p.NextPageToken != first.NextPageToken) {
						t.Fatalf("gift %d, period %q, page %d: the second read differs from the first", i, period, page)
					}
					first = p
				}
				for _, c := range first.Contributors {
					got = append(got, c.GetUserId())
				}
				if token = first.NextPageToken; token == "" {
					break
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("gift %d, period %q: ranking %v, want %v (sent %v)", i, period, got, want, sent)
			}
		}
	}
	if p := f.mustDo(pid, rcRanks("day", "", 2)); len(p.Contributors) == 0 {
		t.Fatal("the day's first page is empty before midnight")
	}
	now.Add((2 * time.Minute).Milliseconds())
	if p := f.mustDo(pid, rcRanks("day", "", 2)); len(p.Contributors) != 0 || p.ContributorsDay != "2026-12-08" {
		t.Fatalf("after midnight the day page lists %d senders for day %q; want none for 2026-12-08", len(p.Contributors), p.ContributorsDay)
	}
}
