//go:build !race

// Two cluster members in one process (see multimember_test.go for why
// this file is built only without -race).

package roomfeed

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	grainkind "github.com/hyapp/roomcell/cluster/kind"

	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"
	"google.golang.org/protobuf/proto"

	"github.com/hyapp/roomcell/actors/roomgrain"
	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/cluster"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence/memdb"
)

// startTwoMembers starts two members on store that see each other (the
// caller stops them).
func startTwoMembers(t *testing.T, store *memdb.Store) (a, b *cluster.Member) {
	t.Helper()
	agent := test.NewInMemAgent()
	cfg := configs.Default()
	cfg.Cluster.Port = 0
	start := func() *cluster.Member {
		deps := roomgrain.Deps{Store: store, Gifts: roomgrain.FreeGifts(5), Config: cfg.Room,
			Observers: []roomgrain.NewObserver{New(Config{StoreTimeout: cfg.Room.StoreTimeout}).Observe()}}
		m, err := cluster.Start(cluster.Options{Config: cfg.Cluster, Kinds: []*pcluster.Kind{grainkind.New(roomgrain.Kind, roomgrain.GrainProps(deps))}, Agent: agent,
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	a, b = start(), start()
	deadline := time.Now().Add(30 * time.Second)
	for a.Cluster.MemberList.Length() < 2 || b.Cluster.MemberList.Length() < 2 {
		if time.Now().After(deadline) {
			a.Stop(false)
			b.Stop(false)
			t.Fatal("members did not see each other")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return a, b
}

// The events' encodings reach only a caller on the owner's node (they
// are no message); a caller on another node gets the same events
// without them, from the tail and from the store alike.
func TestMultiMemberListEventsEncodingsStayOnTheOwnersNode(t *testing.T) {
	store := memdb.New()
	a, b := startTwoMembers(t, store)
	defer b.Stop(false)
	defer a.Stop(false)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ca := Client{&roomgrain.Client{Cluster: a.Cluster, AttemptTimeout: 5 * time.Second}}
	cb := Client{&roomgrain.Client{Cluster: b.Cluster, AttemptTimeout: 5 * time.Second}}
	nb := &eventsNode{store: store, member: b, client: cb}
	roomID := ""
	for i := range 40 {
		id := fmt.Sprint("m", i)
		nb.do(t, createCmd(id, "c0"))
		if pid := b.Cluster.Get("app/"+id, roomgrain.Kind); pid != nil && pid.Address == a.Cluster.ActorSystem.Address() {
			roomID = id
			break
		}
	}
	if roomID == "" {
		t.Fatal("no room placed on member a")
	}
	for i := range 40 {
		if i%2 == 0 {
			nb.do(t, joinCmd(roomID, fmt.Sprint("c", i+1), "bob"))
		} else {
			nb.do(t, leaveCmd(roomID, fmt.Sprint("c", i+1), "bob"))
		}
	}
	// after 0: the store's read (the tail starts at the head); after 30:
	// the tail, grown back over the first read.
	for _, after := range []int64{0, 30, 0, 30} {
		req := &v1.ListRoomEventsRequest{AppCode: "app", RoomId: roomID, AfterRoomSeq: after, Limit: 20}
		local, err := ca.ListEventsPage(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		remote, err := cb.ListEventsPage(ctx, req)
		if err != nil {
			t.Fatalf("after %d from the other node: %v", after, err)
		}
		if len(local.Reply.Events) == 0 || !proto.Equal(local.Reply, remote.Reply) {
			t.Fatalf("after %d: %d events on the owner's node, another answer (%d events) on the other", after, len(local.Reply.Events), len(remote.Reply.Events))
		}
		if remote.Wire != nil {
			t.Fatalf("after %d: encodings crossed to another node", after)
		}
		if len(local.Wire) != len(local.Reply.Events) {
			t.Fatalf("after %d: %d encodings for %d events on the owner's node", after, len(local.Wire), len(local.Reply.Events))
		}
		for i, e := range local.Reply.Events {
			if w, _ := proto.Marshal(e); !bytes.Equal(w, local.Wire[i]) {
				t.Fatalf("after %d: event %s with another encoding", after, e.EventId)
			}
		}
	}
}
