package roomgrain

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/room"

	"github.com/asynkron/protoactor-go/actor"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
)

func rcPage(size int32, token string) *v1.RoomCommand {
	return &v1.RoomCommand{Command: &v1.RoomCommand_GetRoom{GetRoom: &v1.GetRoomRequest{
		AppCode: "app", RoomId: "r1", PageSize: size, PageToken: token}}}
}

func rcKick(cmdID, owner, target string) *v1.RoomCommand {
	return &v1.RoomCommand{Command: &v1.RoomCommand_KickUser{KickUser: &v1.KickUserRequest{
		CommandId: cmdID, AppCode: "app", RoomId: "r1", UserId: owner, TargetUserId: target}}}
}

// allPages reads every members page of size and checks each page's
// summary against the member count.
func (f *fixture) allPages(pid *actor.PID, size int32) []string {
	f.t.Helper()
	var all []string
	token := ""
	for range 10_000 {
		r := f.mustDo(pid, rcPage(size, token))
		if n := len(r.Room.Members); size > 0 && n > int(size) {
			f.t.Fatalf("page of size %d listed %d members", size, n)
		}
		all = append(all, r.Room.Members...)
		if token = r.NextPageToken; token == "" {
			return all
		}
	}
	f.t.Fatal("paging did not end")
	return nil
}

// GetRoom pages: sizes, tokens and their errors, and every member exactly
// once in order across pages.
func TestGetRoomPagesMembersInOrder(t *testing.T) {
	f := newFixture(t)
	pid := f.activate("app/r1")
	f.mustDo(pid, rcCreate("c", "owner"))
	want := []string{"owner"}
	for i := range 250 {
		u := fmt.Sprintf("u%03d", rand.N(1000)*1000+i) // random order of joins
		f.mustDo(pid, rcJoin("j"+u, u))
		want = append(want, u)
	}
	slices.Sort(want)

	first := f.mustDo(pid, rcGet())
	if !slices.Equal(first.Room.Members, want[:room.DefaultMembersPageSize]) || first.Room.MemberCount != 251 || first.NextPageToken == "" {
		t.Fatalf("default page: %d members (count %d, next %q), want the first %d of 251", len(first.Room.Members), first.Room.MemberCount, first.NextPageToken, room.DefaultMembersPageSize)
	}
	for _, size := range []int32{1, 7, 100, 250, 251, room.MaxMembersPageSize} {
		if got := f.allPages(pid, size); !slices.Equal(got, want) {
			t.Fatalf("pages of %d: %d members, want the %d in order", size, len(got), len(want))
		}
	}
	if r := f.mustDo(pid, rcPage(251, "")); r.NextPageToken != "" {
		t.Fatalf("a page holding every member names a next page %q", r.NextPageToken)
	}

	for _, tc := range []struct {
		name  string
		size  int32
		token string
	}{
		{"negative size", -1, ""},
		{"size over the max", room.MaxMembersPageSize + 1, ""},
		{"token not base64", 10, "%%%"},
		{"token of a bad id", 10, room.MembersToken("a b")},
		{"token of an empty id", 10, "="},
	} {
		_, err := f.do(pid, rcPage(tc.size, tc.token))
		if !errors.Is(err, errclass.Invalid) {
			t.Errorf("%s: got %v, want ErrInvalid", tc.name, err)
		}
		if err := room.CheckClientCommand(rcPage(tc.size, tc.token)); !errors.Is(err, errclass.Invalid) {
			t.Errorf("%s: client check got %v, want ErrInvalid", tc.name, err)
		}
	}
}

// The index GetRoom pages from follows joins, leaves, kicks and a reload
// while it is built: after random commands every page agrees with the
// state, read whole.
func TestGetRoomPagesFollowMemberChanges(t *testing.T) {
	f := newFixture(t)
	pid := f.activate("app/r1")
	f.mustDo(pid, rcCreate("c", "owner"))
	in := map[string]bool{"owner": true}
	for i := range 600 {
		u := fmt.Sprint("u", rand.N(60))
		switch op := rand.N(10); {
		case op < 5:
			f.mustDo(pid, rcJoin(fmt.Sprint("j", i), u))
			in[u] = true
		case op < 8 && in[u]:
			f.mustDo(pid, rcLeave(fmt.Sprint("l", i), u))
			delete(in, u)
		case op < 9 && in[u]:
			f.mustDo(pid, rcKick(fmt.Sprint("k", i), "owner", u))
			delete(in, u)
		case op == 9 && i%50 == 0:
			pid = f.activate("app/r1") // a new activation rebuilds it
		}
		if i%7 == 0 || i == 599 {
			want := make([]string, 0, len(in))
			for u := range in {
				want = append(want, u)
			}
			slices.Sort(want)
			if got := f.allPages(pid, int32(1+rand.N(20))); !slices.Equal(got, want) {
				t.Fatalf("after command %d pages list %v, want %v", i, got, want)
			}
		}
	}
}
