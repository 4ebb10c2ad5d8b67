package room

import (
	"encoding/base64"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/errclass"
)

// Contribution ranking: who sent the most gift value in the room, over
// two periods: the room's lifecycle (since it was created or last
// reopened) and the day (a calendar day in the node's room.ranking.zone,
// UTC by default). The value of a gift is what the wallet charged for it
// (RoomGiftSent.Value, the price in COIN), so a sender's total is exactly
// what the wallet ledger debited them for the room's logged gifts.
//
// The room keeps the totals in its own state, built by RoomGiftSent's
// apply: replay rebuilds them from the log, and no other store is asked.
// The day a gift counts for is decided once, by the grain that decided
// the gift (RoomGiftSent.Day), so replay never asks a clock or a zone.
//
// Bounded: a period tracks at most MaxTrackedSenders senders. When a new
// sender arrives at a full board, the last of the ranking (the smallest
// total) is dropped and the board remembers the largest total it ever
// dropped (Floor). What this guarantees:
//   - While a period has had at most MaxTrackedSenders distinct senders
//     (Floor 0), every total is exact and the ranking is complete.
//   - Beyond that, a sender who is listed and marked exact has been
//     tracked since their first gift of the period: their total is exact.
//     A sender who arrived after a drop may have been dropped before
//     (their total can be short by at most the Floor of their arrival):
//     listed, but not exact.
//   - A sender who is not listed sent at most Floor in the period, so a
//     listed exact entry whose total is above Floor is certainly ahead of
//     every sender not listed.
//
// Dropping never touches the top of the board: the dropped entry is the
// last of at least MaxTrackedSenders, never one of the first TopSize.
const (
	MaxTrackedSenders = 1000
	// TopSize is how many leaders RoomTopContributorsChanged announces.
	TopSize = 3

	PeriodLifecycle = "lifecycle"
	PeriodDay       = "day"

	DefaultContributorsPageSize = 20
	MaxContributorsPageSize     = 100
	// DayLayout is a day's key: its date in the ranking's zone.
	DayLayout = "2006-01-02"
)

// Contributor is one sender's total in one period.
type Contributor struct {
	UserID string `json:"user_id"`
	Value  int64  `json:"value"`
	// Short: the most this total may miss, when the sender arrived
	// after the board had dropped someone (it may have been them); 0 =
	// exact.
	Short int64 `json:"short,omitempty"`
}

// Board is one period's ranking.
type Board struct {
	// Senders in ranking order: the larger total first, ties by user id.
	// Kept in order as gifts arrive (a gift moves its sender up, never
	// anyone else), so neither a read nor Decide sorts.
	Senders []Contributor `json:"senders,omitempty"`
	// Floor: the most any sender the board dropped may have sent (0:
	// none dropped; every sender of the period is on the board).
	Floor int64 `json:"floor,omitempty"`
}

// Ranks is the room's ranking state.
type Ranks struct {
	Life Board `json:"life,omitzero"`
	Day  Board `json:"day,omitzero"`
	// DayKey is the day Day counts (DayLayout); a gift of another day
	// starts the board again.
	DayKey string `json:"day_key,omitempty"`
}

func (b Board) zero() bool { return b.Senders == nil && b.Floor == 0 }

func (r Ranks) zero() bool { return r.Life.zero() && r.Day.zero() && r.DayKey == "" }

func (r Ranks) clone() Ranks {
	r.Life.Senders = slices.Clone(r.Life.Senders)
	r.Day.Senders = slices.Clone(r.Day.Senders)
	return r
}

func (r *Ranks) canonical() {
	nilIfEmpty(&r.Life.Senders)
	nilIfEmpty(&r.Day.Senders)
}

// ahead reports whether a ranks before b.
func ahead(a, b Contributor) bool {
	if a.Value != b.Value {
		return a.Value > b.Value
	}
	return a.UserID < b.UserID
}

func (b Board) index(user string) int {
	return slices.IndexFunc(b.Senders, func(c Contributor) bool { return c.UserID == user })
}

// add counts value for user and moves them up to their place.
func (b *Board) add(user string, value int64) {
	i := b.index(user)
	if i < 0 {
		if len(b.Senders) >= MaxTrackedSenders {
			last := b.Senders[len(b.Senders)-1]
			b.Floor = max(b.Floor, satAdd(last.Value, last.Short))
			b.Senders = b.Senders[:len(b.Senders)-1]
		}
		b.Senders = append(b.Senders, Contributor{UserID: user, Short: b.Floor})
		i = len(b.Senders) - 1
	}
	b.Senders[i].Value = satAdd(b.Senders[i].Value, value)
	for ; i > 0 && ahead(b.Senders[i], b.Senders[i-1]); i-- {
		b.Senders[i], b.Senders[i-1] = b.Senders[i-1], b.Senders[i]
	}
}

// top is the board's first TopSize senders.
func (b Board) top() []Leader {
	out := make([]Leader, 0, TopSize)
	for _, c := range b.Senders[:min(len(b.Senders), TopSize)] {
		out = append(out, Leader{UserID: c.UserID, Value: c.Value})
	}
	return out
}

// topWith is the board's top once user has sent value more: only user's
// total changes and totals only grow, so the new leaders are among the
// old ones and user.
func (b Board) topWith(user string, value int64) []Contributor {
	head := slices.Clone(b.Senders[:min(len(b.Senders), TopSize)])
	if i := slices.IndexFunc(head, func(c Contributor) bool { return c.UserID == user }); i >= 0 {
		head[i].Value = satAdd(head[i].Value, value)
	} else {
		prev := Contributor{UserID: user}
		if j := b.index(user); j >= 0 {
			prev = b.Senders[j]
		}
		prev.Value = satAdd(prev.Value, value)
		head = append(head, prev)
	}
	slices.SortFunc(head, func(x, y Contributor) int {
		if ahead(x, y) {
			return -1
		}
		return 1
	})
	return head[:min(len(head), TopSize)]
}

func satAdd(a, b int64) int64 {
	if b > math.MaxInt64-a {
		return math.MaxInt64
	}
	return a + b
}

// countGift is RoomGiftSent's effect on the ranking.
func (s *State) countGift(e RoomGiftSent) {
	if e.Value <= 0 {
		return // a free gift, or one logged before gifts carried their price
	}
	r := &s.mx().Ranks
	r.Life.add(e.FromUserID, e.Value)
	if e.Day == "" {
		return
	}
	if e.Day != r.DayKey {
		r.Day, r.DayKey = Board{}, e.Day
	}
	r.Day.add(e.FromUserID, e.Value)
}

// startLifecycle empties the lifecycle board (RoomCreated, reopens too).
func (s *State) startLifecycle() {
	if s.Extra != nil {
		s.Extra.Ranks.Life = Board{}
	}
}

// Leader is one of a board's leaders as RoomTopContributorsChanged
// announces them.
type Leader struct {
	UserID string `json:"user_id"`
	Value  int64  `json:"value"`
}

// RoomTopContributorsChanged: a gift changed who leads the lifecycle's
// or the day's ranking, or their order (a leader's growing total alone
// is no change: the gift's own event tells it). It carries both tops as
// they are after the gift, so a client needs no earlier one, and a gift
// costs the room's IM group at most one message for the ranking.
type RoomTopContributorsChanged struct {
	Lifecycle []Leader `json:"lifecycle"`
	Today     []Leader `json:"today"`
	Day       string   `json:"day,omitempty"` // the day Today counts
}

func (RoomTopContributorsChanged) EventType() string { return TypeRoomTopContributorsChanged }

// apply: the gift before it moved the totals; this only tells the news.
func (RoomTopContributorsChanged) apply(*State) {}

// topChange is the announcement a gift of value by user on day causes,
// if it changes a period's leaders.
func topChange(s State, user string, value int64, day string) []Event {
	if value <= 0 {
		return nil
	}
	r := s.x().Ranks
	dayBoard := r.Day
	if day != r.DayKey {
		dayBoard = Board{}
	}
	leaders := func(cs []Contributor) []Leader {
		out := make([]Leader, len(cs))
		for i, c := range cs {
			out[i] = Leader{UserID: c.UserID, Value: c.Value}
		}
		return out
	}
	sameIDs := func(a []Leader, b []Leader) bool {
		return slices.EqualFunc(a, b, func(x, y Leader) bool { return x.UserID == y.UserID })
	}
	e := RoomTopContributorsChanged{Lifecycle: leaders(r.Life.topWith(user, value)), Today: dayBoard.top(), Day: day}
	changed := !sameIDs(e.Lifecycle, r.Life.top())
	if day != "" {
		e.Today = leaders(dayBoard.topWith(user, value))
		changed = changed || !sameIDs(e.Today, dayBoard.top())
	}
	if !changed {
		return nil
	}
	return []Event{e}
}

// checkGiftRanking bounds what the grain adds to a gift.
func checkGiftRanking(cmd Command) error {
	if cmd.GiftValue < 0 {
		return errclass.Invalidf("gift value must not be negative")
	}
	if cmd.Day != "" && !validDay(cmd.Day) {
		return errclass.Invalidf("gift day %q is not a %s date", cmd.Day, DayLayout)
	}
	return nil
}

func validDay(d string) bool {
	if len(d) != len(DayLayout) {
		return false
	}
	for i, c := range d {
		if (i == 4 || i == 7) != (c == '-') || c != '-' && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// ContributorsQuery is a checked ListContributors request.
type ContributorsQuery struct {
	Period string
	Size   int
	// After: the page starts after this position (Value desc, User asc);
	// HasAfter false = from the first.
	AfterValue int64
	AfterUser  string
	HasAfter   bool
}

// ParseContributors checks a ListContributors request: period
// ("" = lifecycle), page_size (0 = DefaultContributorsPageSize) and
// page_token (the last entry of the previous page, so a page depends on
// no activation's memory).
func ParseContributors(r *v1.ListContributorsRequest) (ContributorsQuery, error) {
	if err := checkQueryIDs(r.GetAppCode(), r.GetRoomId(), r.GetRequestId()); err != nil {
		return ContributorsQuery{}, err
	}
	q := ContributorsQuery{Period: r.GetPeriod(), Size: int(r.GetPageSize())}
	switch q.Period {
	case "":
		q.Period = PeriodLifecycle
	case PeriodLifecycle, PeriodDay:
	default:
		return ContributorsQuery{}, errclass.Invalidf("period must be %q or %q, got %q", PeriodLifecycle, PeriodDay, q.Period)
	}
	switch {
	case q.Size < 0 || q.Size > MaxContributorsPageSize:
		return ContributorsQuery{}, errclass.Invalidf("page_size must be between 0 (default %d) and %d, got %d", DefaultContributorsPageSize, MaxContributorsPageSize, q.Size)
	case q.Size == 0:
		q.Size = DefaultContributorsPageSize
	}
	if tok := r.GetPageToken(); tok != "" {
		b, err := base64.RawURLEncoding.DecodeString(tok)
		v, user, ok := strings.Cut(string(b), ":")
		n, perr := strconv.ParseInt(v, 10, 64)
		if err != nil || !ok || perr != nil || n < 0 || checkID("page_token", user) != nil {
			return ContributorsQuery{}, errclass.Invalidf("page_token is not one this server returned")
		}
		q.AfterValue, q.AfterUser, q.HasAfter = n, user, true
	}
	return q, nil
}

func contributorsToken(value int64, user string) string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%d:%s", value, user))
}

// board returns the period's board as of today (a day board of another
// day is empty: nobody has sent anything today yet).
func (r Ranks) board(period, today string) Board {
	if period == PeriodDay {
		if r.DayKey != today {
			return Board{}
		}
		return r.Day
	}
	return r.Life
}

// ContributorsPage returns one page of the period's ranking as of today,
// the token of the next ("" after the last) and the board's floor.
func ContributorsPage(s State, q ContributorsQuery, today string) (out []*v1.Contributor, next string, floor int64) {
	b := s.x().Ranks.board(q.Period, today)
	from := 0
	if q.HasAfter {
		cursor := Contributor{UserID: q.AfterUser, Value: q.AfterValue}
		from, _ = slices.BinarySearchFunc(b.Senders, cursor, func(c, cur Contributor) int {
			if ahead(c, cur) || c.UserID == cur.UserID && c.Value == cur.Value {
				return -1
			}
			return 1
		})
	}
	to := min(from+q.Size, len(b.Senders))
	for i := from; i < to; i++ {
		c := b.Senders[i]
		out = append(out, &v1.Contributor{Rank: int32(i + 1), UserId: c.UserID, Value: c.Value, Exact: c.Short == 0})
	}
	if to < len(b.Senders) {
		next = contributorsToken(b.Senders[to-1].Value, b.Senders[to-1].UserID)
	}
	return out, next, b.Floor
}

// Contributors is the whole of a period's ranking as of today, in order:
// for tests and tools.
func Contributors(s State, period, today string) []Leader {
	b := s.x().Ranks.board(period, today)
	out := make([]Leader, len(b.Senders))
	for i, c := range b.Senders {
		out[i] = Leader{UserID: c.UserID, Value: c.Value}
	}
	return out
}

// RankFloor is the period's floor as of today (see Board.Floor).
func RankFloor(s State, period, today string) int64 {
	return s.x().Ranks.board(period, today).Floor
}
