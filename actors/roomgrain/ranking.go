package roomgrain

import (
	"sync"
	"time"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/room"
)

// The contribution ranking's edge (room/ranking.go): the grain decides
// which day a gift counts for, in the node's room.ranking.zone, and
// answers ListContributors from the room's state.

// zones caches the loaded locations by name: an activation asks for its
// zone once, and a node has one.
var zones sync.Map // name -> *time.Location

// rankZone is the node's ranking zone (UTC when unset or unknown: the
// config's validation refuses an unknown one at start).
func (g *grain) rankZone() *time.Location {
	name := g.deps.Config.Ranking.Zone
	if name == "" || name == "UTC" {
		return time.UTC
	}
	if z, ok := zones.Load(name); ok {
		return z.(*time.Location)
	}
	z, err := time.LoadLocation(name)
	if err != nil {
		return time.UTC
	}
	zones.Store(name, z)
	return z
}

// rankDay is the ranking day of the instant nowMs.
func (g *grain) rankDay(nowMs int64) string {
	return time.UnixMilli(nowMs).In(g.rankZone()).Format(room.DayLayout)
}

// listContributors answers ListContributors: one page of a period's
// ranking, from the state (kept in ranking order).
func (g *grain) listContributors(r *v1.ListContributorsRequest) (*v1.CommandReply, error) {
	if !g.state.Exists {
		return nil, room.ErrRoomNotFound
	}
	q, err := room.ParseContributors(r)
	if err != nil {
		return nil, err
	}
	today := g.rankDay(g.deps.Clock().UnixMilli())
	k := rankKey{q: q, today: today}
	if kept := g.keptRanks(k); kept != nil {
		return kept, nil
	}
	page, next, floor := room.ContributorsPage(g.state, q, today)
	reply := &v1.CommandReply{RoomSeq: g.state.Seq, Contributors: page, NextPageToken: next, ContributorsFloor: floor}
	if q.Period == room.PeriodDay {
		reply.ContributorsDay = today
	}
	g.keepRanks(k, reply)
	return reply, nil
}
