package roomgrain

import (
	"github.com/asynkron/protoactor-go/actor"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/room"
)

// roomReads is what a grain keeps for its reads, made at its first
// GetRoom (a room nobody reads keeps none of it, and the grain its size
// class): the members in order for the pages, and the last answer to a
// first page.
//
// A room is read far more often than it changes, and a first page's
// answer (the room's details and up to a page of members) was built
// afresh for each read. It is kept with the seq of the state it was
// built from and answered again while the grain holds that seq: a commit
// moves the seq (and drops it), a reload drops the whole roomReads, so a
// kept answer is never older than the grain's own state. Replies are
// not changed once made (nothing after the grain writes to them), so
// callers may share one.
type roomReads struct {
	members room.MemberIndex

	first     *v1.CommandReply // nil: none kept
	firstSeq  int64            // the state's seq it was built from
	firstSize int              // its page size

	// ranks are the ranking pages answered at ranksSeq, by query and
	// ranking day (a page is a function of the state, the query and the
	// day), at most maxKeptRanks of them.
	ranks    map[rankKey]*v1.CommandReply
	ranksSeq int64
}

// rankKey is what a ranking page depends on besides the state.
type rankKey struct {
	q     room.ContributorsQuery
	today string
}

// maxKeptRanks bounds the ranking pages kept per room between commits:
// apps read the first pages of two periods, a reader paging further
// gets its pages built.
const maxKeptRanks = 8

// reads returns the grain's roomReads, made on first use.
func (g *grain) reads() *roomReads {
	if g.read == nil {
		g.read = &roomReads{}
	}
	return g.read
}

// getRoom answers GetRoom: the room with one page of its members.
func (g *grain) getRoom(ctx actor.Context, r *v1.GetRoomRequest) (*v1.CommandReply, error) {
	if !g.state.Exists {
		return nil, room.ErrRoomNotFound
	}
	p, err := room.ParseMembersPage(r)
	if err != nil {
		return nil, err
	}
	rd := g.reads()
	if p.After == "" && rd.first != nil && rd.firstSeq == g.state.Seq && rd.firstSize == p.Size {
		g.publishView(ctx, rd.first, p.Size)
		return rd.first, nil
	}
	v := room.Details(room.Summary(g.state), g.state)
	var next string
	v.Members, next = rd.members.Page(g.state, p)
	reply := &v1.CommandReply{RoomSeq: g.state.Seq, Room: v, NextPageToken: next}
	if p.After == "" {
		rd.first, rd.firstSeq, rd.firstSize = reply, g.state.Seq, p.Size
		g.publishView(ctx, reply, p.Size) // view.go: the next reads of this page skip the mailbox
	}
	return reply, nil
}

// readsApply follows a committed command: the member order in step, the
// kept answer dropped (its seq is behind now anyway).
func (g *grain) readsApply(events []room.Event) {
	g.dropView() // before the command is answered: view.go
	if g.read == nil {
		return
	}
	g.read.members.Apply(g.state, events)
	g.read.first = nil
	g.read.ranks = nil
}

// keptRanks returns the ranking page kept for k at the state's seq.
func (g *grain) keptRanks(k rankKey) *v1.CommandReply {
	rd := g.reads()
	if rd.ranksSeq != g.state.Seq {
		return nil
	}
	return rd.ranks[k]
}

// keepRanks keeps reply as the page for k at the state's seq, unless
// maxKeptRanks pages are kept already.
func (g *grain) keepRanks(k rankKey, reply *v1.CommandReply) {
	rd := g.reads()
	if rd.ranksSeq != g.state.Seq || rd.ranks == nil {
		rd.ranks, rd.ranksSeq = map[rankKey]*v1.CommandReply{}, g.state.Seq
	}
	if len(rd.ranks) < maxKeptRanks {
		rd.ranks[k] = reply
	}
}
