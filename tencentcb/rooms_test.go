package tencentcb

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/room"
)

// memRooms is the rooms of a cluster as the endpoint sees them: one
// owner per room deciding commands one at a time, deduplicated by
// command_id (and refusing a reused id with another request), as the
// grain does. Handlers of several "nodes" share one memRooms.
type memRooms struct {
	mu     sync.Mutex
	nowMs  int64
	states map[string]room.State
	ids    map[string]map[string]string // room -> command id -> request hash
	log    map[string][]room.Event
	calls  atomic.Int64
	fail   atomic.Int64 // the next n calls answer Unavailable
}

func newMemRooms(nowMs int64) *memRooms {
	return &memRooms{nowMs: nowMs, states: map[string]room.State{}, ids: map[string]map[string]string{}, log: map[string][]room.Event{}}
}

func (m *memRooms) Execute(_ context.Context, rc *v1.RoomCommand) (*v1.CommandReply, error) {
	m.calls.Add(1)
	if m.fail.Load() > 0 && m.fail.Add(-1) >= 0 {
		return nil, errclass.Errorf(errclass.Unavailable, "owner down")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cmd, ok := room.CommandFromProto(rc, m.nowMs)
	if !ok {
		return nil, errclass.Invalidf("unknown command")
	}
	return m.exec(cmd, rc)
}

func (m *memRooms) exec(cmd room.Command, rc *v1.RoomCommand) (*v1.CommandReply, error) {
	key := cmd.AppCode + "/" + cmd.RoomID
	hash := cmd.Type + fmt.Sprint(cmd)
	if rc != nil {
		hash, _ = room.RequestHash(rc)
	}
	if m.ids[key] == nil {
		m.ids[key] = map[string]string{}
	}
	if !room.Mutates(cmd.Type) { // Heartbeat: a check, nothing written
		if _, err := room.Decide(m.states[key], cmd); err != nil {
			return nil, err
		}
		return &v1.CommandReply{Room: room.Summary(m.states[key])}, nil
	}
	if h, seen := m.ids[key][cmd.CommandID]; seen {
		if h != hash {
			return nil, errclass.Errorf(errclass.Exists, "command_id %q reused for another request", cmd.CommandID)
		}
		return &v1.CommandReply{Duplicate: true}, nil
	}
	s := m.states[key]
	if !s.Exists {
		s = room.NewState(cmd.AppCode, cmd.RoomID)
	}
	evs, err := room.Decide(s, cmd)
	if err != nil {
		return nil, err
	}
	m.ids[key][cmd.CommandID] = hash
	m.states[key] = room.ApplyCommand(s, s.Seq+1, evs)
	m.log[key] = append(m.log[key], evs...)
	reply := &v1.CommandReply{RoomSeq: s.Seq + 1}
	for _, e := range evs {
		b, _ := json.Marshal(e)
		reply.Events = append(reply.Events, &v1.RoomEvent{EventType: e.EventType(), Payload: string(b)})
	}
	return reply, nil
}

// do runs a command of the test's own (setup, expiry) directly.
func (m *memRooms) do(c room.Command) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, err := m.exec(c, nil)
	return err
}

func (m *memRooms) state(app, roomID string) room.State {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.states[app+"/"+roomID]
}

func (m *memRooms) events(app, roomID string) []room.Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]room.Event(nil), m.log[app+"/"+roomID]...)
}
