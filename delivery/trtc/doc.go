// Package trtc is roomcell's client for the rooms' audio side, Tencent
// Real-Time Communication (TRTC), through Tencent Cloud API 3.0: a JSON
// POST per action to the endpoint (trtc.tencentcloudapi.com), signed with
// TC3-HMAC-SHA256 from the configured SecretId/SecretKey (sign.go), the
// answer's Response.Error mapped onto retryable and permanent errors
// (errors.go). It calls the two actions a room's word needs at the audio
// side: RemoveUserByStrRoomId (a kicked user out of the audio room) and
// DismissRoomByStrRoomId (a closed room's audio room dismissed), both
// idempotent (a room that does not exist is success), under Tencent's
// 20 calls/s per action. The audio room of a room is its string room id,
// the same id as its IM group (delivery/roomim.GroupID).
//
// privatemapkey.go issues and verifies PrivateMapKeys, the per-room
// permission tickets of TRTC's advanced permission control (Tencent's
// GenPrivateMapKeyWithStringRoomID; byte for byte the output of Tencent's
// library, checked against its vectors in testdata/privatemapkey).
//
// It owns no event semantics (delivery/roomim runs these calls as the
// effects of RoomUserKicked and RoomClosed, through the outbox) and never
// logs or returns the secret key or a signature. trtcfake is a fake
// TRTC endpoint for tests and --dev.
package trtc
