package roomim

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// maxGroupID is Tencent's GroupId limit in bytes.
const maxGroupID = 48

// GroupID maps a room to its Tencent IM group id.
//
// Readable form: "<app_code>_<room_id>" when app_code is [A-Za-z0-9-]+
// (no '_', so the first '_' splits the id unambiguously), room_id is
// [A-Za-z0-9_-]+ and the result fits in 48 bytes.
// Otherwise: "h-" + the first 40 hex digits of sha256(app_code NUL
// room_id). That form holds no '_', so it never equals a readable id, and
// it is printable ASCII, never starting with Tencent's reserved "@TGS#".
// Clients get the id from roomcell, they never build it themselves.
func GroupID(appCode, roomID string) string {
	if len(appCode)+1+len(roomID) <= maxGroupID && plain(appCode, false) && plain(roomID, true) {
		return appCode + "_" + roomID
	}
	h := sha256.Sum256([]byte(appCode + "\x00" + roomID))
	return "h-" + hex.EncodeToString(h[:20])
}

// RoomOfGroup is GroupID backwards: the room whose group (and audio room,
// the same id) gid is. ok is false for an id GroupID does not make in its
// readable form: a hashed id ("h-...") names its room one way only, so a
// callback about it cannot be routed (rooms whose app_code and room_id fit
// the readable form are the ones Tencent's callbacks reach).
func RoomOfGroup(gid string) (appCode, roomID string, ok bool) {
	app, rid, found := strings.Cut(gid, "_")
	if !found || GroupID(app, rid) != gid {
		return "", "", false
	}
	return app, rid, true
}

func plain(s string, underscore bool) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-':
		case c == '_' && underscore:
		default:
			return false
		}
	}
	return true
}

// groupName fits a room name into Tencent's 30-byte group Name, cutting
// on a UTF-8 boundary; an empty name falls back to the room id.
func groupName(name, roomID string) string {
	if name == "" {
		name = roomID
	}
	if name == "" {
		name = "room"
	}
	if len(name) <= 30 {
		return name
	}
	cut := 30
	for cut > 0 && name[cut]&0xC0 == 0x80 {
		cut--
	}
	return name[:cut]
}
