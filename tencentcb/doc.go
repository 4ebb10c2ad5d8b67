// Package tencentcb serves the callbacks Tencent posts to roomcell: TRTC's
// room & media callbacks (trtc.go: a member entered or left the audio
// room, started publishing audio; TRTC "Room&Media Webhooks", trtc.io
// document 39558) and IM's third-party callbacks (im.go: logins, and the
// "before" callbacks that let the room refuse a group message or a join;
// IM "Third-Party Callback Overview", cloud.tencent.com document
// 269/1522). The door checks before it reads: a callback is authenticated
// (sign.go) and size-capped before its body is decoded; one that is not
// changes nothing and is answered 401 or 400.
//
// What Tencent reports becomes the room's own command (room.CmdAudioPresence)
// sent to the room's owner through Rooms (actors/roomgrain.Client: any node
// may receive a callback), under a command id derived from the event's
// identity: a retry, a duplicate or a replay of a callback, on any node,
// is one command, and the room orders a member's reports by their event
// time. A TRTC callback is answered once the room has accepted its
// command (it is durable then); when the room cannot answer within
// trtc.callback.answer_timeout the answer is 503 and Tencent retries
// (for a minute). A "before" callback of IM is answered from the room's
// word about the user, reused for tencent_im.callback.view_ttl.
//
// It knows no actor, store or cluster: cmd/roomcell mounts the handlers
// on the HTTP listener and hands them the room client.
package tencentcb
