package grpcapi

import (
	"context"
	"fmt"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
)

// startDirServer serves a RoomServer reading dir (nil: no directory).
func startDirServer(t *testing.T, dir DirectoryReader) roomcellv1.RoomServiceClient {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv, _ := NewServer(Options{Logger: discardLogger()})
	rs := NewRoomServer(&fakeBackend{}, discardLogger(), 0)
	if dir != nil {
		rs.SetDirectory(dir)
	}
	roomcellv1.RegisterRoomServiceServer(srv, rs)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return roomcellv1.NewRoomServiceClient(conn)
}

func seededDirectory(t *testing.T) *memdb.Directory {
	t.Helper()
	d := memdb.NewDirectory(memdb.DirectoryOptions{})
	ctx := context.Background()
	for i := range 5 {
		if _, err := d.UpdateRoom(ctx, persistence.RoomEntry{AppCode: "app1", RoomID: fmt.Sprintf("r%d", i), Name: fmt.Sprintf("Room %d", i),
			OwnerUserID: "o", MemberCount: int64(i + 1), Heat: int64(100 * (5 - i)), UpdatedAtMs: 42}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.SetUserRoom(ctx, persistence.RoomKey{AppCode: "app1", RoomID: "r3"}, "bob", 1000); err != nil {
		t.Fatal(err)
	}
	if err := d.Heartbeat(ctx, persistence.RoomKey{AppCode: "app1", RoomID: "r3"}, "bob", 1500); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestListRoomsPagesByHeat(t *testing.T) {
	c := startDirServer(t, seededDirectory(t))
	ctx := testCtx(t)
	var got []string
	token := ""
	for pages := 0; ; pages++ {
		r, err := c.ListRooms(ctx, &roomcellv1.ListRoomsRequest{AppCode: "app1", PageSize: 2, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		if r.Total != 5 {
			t.Fatalf("total %d, want 5", r.Total)
		}
		for _, l := range r.Rooms {
			if l.Rank != int64(len(got)+1) || l.AppCode != "app1" || l.UpdatedAtMs != 42 {
				t.Fatalf("listing %+v at position %d", l, len(got)+1)
			}
			got = append(got, fmt.Sprintf("%s:%d:%d", l.RoomId, l.Heat, l.MemberCount))
		}
		if token = r.NextPageToken; token == "" {
			break
		}
		if pages > 5 {
			t.Fatal("paging does not end")
		}
	}
	want := "[r0:500:1 r1:400:2 r2:300:3 r3:200:4 r4:100:5]"
	if fmt.Sprint(got) != want {
		t.Fatalf("rooms %v, want %s", got, want)
	}
	// Default page size, and an app with no rooms.
	r, err := c.ListRooms(ctx, &roomcellv1.ListRoomsRequest{AppCode: "app1"})
	if err != nil || len(r.Rooms) != 5 || r.NextPageToken != "" {
		t.Fatalf("default page: %v %v", r, err)
	}
	r, err = c.ListRooms(ctx, &roomcellv1.ListRoomsRequest{AppCode: "nobody"})
	if err != nil || len(r.Rooms) != 0 || r.Total != 0 {
		t.Fatalf("empty app: %v %v", r, err)
	}
}

func TestGetUserRoom(t *testing.T) {
	c := startDirServer(t, seededDirectory(t))
	ctx := testCtx(t)
	r, err := c.GetUserRoom(ctx, &roomcellv1.GetUserRoomRequest{AppCode: "app1", UserId: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	if r.RoomId != "r3" || r.JoinedAtMs != 1000 || r.LastSeenMs != 1500 || !r.Online || r.UserId != "bob" || r.AppCode != "app1" {
		t.Fatalf("reply %+v", r)
	}
	_, err = c.GetUserRoom(ctx, &roomcellv1.GetUserRoomRequest{AppCode: "app1", UserId: "nobody"})
	if st := status.Convert(err); st.Code() != codes.NotFound || st.Message() != "user nobody is in no room of app app1" {
		t.Fatalf("unknown user: %v", err)
	}
}

func TestDirectoryRPCValidationAndOutages(t *testing.T) {
	dir := seededDirectory(t)
	c := startDirServer(t, dir)
	ctx := testCtx(t)
	for _, tc := range []struct {
		name string
		call func() error
		msg  string
	}{
		{"no app", func() error { _, err := c.ListRooms(ctx, &roomcellv1.ListRoomsRequest{}); return err }, "app_code is required"},
		{"page too big", func() error {
			_, err := c.ListRooms(ctx, &roomcellv1.ListRoomsRequest{AppCode: "a", PageSize: 101})
			return err
		}, "page_size must be between 0 (default 20) and 100, got 101"},
		{"bad token", func() error {
			_, err := c.ListRooms(ctx, &roomcellv1.ListRoomsRequest{AppCode: "a", PageToken: "-3"})
			return err
		}, "page_token is not one this server returned"},
		{"no user", func() error {
			_, err := c.GetUserRoom(ctx, &roomcellv1.GetUserRoomRequest{AppCode: "a"})
			return err
		}, "user_id is required"},
		{"user with a colon", func() error {
			_, err := c.GetUserRoom(ctx, &roomcellv1.GetUserRoomRequest{AppCode: "a", UserId: "b:ad"})
			return err
		}, "user_id has a character that is not allowed at byte 1 (printable ASCII without space, ':' or '/')"},
	} {
		st := status.Convert(tc.call())
		if st.Code() != codes.InvalidArgument || st.Message() != tc.msg {
			t.Errorf("%s: %v %q, want InvalidArgument %q", tc.name, st.Code(), st.Message(), tc.msg)
		}
	}
	// A directory that is down answers Unavailable without its detail.
	_ = dir.Close()
	_, err := c.GetUserRoom(ctx, &roomcellv1.GetUserRoomRequest{AppCode: "app1", UserId: "bob"})
	if st := status.Convert(err); st.Code() != codes.Unavailable || st.Message() != unavailableMsg {
		t.Fatalf("directory down: %v", err)
	}
	_, err = c.ListRooms(ctx, &roomcellv1.ListRoomsRequest{AppCode: "app1"})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("directory down: %v", err)
	}
	// Without a directory both are Unimplemented.
	bare := startDirServer(t, nil)
	if _, err := bare.ListRooms(ctx, &roomcellv1.ListRoomsRequest{AppCode: "app1"}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("no directory: %v", err)
	}
	if _, err := bare.GetUserRoom(ctx, &roomcellv1.GetUserRoomRequest{AppCode: "app1", UserId: "bob"}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("no directory: %v", err)
	}
}
