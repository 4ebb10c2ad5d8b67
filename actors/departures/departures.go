// Package departures remembers, for the rooms of a node, the users they
// removed lately, and explains a command refused because its user is no
// longer a member with when and why the user went (who kicked them, the
// ban's end), as text and as the error's metadata. It is an observer of
// each room (roomgrain.Observer and Explainer), wired by cmd/roomcell:
// the grain never imports it.
package departures

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hyapp/roomcell/actors/roomgrain"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/room"
)

// maxDepartures bounds the removals a node remembers (about 100 bytes
// each): the oldest is forgotten first, and a forgotten one only costs
// the explanation, never a decision.
const maxDepartures = 1 << 15

// departure is why and when a user stopped being a member of a room.
type departure struct {
	reason     string // room.Reason*: left, heartbeat_timeout, switched_room, kicked
	atMs       int64
	operator   string // kicked: who
	note       string // kicked: the operator's reason
	banUntilMs int64  // kicked with a ban
	gen        uint64
}

// departures remembers, for the rooms of this node, the users removed
// lately, so a command refused because its user is no longer a member
// says when and why (a heartbeat timeout is otherwise a mystery to the
// client). Node-wide and bounded rather than in the room state: the
// events carry no time, and the grain is at its size class. A room that
// moves to another node starts without its departures: the refusal is
// the same, only its explanation is shorter.
type departures struct {
	mu   sync.Mutex
	m    map[string]departure // identity + "\x00" + user
	ring []ringSlot
	next int
	gen  uint64
}

type ringSlot struct {
	key string
	gen uint64
}

func newDepartures() *departures {
	return &departures{m: map[string]departure{}, ring: make([]ringSlot, maxDepartures)}
}

// Observe makes the observer of the node's rooms that remembers their
// removals (one memory for the node, made here: call it once per node)
// and explains a not-member refusal with them. The node's wiring lists
// it in roomgrain.Deps.Observers.
func Observe() roomgrain.NewObserver {
	d := newDepartures()
	return func(a roomgrain.Activation) roomgrain.Observer { return departuresObserver{d: d, room: a.Room} }
}

// departuresObserver is one room's view of the node's departures.
type departuresObserver struct {
	d    *departures
	room roomgrain.Room
}

func (o departuresObserver) Committed(cmd room.Command, events []room.Event) {
	o.d.committed(o.room.Identity(), cmd.NowMs, events)
}

func (o departuresObserver) Explain(cmd room.Command, err error) error {
	return o.d.explain(o.room.Identity(), *o.room.State(), cmd.UserID, cmd.NowMs, err)
}

func (departuresObserver) Loaded()                  {}
func (departuresObserver) Check(room.Command) error { return nil }
func (departuresObserver) Passed(room.Command)      {}
func (departuresObserver) Applying([]room.Event)    {}
func (departuresObserver) Tick()                    {}
func (departuresObserver) Passivating()             {}
func (departuresObserver) Stopped()                 {}

func departKey(identity, user string) string { return identity + "\x00" + user }

// committed notes the membership changes of a stored command's events,
// decided at nowMs: a leave or kick is remembered, a join forgets.
func (d *departures) committed(identity string, nowMs int64, events []room.Event) {
	if d == nil {
		return
	}
	for _, e := range events {
		switch ev := e.(type) {
		case room.RoomUserLeft:
			d.add(departKey(identity, ev.UserID), departure{reason: ev.Reason, atMs: nowMs})
		case *room.RoomUserLeft:
			d.add(departKey(identity, ev.UserID), departure{reason: ev.Reason, atMs: nowMs})
		case room.RoomUserKicked:
			d.add(departKey(identity, ev.TargetUserID), departure{reason: room.ReasonKicked, atMs: nowMs,
				operator: ev.OperatorUserID, note: ev.Reason, banUntilMs: ev.BanUntilMs})
		case *room.RoomUserKicked:
			d.add(departKey(identity, ev.TargetUserID), departure{reason: room.ReasonKicked, atMs: nowMs,
				operator: ev.OperatorUserID, note: ev.Reason, banUntilMs: ev.BanUntilMs})
		case room.RoomUserJoined:
			d.forget(departKey(identity, ev.UserID))
		case *room.RoomUserJoined:
			d.forget(departKey(identity, ev.UserID))
		}
	}
}

func (d *departures) add(key string, dep departure) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.gen++
	dep.gen = d.gen
	if old := d.ring[d.next]; old.key != "" {
		if cur, ok := d.m[old.key]; ok && cur.gen == old.gen {
			delete(d.m, old.key)
		}
	}
	d.ring[d.next] = ringSlot{key: key, gen: dep.gen}
	d.next = (d.next + 1) % len(d.ring)
	d.m[key] = dep
}

func (d *departures) forget(key string) {
	d.mu.Lock()
	delete(d.m, key)
	d.mu.Unlock()
}

func (d *departures) get(identity, user string) (departure, bool) {
	if d == nil || user == "" {
		return departure{}, false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	dep, ok := d.m[departKey(identity, user)]
	return dep, ok
}

// removedError is ErrNotMember with when and why the user was removed:
// errors.Is and the error code are ErrNotMember's.
type removedError struct {
	err  error
	text string
}

func (e *removedError) Error() string { return e.text }
func (e *removedError) Unwrap() error { return e.err }

// explain adds when and why to a refusal for not being a member, when
// the user was removed from this room lately (and is not back).
func (d *departures) explain(identity string, s room.State, user string, nowMs int64, err error) error {
	if err == nil || !errors.Is(err, room.ErrNotMember) {
		return err
	}
	if _, member := s.Members[user]; member {
		return err // the rule is about someone else (a target)
	}
	dep, ok := d.get(identity, user)
	if !ok {
		return err
	}
	at := time.UnixMilli(dep.atMs).UTC()
	ago := time.Duration(max(0, nowMs-dep.atMs)) * time.Millisecond
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s was removed at %s (%s ago): ", err.Error(), user, at.Format(time.RFC3339), ago.Round(time.Second))
	switch dep.reason {
	case room.ReasonHeartbeatTimeout:
		b.WriteString("heartbeat_timeout (not seen within presence.stale_after: no Heartbeat, or offline at the presence source)")
	case room.ReasonSwitchedRoom:
		b.WriteString("switched_room (the user joined another room)")
	case room.ReasonKicked:
		fmt.Fprintf(&b, "kicked by %s", dep.operator)
		if dep.note != "" {
			fmt.Fprintf(&b, " (%s)", dep.note)
		}
		if dep.banUntilMs > nowMs {
			fmt.Fprintf(&b, ", banned until %s", time.UnixMilli(dep.banUntilMs).UTC().Format(time.RFC3339))
		}
	case room.ReasonLeft:
		b.WriteString("left (the user's LeaveRoom)")
	default:
		b.WriteString(dep.reason)
	}
	if dep.banUntilMs <= nowMs {
		b.WriteString("; JoinRoom to come back")
	}
	return errclass.WithMeta(&removedError{err: err, text: b.String()}, dep.meta(nowMs))
}

// meta is the departure as the refusal's ErrorInfo metadata (NOT_MEMBER's
// keys in errclass/errors.json): the facts a client branches on, apart
// from the text written for people.
func (dep departure) meta(nowMs int64) map[string]string {
	m := map[string]string{
		"removed_reason": dep.reason,
		"removed_at":     time.UnixMilli(dep.atMs).UTC().Format(time.RFC3339Nano),
	}
	if dep.operator != "" {
		m["removed_by"] = dep.operator
	}
	if dep.note != "" {
		m["removed_note"] = dep.note
	}
	if dep.banUntilMs > nowMs {
		m["ban_until"] = time.UnixMilli(dep.banUntilMs).UTC().Format(time.RFC3339Nano)
	}
	return m
}
