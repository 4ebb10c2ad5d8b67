package roomfeed

import (
	"log/slog"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hyapp/roomcell/actors/roomgrain"
	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/room"
)

// Feed is a node's room feed: the tails of the rooms being read, the
// watch feeds subscribed to them and the log reads under way. The node's
// wiring makes one (New) and lists its Observe in the room grains'
// observers; the grain knows it only as an observer.
type Feed struct {
	// StoreTimeout bounds one log read (room.store_timeout).
	StoreTimeout time.Duration
	// Retention is retention.command_log: the tail serves nothing older.
	// Below a minute (the least the config allows): a minute.
	Retention time.Duration
	Logger    *slog.Logger

	watch watchRooms
	// reads bounds the log reads of each room database (eventReads), so
	// a database that hangs holds up only its own rooms' reads.
	readsMu sync.Mutex
	reads   map[roomgrain.CommandLog]chan struct{}
}

// Config is what a node's Feed is made of.
type Config struct {
	StoreTimeout time.Duration
	Retention    time.Duration
	Logger       *slog.Logger // nil: discarded
}

// New makes a node's feed.
func New(c Config) *Feed {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.StoreTimeout <= 0 {
		c.StoreTimeout = 5 * time.Second
	}
	return &Feed{StoreTimeout: c.StoreTimeout, Retention: c.Retention, Logger: c.Logger,
		watch: watchRooms{rooms: map[string]*roomFeeds{}}, reads: map[roomgrain.CommandLog]chan struct{}{}}
}

// slots is the read slots of store's database.
func (f *Feed) slots(store roomgrain.CommandLog) chan struct{} {
	f.readsMu.Lock()
	defer f.readsMu.Unlock()
	c := f.reads[store]
	if c == nil {
		c = make(chan struct{}, eventReads)
		f.reads[store] = c
	}
	return c
}

// Observe is the feed's observer of each room activation, for
// roomgrain.Deps.Observers.
func (f *Feed) Observe() roomgrain.NewObserver {
	return func(a roomgrain.Activation) roomgrain.Observer {
		return &observer{f: f, room: a.Room, self: a.Self, root: a.Root}
	}
}

// observer is one activation's view of the feed. Every call is on the
// room's goroutine.
type observer struct {
	f    *Feed
	room roomgrain.Room
	self *actor.PID
	root *actor.RootContext
}

// Receive answers the feed's messages: reads of the log, subscriptions,
// the tail's fills and the end of a subscribed feed.
func (o *observer) Receive(ctx actor.Context) bool {
	switch m := ctx.Message().(type) {
	case *v1.ListRoomEventsRequest:
		o.listEvents(ctx, m) // events.go
	case *tailFill:
		o.fillTail(m) // eventtail.go
	case *v1.RoomWatchSubscribe:
		ctx.Respond(o.watchSubscribe(ctx, m))
	case *actor.Terminated:
		o.watchTerminated(m.Who)
	default:
		return false
	}
	return true
}

// Recorded pushes a stored command's events to the room's feeds and its
// tail.
func (o *observer) Recorded(seq int64, envs []persistence.Envelope) { o.watchPush(seq, envs) }

// Loaded: a reload may have moved the state past commits the tail never
// saw.
func (o *observer) Loaded() { o.dropTail() }

// Stopped tells the feeds the activation ended; its tail goes with it.
func (o *observer) Stopped() { o.watchEnd() }

func (*observer) Check(room.Command) error             { return nil }
func (*observer) Passed(room.Command)                  {}
func (*observer) Applying([]room.Event)                {}
func (*observer) Committed(room.Command, []room.Event) {}
func (*observer) Tick()                                {}
func (*observer) Passivating()                         {}
