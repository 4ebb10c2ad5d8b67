package room_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/room"
)

// rankSim is the property test's own account of the ranking: every
// accepted gift's value added up per sender, per lifecycle and per day,
// with no cap (the generator has fewer senders than MaxTrackedSenders,
// so the room's ranking must equal it exactly).
type rankSim struct {
	life, day map[string]int64
	dayKey    string
	tops      int
}

// gift gives a SendGift its wallet value and day: days pass 50 times
// faster than the commands' clock, so a run crosses several. The value
// comes from a source of its own, seeded by the command's time, so the
// generator's other draws are what they were without the ranking.
func (rs *rankSim) gift(now int64) (value int64, day string) {
	r := rand.New(rand.NewPCG(uint64(now), 0x5eed))
	return r.Int64N(3) * r.Int64N(700), time.UnixMilli(t0 + (now-t0)*50).UTC().Format(room.DayLayout)
}

// saw follows an accepted event; the top announcements are checked
// against the account as it is after the gift before them.
func (rs *rankSim) saw(e room.Event) error {
	switch e := e.(type) {
	case room.RoomCreated:
		rs.life = nil
	case room.RoomGiftSent:
		if e.Value <= 0 {
			return nil
		}
		if rs.life == nil {
			rs.life = map[string]int64{}
		}
		rs.life[e.FromUserID] += e.Value
		if e.Day != rs.dayKey {
			rs.day, rs.dayKey = map[string]int64{}, e.Day
		}
		rs.day[e.FromUserID] += e.Value
	case room.RoomTopContributorsChanged:
		rs.tops++
		for _, p := range []struct {
			got []room.Leader
			m   map[string]int64
		}{{e.Lifecycle, rs.life}, {e.Today, rs.day}} {
			want := ranked(p.m)
			if len(want) > room.TopSize {
				want = want[:room.TopSize]
			}
			if !slices.Equal(p.got, want) {
				return fmt.Errorf("top announced %v, the gifts make %v", p.got, want)
			}
		}
		if e.Day != rs.dayKey {
			return fmt.Errorf("top announced for day %q, gifts of %q", e.Day, rs.dayKey)
		}
	}
	return nil
}

// check: the room's ranking is the account, in order.
func (rs *rankSim) check(s room.State) error {
	for _, p := range []struct {
		period, today string
		m             map[string]int64
	}{{room.PeriodLifecycle, "", rs.life}, {room.PeriodDay, rs.dayKey, rs.day}} {
		if got, want := room.Contributors(s, p.period, p.today), ranked(p.m); !slices.Equal(got, want) {
			return fmt.Errorf("%s ranking %v, gifts sent %v", p.period, got, want)
		}
	}
	return nil
}

func ranked(m map[string]int64) []room.Leader {
	out := []room.Leader{}
	for _, u := range slices.Sorted(maps.Keys(m)) {
		out = append(out, room.Leader{UserID: u, Value: m[u]})
	}
	slices.SortStableFunc(out, func(a, b room.Leader) int { return int(min(max(b.Value-a.Value, -1), 1)) })
	return out
}

func rankedRoom(t *testing.T) room.State {
	t.Helper()
	return given(t, then(aRoom, join("carol"))...)
}

func giftCmd(from, to string, value int64, day string) room.Command {
	c := gift(from, to, 1, value)
	c.GiftValue, c.Day = value, day
	return c
}

// Gifts build both boards; the top announcement comes when the leaders or
// their order change, not when a leader's total only grows; a gift of
// another day starts the day board and leaves the lifecycle's; a reopen
// starts the lifecycle's.
func TestRankingCountsGiftsByPeriod(t *testing.T) {
	s := rankedRoom(t)
	type step struct {
		cmd      room.Command
		wantTops []room.RoomTopContributorsChanged
	}
	d1, d2 := "2026-12-07", "2026-12-08"
	type L = room.Leader
	top := func(life, today []L, day string) []room.RoomTopContributorsChanged {
		return []room.RoomTopContributorsChanged{{Lifecycle: life, Today: today, Day: day}}
	}
	for i, st := range []step{
		{giftCmd("alice", "bob", 100, d1), top([]L{{"alice", 100}}, []L{{"alice", 100}}, d1)},
		{giftCmd("alice", "bob", 5, d1), nil}, // alice leads still
		{giftCmd("bob", "alice", 50, d1), top([]L{{"alice", 105}, {"bob", 50}}, []L{{"alice", 105}, {"bob", 50}}, d1)},
		{giftCmd("bob", "alice", 55, d1), nil}, // a tie (105 each) goes by user id: alice still first
		{giftCmd("bob", "alice", 1, d1), top([]L{{"bob", 106}, {"alice", 105}}, []L{{"bob", 106}, {"alice", 105}}, d1)},
		// Another day: the day board starts again; the lifecycle's goes on.
		{giftCmd("carol", "alice", 7, d2), top([]L{{"bob", 106}, {"alice", 105}, {"carol", 7}}, []L{{"carol", 7}}, d2)},
		{giftCmd("owner", "alice", 0, d2), nil}, // a free gift counts nothing
		{giftCmd("alice", "bob", 9, d2), top([]L{{"alice", 114}, {"bob", 106}, {"carol", 7}}, []L{{"alice", 9}, {"carol", 7}}, d2)},
		// Only today's leaders change: the announcement carries both.
		{giftCmd("carol", "bob", 3, d2), top([]L{{"alice", 114}, {"bob", 106}, {"carol", 10}}, []L{{"carol", 10}, {"alice", 9}}, d2)},
	} {
		evs, err := room.Decide(s, st.cmd)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		var tops []room.RoomTopContributorsChanged
		for _, e := range evs {
			if e, ok := e.(room.RoomTopContributorsChanged); ok {
				tops = append(tops, e)
			}
		}
		if fmt.Sprint(tops) != fmt.Sprint(st.wantTops) {
			t.Fatalf("step %d: tops %v, want %v", i, tops, st.wantTops)
		}
		s = room.ApplyCommand(s, s.Seq+1, evs)
	}
	life := []room.Leader{{"alice", 114}, {"bob", 106}, {"carol", 10}}
	if got := room.Contributors(s, room.PeriodLifecycle, d2); !slices.Equal(got, life) {
		t.Fatalf("lifecycle %v, want %v", got, life)
	}
	if got := room.Contributors(s, room.PeriodDay, d2); !slices.Equal(got, []room.Leader{{"carol", 10}, {"alice", 9}}) {
		t.Fatalf("day %v", got)
	}
	if got := room.Contributors(s, room.PeriodDay, "2026-12-09"); len(got) != 0 {
		t.Fatalf("a day without gifts lists %v", got)
	}
	// Closed and reopened: a new lifecycle, today's board stays.
	for _, c := range []room.Command{closeRoom("owner"), reopen("owner")} {
		evs, err := room.Decide(s, c)
		if err != nil {
			t.Fatal(err)
		}
		s = room.ApplyCommand(s, s.Seq+1, evs)
	}
	if got := room.Contributors(s, room.PeriodLifecycle, d2); len(got) != 0 {
		t.Fatalf("a reopened room's lifecycle ranking %v", got)
	}
	if got := room.Contributors(s, room.PeriodDay, d2); !slices.Equal(got, []room.Leader{{"carol", 10}, {"alice", 9}}) {
		t.Fatalf("day after the reopen %v", got)
	}
}

// Past MaxTrackedSenders the smallest totals are dropped: the floor says
// how much a sender who is not listed sent at most, an entry tracked from
// its first gift is exact, one that came back after the drops is marked
// inexact, and the leaders are untouched.
func TestRankingCapKeepsLeadersExactAndSaysWhatItDropped(t *testing.T) {
	s := rankedRoom(t)
	apply := func(from string, value int64) {
		t.Helper()
		c := giftCmd("alice", "bob", value, "2026-12-07")
		evs, err := room.Decide(s, c)
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range evs {
			if g, ok := e.(room.RoomGiftSent); ok {
				g.FromUserID = from // senders need not be members for the board's arithmetic
				evs[i] = g
			}
		}
		s.ApplyInPlace(s.Seq+1, evs)
	}
	apply("whale", 1_000_000)
	apply("dolphin", 500_000)
	for i := range room.MaxTrackedSenders - 2 {
		apply(fmt.Sprintf("s%04d", i), int64(10+i))
	}
	if f := room.RankFloor(s, room.PeriodLifecycle, ""); f != 0 {
		t.Fatalf("floor %d before any drop", f)
	}
	apply("late", 5) // drops s0000 (10)
	if f := room.RankFloor(s, room.PeriodLifecycle, ""); f != 10 {
		t.Fatalf("floor %d, want the dropped 10", f)
	}
	apply("s0000", 20) // back, short by up to 10
	all := room.Contributors(s, room.PeriodLifecycle, "")
	if len(all) != room.MaxTrackedSenders || all[0] != (room.Leader{"whale", 1_000_000}) || all[1] != (room.Leader{"dolphin", 500_000}) {
		t.Fatalf("%d tracked, leaders %v", len(all), all[:2])
	}
	q := room.ContributorsQuery{Period: room.PeriodLifecycle, Size: room.MaxTrackedSenders}
	page, _, floor := room.ContributorsPage(s, q, "")
	exact := map[string]bool{}
	for _, c := range page {
		exact[c.UserId] = c.Exact
	}
	// s0000's return dropped "late" (5, which arrived after a drop of 10:
	// it may have sent up to 15), so nobody unlisted sent more than 15.
	if floor != 15 || !exact["whale"] || !exact["s0500"] || exact["s0000"] {
		t.Fatalf("floor %d, exact whale %v s0500 %v s0000 %v", floor, exact["whale"], exact["s0500"], exact["s0000"])
	}
	if _, listed := exact["late"]; listed {
		t.Fatal("late still listed")
	}
}

// Pages walk the ranking once each, in order, whatever the page size;
// bad periods, sizes and tokens are refused by name.
func TestContributorsPagesWalkEverySenderOnce(t *testing.T) {
	s := rankedRoom(t)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 250 {
		c := giftCmd("alice", "bob", 1+r.Int64N(40), "2026-12-07")
		evs, _ := room.Decide(s, c)
		g := evs[0].(room.RoomGiftSent)
		g.FromUserID = fmt.Sprintf("u%03d", i%173)
		evs[0] = g
		s.ApplyInPlace(s.Seq+1, evs)
	}
	want := room.Contributors(s, room.PeriodDay, "2026-12-07")
	if len(want) != 173 {
		t.Fatalf("%d senders", len(want))
	}
	for _, size := range []int32{1, 7, 20, 100} {
		var got []room.Leader
		tok := ""
		for {
			q, err := room.ParseContributors(&v1.ListContributorsRequest{AppCode: "app", RoomId: "r1", Period: room.PeriodDay, PageSize: size, PageToken: tok})
			if err != nil {
				t.Fatal(err)
			}
			page, next, _ := room.ContributorsPage(s, q, "2026-12-07")
			for _, c := range page {
				if int(c.Rank) != len(got)+1 {
					t.Fatalf("size %d: rank %d at position %d", size, c.Rank, len(got)+1)
				}
				got = append(got, room.Leader{UserID: c.UserId, Value: c.Value})
			}
			if tok = next; tok == "" {
				break
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("size %d: walked %d entries, want %d in order", size, len(got), len(want))
		}
	}
	for _, bad := range []*v1.ListContributorsRequest{
		{AppCode: "app", RoomId: "r1", Period: "week"},
		{AppCode: "app", RoomId: "r1", PageSize: room.MaxContributorsPageSize + 1},
		{AppCode: "app", RoomId: "r1", PageSize: -1},
		{AppCode: "app", RoomId: "r1", PageToken: "!!"},
		{AppCode: "app", RoomId: "r1", PageToken: "YWJj"}, // "abc": no value
		{AppCode: "", RoomId: "r1"},
	} {
		if _, err := room.ParseContributors(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
