package roomfeed

import (
	"context"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hyapp/roomcell/actors/roomgrain"
	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/errclass"
)

// Client reads rooms' event logs and subscribes feeds at the rooms'
// owners, wherever the cluster placed them (through the room client).
type Client struct {
	*roomgrain.Client
}

// ListEvents reads the room's event log after r.after_room_seq from the
// room's owner (events.go). A read below the retained log fails with a
// *TrimmedError.
func (c Client) ListEvents(ctx context.Context, r *v1.ListRoomEventsRequest) (*v1.ListRoomEventsReply, error) {
	p, err := c.ListEventsPage(ctx, r)
	return p.Reply, err
}

// EventsPage is a ListRoomEvents reply and, when the owner is on this
// node and had them, its events' protobuf encodings: Wire[i] is what
// proto.Marshal answers for Reply.Events[i] (nil: none). Both are shared
// and never changed.
type EventsPage struct {
	Reply *v1.ListRoomEventsReply
	Wire  [][]byte
}

// ListEventsPage is ListEvents with the events' encodings.
func (c Client) ListEventsPage(ctx context.Context, r *v1.ListRoomEventsRequest) (EventsPage, error) {
	identity, err := roomgrain.Identity(r.GetAppCode(), r.GetRoomId())
	if err != nil {
		return EventsPage{}, err
	}
	var page EventsPage
	err = c.Call(ctx, identity, r, func(res any) error {
		var wire [][]byte
		if a, ok := res.(*eventsAnswer); ok {
			res, wire = a.res, a.wire
		}
		m, ok := res.(*v1.RoomEventsResponse)
		switch {
		case !ok:
			return fmt.Errorf("room grain answered %T", res)
		case m.Error != nil && (errclass.Code(m.Error.Code) == errclass.CodeRoomEventsTrimmed || m.Error.Class == ClassTrimmed):
			return &TrimmedError{After: r.GetAfterRoomSeq(), OldestAfterSeq: m.OldestAfterSeq, HeadSeq: m.HeadSeq}
		case m.Error != nil:
			return roomgrain.ErrorOf(m.Error)
		case m.Reply == nil:
			return fmt.Errorf("room grain answered neither events nor an error")
		}
		page = EventsPage{Reply: m.Reply, Wire: wire}
		return nil
	})
	return page, err
}

// subscribe asks the room's owner to push its events to a feed.
func (c Client) subscribe(ctx context.Context, identity string, feed *actor.PID) (*v1.RoomWatchAck, error) {
	var ack *v1.RoomWatchAck
	err := c.Call(ctx, identity, &v1.RoomWatchSubscribe{Address: feed.Address, Id: feed.Id}, func(res any) error {
		m, ok := res.(*v1.RoomWatchAck)
		switch {
		case !ok:
			return fmt.Errorf("room grain answered %T", res)
		case m.Error != nil:
			return roomgrain.ErrorOf(m.Error)
		}
		ack = m
		return nil
	})
	return ack, err
}
