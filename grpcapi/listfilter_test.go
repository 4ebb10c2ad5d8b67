package grpcapi

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
)

// metaDirectory: 300 rooms ranked by heat (r000 hottest). Every third is
// "music", the rest "talk"; every tenth is unlisted; owners o0..o4 in turn.
func metaDirectory(t *testing.T) *memdb.Directory {
	t.Helper()
	d := memdb.NewDirectory(memdb.DirectoryOptions{})
	for i := range 300 {
		m := &persistence.RoomMeta{Category: "talk", Tags: []string{"t"}, CoverURL: "https://cdn/x.png"}
		if i%3 == 0 {
			m.Category = "music"
		}
		if i%10 == 0 {
			m.Visibility = "unlisted"
		}
		if _, err := d.UpdateRoom(context.Background(), persistence.RoomEntry{AppCode: "app1", RoomID: fmt.Sprintf("r%03d", i),
			Name: "n", OwnerUserID: fmt.Sprintf("o%d", i%5), Heat: int64(10_000 - i), Meta: m}); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// listAll pages through a filtered listing and returns the room ids.
func listAll(t *testing.T, c roomcellv1.RoomServiceClient, req *roomcellv1.ListRoomsRequest) (ids []string, pages int) {
	t.Helper()
	for {
		r, err := c.ListRooms(testCtx(t), req)
		if err != nil {
			t.Fatal(err)
		}
		var lastRank int64
		for _, l := range r.Rooms {
			if l.Rank <= lastRank {
				t.Fatalf("page out of heat order: rank %d after %d", l.Rank, lastRank)
			}
			lastRank = l.Rank
			ids = append(ids, l.RoomId)
		}
		pages++
		if req.PageToken = r.NextPageToken; req.PageToken == "" || pages > 100 {
			return ids, pages
		}
	}
}

// Filters by category, visibility and owner: every page in heat order,
// every match exactly once across the pages, no unlisted room in an
// app-wide list, an owner's list with its unlisted rooms on "all".
func TestListRoomsFilters(t *testing.T) {
	c := startDirServer(t, metaDirectory(t))
	want := func(keep func(i int) bool) []string {
		var out []string
		for i := range 300 {
			if keep(i) {
				out = append(out, fmt.Sprintf("r%03d", i))
			}
		}
		return out
	}
	for _, tc := range []struct {
		name string
		req  *roomcellv1.ListRoomsRequest
		keep func(i int) bool
	}{
		{"app list hides unlisted", &roomcellv1.ListRoomsRequest{PageSize: 50}, func(i int) bool { return i%10 != 0 }},
		{"category", &roomcellv1.ListRoomsRequest{Category: "music", PageSize: 7}, func(i int) bool { return i%3 == 0 && i%10 != 0 }},
		{"owner, public", &roomcellv1.ListRoomsRequest{OwnerUserId: "o2", PageSize: 5}, func(i int) bool { return i%5 == 2 && i%10 != 0 }},
		{"owner, all", &roomcellv1.ListRoomsRequest{OwnerUserId: "o0", Visibility: "all", PageSize: 5}, func(i int) bool { return i%5 == 0 }},
		{"owner, unlisted", &roomcellv1.ListRoomsRequest{OwnerUserId: "o0", Visibility: "unlisted", PageSize: 100}, func(i int) bool { return i%10 == 0 }},
		{"owner and category", &roomcellv1.ListRoomsRequest{OwnerUserId: "o1", Category: "talk", PageSize: 3}, func(i int) bool { return i%5 == 1 && i%3 != 0 && i%10 != 0 }},
		{"nothing matches", &roomcellv1.ListRoomsRequest{Category: "none", PageSize: 10}, func(int) bool { return false }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.AppCode = "app1"
			got, pages := listAll(t, c, tc.req)
			if w := want(tc.keep); fmt.Sprint(got) != fmt.Sprint(w) {
				t.Fatalf("%d rooms in %d pages:\n got  %v\n want %v", len(got), pages, got, w)
			}
		})
	}
	r, err := c.ListRooms(testCtx(t), &roomcellv1.ListRoomsRequest{AppCode: "app1", Category: "music", PageSize: 1})
	if err != nil || len(r.Rooms) != 1 || r.Rooms[0].Category != "music" || r.Rooms[0].CoverUrl != "https://cdn/x.png" ||
		r.Rooms[0].Visibility != "public" || len(r.Rooms[0].Tags) != 1 || r.Total != 300 {
		t.Fatalf("listing %v, %v", r, err)
	}
	for _, bad := range []*roomcellv1.ListRoomsRequest{
		{AppCode: "app1", Visibility: "unlisted"}, {AppCode: "app1", Visibility: "all"}, {AppCode: "app1", Visibility: "secret", OwnerUserId: "o"},
		{AppCode: "app1", Category: "a b"}, {AppCode: "app1", OwnerUserId: "a/b"},
	} {
		if _, err := c.ListRooms(testCtx(t), bad); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%v: %v, want InvalidArgument", bad, err)
		}
	}
}

// A filter few rooms match costs a bounded scan: a short page with a
// token where the scan stopped, and the next pages find the rest.
func TestListRoomsScanIsBounded(t *testing.T) {
	d := memdb.NewDirectory(memdb.DirectoryOptions{})
	for i := range 2500 {
		var m *persistence.RoomMeta
		if i == 2400 {
			m = &persistence.RoomMeta{Category: "rare"}
		}
		if _, err := d.UpdateRoom(context.Background(), persistence.RoomEntry{AppCode: "app1", RoomID: fmt.Sprintf("r%04d", i),
			OwnerUserID: "o", Heat: int64(10_000 - i), Meta: m}); err != nil {
			t.Fatal(err)
		}
	}
	c := startDirServer(t, d)
	r, err := c.ListRooms(testCtx(t), &roomcellv1.ListRoomsRequest{AppCode: "app1", Category: "rare", PageSize: 10})
	if err != nil || len(r.Rooms) != 0 || r.NextPageToken == "" {
		t.Fatalf("first page %v, %v: want empty with a token (scan of %d)", r, err, MaxRoomsScan)
	}
	got, pages := listAll(t, c, &roomcellv1.ListRoomsRequest{AppCode: "app1", Category: "rare", PageSize: 10})
	if fmt.Sprint(got) != "[r2400]" || pages != 3 {
		t.Fatalf("found %v in %d pages, want [r2400] in 3", got, pages)
	}
}

// On a server with tokens, the caller's identity decides who sees an
// unlisted room: a client sees the unlisted rooms of the user it names
// in x-user-id only; an
// operator token sees any owner's, and lists the whole app with
// visibility "all" and no owner; a client cannot.
func TestUnlistedRoomsByCallerIdentity(t *testing.T) {
	rs := NewRoomServer(&fakeBackend{}, discardLogger(), 0)
	rs.SetDirectory(metaDirectory(t))
	c := roomcellv1.NewRoomServiceClient(serveRoomServer(t,
		Options{Logger: discardLogger(), ClientTokens: []string{clientTok}, OperatorTokens: []string{operatorTok}}, rs))
	as := func(token, user string) context.Context {
		md := []string{"authorization", "Bearer " + token}
		if user != "" {
			md = append(md, UserIDHeader, user)
		}
		return metadata.AppendToOutgoingContext(testCtx(t), md...)
	}
	count := func(ctx context.Context, req *roomcellv1.ListRoomsRequest) (rooms, unlisted int, err error) {
		req.AppCode, req.PageSize = "app1", 100
		for {
			r, err := c.ListRooms(ctx, req)
			if err != nil {
				return 0, 0, err
			}
			for _, l := range r.Rooms {
				rooms++
				if l.Visibility == "unlisted" {
					unlisted++
				}
			}
			if req.PageToken = r.NextPageToken; req.PageToken == "" {
				return rooms, unlisted, nil
			}
		}
	}
	for _, tc := range []struct {
		name              string
		ctx               context.Context
		req               *roomcellv1.ListRoomsRequest
		code              codes.Code
		rooms, unlistedOf int
	}{
		{"client, app list", as(clientTok, "o3"), &roomcellv1.ListRoomsRequest{}, codes.OK, 270, 0},
		{"client naming no user, an owner's unlisted", as(clientTok, ""), &roomcellv1.ListRoomsRequest{OwnerUserId: "o0", Visibility: "all"}, codes.PermissionDenied, 0, 0},
		{"client as another user", as(clientTok, "o1"), &roomcellv1.ListRoomsRequest{OwnerUserId: "o0", Visibility: "unlisted"}, codes.PermissionDenied, 0, 0},
		{"client as the owner", as(clientTok, "o0"), &roomcellv1.ListRoomsRequest{OwnerUserId: "o0", Visibility: "all"}, codes.OK, 60, 30},
		{"client, the whole app", as(clientTok, "o0"), &roomcellv1.ListRoomsRequest{Visibility: "all"}, codes.InvalidArgument, 0, 0},
		{"operator, an owner's unlisted", as(operatorTok, ""), &roomcellv1.ListRoomsRequest{OwnerUserId: "o0", Visibility: "unlisted"}, codes.OK, 30, 30},
		{"operator, the whole app", as(operatorTok, ""), &roomcellv1.ListRoomsRequest{Visibility: "all"}, codes.OK, 300, 30},
	} {
		rooms, unlisted, err := count(tc.ctx, tc.req)
		if status.Code(err) != tc.code || rooms != tc.rooms || unlisted != tc.unlistedOf {
			t.Errorf("%s: %d rooms, %d unlisted, %v; want %s, %d and %d", tc.name, rooms, unlisted, err, tc.code, tc.rooms, tc.unlistedOf)
		}
	}
}
