package grpcapi

import (
	"net/http"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/hyapp/roomcell/api/roomcellv1"
)

// The voice-room routes (gateway.yaml) reach their RPCs with the body's
// fields (a POST) or the query's (a GET), the request id added.
func TestGatewayVoiceRoutes(t *testing.T) {
	base, b := startGateway(t)
	cases := []struct {
		method, path, body string
		want               *roomcellv1.RoomCommand
	}{
		{"POST", "/api/v1/rooms/user/ban", `{"command_id":"b1","app_code":"app1","room_id":"r1","user_id":"u1","target_user_ids":["u2","u3"],"ban_seconds":60,"reason":"raid"}`,
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_BanUser{BanUser: &roomcellv1.BanUserRequest{
				CommandId: "b1", RequestId: "req-gw-1", AppCode: "app1", RoomId: "r1", UserId: "u1", TargetUserIds: []string{"u2", "u3"}, BanSeconds: 60, Reason: "raid"}}}},
		{"POST", "/api/v1/rooms/user/unban", `{"command_id":"b2","app_code":"app1","room_id":"r1","user_id":"u1","target_user_id":"u2"}`,
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_UnbanUser{UnbanUser: &roomcellv1.UnbanUserRequest{
				CommandId: "b2", RequestId: "req-gw-1", AppCode: "app1", RoomId: "r1", UserId: "u1", TargetUserId: "u2"}}}},
		{"POST", "/api/v1/rooms/seat/move", `{"command_id":"m1","app_code":"app1","room_id":"r1","user_id":"u1","target_user_id":"u2","seat":3,"policy":"swap"}`,
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_MoveSeat{MoveSeat: &roomcellv1.MoveSeatRequest{
				CommandId: "m1", RequestId: "req-gw-1", AppCode: "app1", RoomId: "r1", UserId: "u1", TargetUserId: "u2", Seat: 3, Policy: "swap"}}}},
		{"POST", "/api/v1/rooms/custom/set", `{"command_id":"i1","app_code":"app1","room_id":"r1","user_id":"u1","set":{"theme":"dark"},"delete_keys":["pin"]}`,
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_SetRoomCustomInfo{SetRoomCustomInfo: &roomcellv1.SetRoomCustomInfoRequest{
				CommandId: "i1", RequestId: "req-gw-1", AppCode: "app1", RoomId: "r1", UserId: "u1", Set: map[string]string{"theme": "dark"}, DeleteKeys: []string{"pin"}}}}},
		{"POST", "/api/v1/rooms/password/set", `{"command_id":"p1","app_code":"app1","room_id":"r1","user_id":"u1","clear":true}`,
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_SetRoomPassword{SetRoomPassword: &roomcellv1.SetRoomPasswordRequest{
				CommandId: "p1", RequestId: "req-gw-1", AppCode: "app1", RoomId: "r1", UserId: "u1", Clear: true}}}},
		{"POST", "/api/v1/rooms/chat/disable", `{"command_id":"d1","app_code":"app1","room_id":"r1","user_id":"u1","disabled":true}`,
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_SetChatDisabled{SetChatDisabled: &roomcellv1.SetChatDisabledRequest{
				CommandId: "d1", RequestId: "req-gw-1", AppCode: "app1", RoomId: "r1", UserId: "u1", Disabled: true}}}},
		{"POST", "/api/v1/rooms/seat/mute_all", `{"command_id":"a1","app_code":"app1","room_id":"r1","user_id":"u1","muted":true}`,
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_SetAllMicsMuted{SetAllMicsMuted: &roomcellv1.SetAllMicsMutedRequest{
				CommandId: "a1", RequestId: "req-gw-1", AppCode: "app1", RoomId: "r1", UserId: "u1", Muted: true}}}},
		{"POST", "/api/v1/rooms/like", `{"command_id":"l1","app_code":"app1","room_id":"r1","user_id":"u1","count":"3"}`,
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_LikeRoom{LikeRoom: &roomcellv1.LikeRoomRequest{
				CommandId: "l1", RequestId: "req-gw-1", AppCode: "app1", RoomId: "r1", UserId: "u1", Count: 3}}}},
		{"GET", "/api/v1/rooms/bans?app_code=app1&room_id=r1&page_size=5", "",
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_ListBans{ListBans: &roomcellv1.ListBansRequest{
				RequestId: "req-gw-1", AppCode: "app1", RoomId: "r1", PageSize: 5}}}},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			code, out, _ := httpDo(t, tc.method, base+tc.path, clientTok, tc.body)
			if code != http.StatusOK {
				t.Fatalf("%s %s: %d %s", tc.method, tc.path, code, out)
			}
			calls := b.calls()
			if got := calls[len(calls)-1]; !proto.Equal(got, tc.want) {
				t.Fatalf("backend got %v, want %v", got, tc.want)
			}
		})
	}
}
