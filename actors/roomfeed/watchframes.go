package roomfeed

import (
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// A watch stream's message is WatchRoomReply{room_seq, events}. Every
// watcher of a room on a node sends the same events, so the feed frames
// each commit's events once, as the reply's events field (tag, length,
// encoding per event) in its arena, where consecutive commits lie one
// after another: a watcher's message is then its seq and one or two
// slices of the arena, written by gRPC as they are. Before, each
// watcher copied its batch's encodings into a message of its own (a
// 40 KB allocation and copy per message, and its garbage).

// Frames is one message of a framed watch (WatchFrames): Events is the
// message's events field as proto.Marshal writes it for the reply's
// events, in pieces to be written one after another (shared: never
// changed); Count is how many events they hold.
type Frames struct {
	RoomSeq int64
	Events  [][]byte
	Count   int
}

// eventsField is WatchRoomReply's events field number
// (api/roomcellv1/room.proto).
const eventsField protowire.Number = 2

// arenaSize is the size of a feed's arena chunk: a hot room's ~0.5 s.
const arenaSize = 256 << 10

// frameArena is a chunk a feed writes its items' frames into, one after
// another, under the feed's lock; nothing written is ever changed, and a
// frame that does not fit starts a new chunk (the old one lives while
// items or messages hold it).
type frameArena struct{ b []byte }

// frame writes the events field of wire into the feed's arena: the chunk,
// where the frame starts and the frame (its capacity runs on to the end
// of the chunk, so consecutive frames join into one slice). Under f.mu.
func (f *feed) frame(wire [][]byte) (*frameArena, int, []byte) {
	size := frameSize(wire)
	a := f.arena
	if a == nil || cap(a.b)-len(a.b) < size {
		a = &frameArena{b: make([]byte, 0, max(arenaSize, size))}
		f.arena = a
	}
	from := len(a.b)
	a.b = appendFrame(a.b, wire)
	return a, from, a.b[from:len(a.b):cap(a.b)]
}

// frameOf is the events field of wire in a buffer of its own (a page
// read to fill a gap: not the feed's).
func frameOf(wire [][]byte) []byte { return appendFrame(make([]byte, 0, frameSize(wire)), wire) }

// frameSize is the size of the events field of wire.
func frameSize(wire [][]byte) int {
	size := 0
	for _, w := range wire {
		size += protowire.SizeTag(eventsField) + protowire.SizeBytes(len(w))
	}
	return size
}

// appendFrame appends the events field of wire (tag, length, encoding
// per event) to b.
func appendFrame(b []byte, wire [][]byte) []byte {
	for _, w := range wire {
		b = protowire.AppendTag(b, eventsField, protowire.BytesType)
		b = protowire.AppendBytes(b, w)
	}
	return b
}

// piece is a run of a framed batch: b, ending at to in arena a (nil: a
// buffer of its own, joined to nothing).
type piece struct {
	a  *frameArena
	to int
	b  []byte
}

// clock is a monotonic time in nanoseconds, never 0 (0: no send).
var clockBase = time.Now()

func clock() int64 { return int64(time.Since(clockBase)) + 1 }
