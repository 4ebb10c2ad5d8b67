package room_test

import (
	"strings"
	"testing"

	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/room"
)

func setMeta(op string, opts ...opt) room.Command { return cmd(room.CmdSetRoomMetadata, op, opts...) }
func meta(category, cover, visibility string, tags ...string) opt {
	return func(c *room.Command) {
		c.Category, c.CoverURL, c.Visibility, c.Tags = category, cover, visibility, tags
	}
}

func metaRules() []rule {
	music := room.Meta{Category: "music", Tags: []string{"chill", "jazz"}, CoverURL: "https://cdn/c.png", Visibility: room.VisibilityUnlisted}
	withMusic := then(aRoom, setMeta("owner", meta("music", "https://cdn/c.png", "unlisted", "jazz", "chill", "jazz")))
	return []rule{
		{name: "create: with metadata (tags sorted and unique, public stored as none)", cmd: create("owner", meta("music", "https://cdn/c.png", "public", "jazz", "chill", "jazz")),
			want: []room.Event{room.RoomCreated{OwnerUserID: "owner", Name: "Friday night", MicSeats: room.DefaultMicSeats, CreatedAtMs: t0,
				Meta: room.Meta{Category: "music", Tags: []string{"chill", "jazz"}, CoverURL: "https://cdn/c.png"}},
				room.RoomUserJoined{UserID: "owner", JoinedAtMs: t0}}},
		invalid("create: visibility unknown", nil, create("owner", meta("", "", "secret")), "visibility"),
		{name: "metadata: an admin sets it whole", given: aRoom, cmd: setMeta("admin", meta("music", "https://cdn/c.png", "unlisted", "jazz", "chill", "jazz")),
			want: []room.Event{room.RoomMetadataChanged{Meta: music, OperatorUserID: "admin"}}},
		{name: "metadata: the same again is a no-op", given: withMusic, cmd: setMeta("owner", meta("music", "https://cdn/c.png", "unlisted", "chill", "jazz"))},
		{name: "metadata: cleared", given: withMusic, cmd: setMeta("owner"),
			want: []room.Event{room.RoomMetadataChanged{OperatorUserID: "owner"}}},
		{name: "metadata: a member may not", given: aRoom, cmd: setMeta("alice", meta("music", "", "")), err: room.ErrNotOwner, class: errclass.Permission},
		{name: "metadata: kept by a reopen", given: then(withMusic, closeRoom("owner")), cmd: reopen("owner", at(t0+9)),
			want: []room.Event{room.RoomCreated{OwnerUserID: "owner", Name: "Friday night", MicSeats: room.DefaultMicSeats, AdminUserIDs: []string{"admin", "admin2"},
				CreatedAtMs: t0 + 9, Reopened: true, Meta: music}, room.RoomUserJoined{UserID: "owner", JoinedAtMs: t0 + 9}}},
		invalid("metadata: category not an id", aRoom, setMeta("owner", meta("live music", "", "")), "category"),
		invalid("metadata: too many tags", aRoom, setMeta("owner", meta("", "", "", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11")), "tags"),
		invalid("metadata: tag too long", aRoom, setMeta("owner", meta("", "", "", strings.Repeat("t", room.MaxTagLen+1))), "tags"),
		invalid("metadata: blank tag", aRoom, setMeta("owner", meta("", "", "", " ")), "tags"),
		invalid("metadata: cover not http", aRoom, setMeta("owner", meta("", "javascript:alert(1)", "")), "cover_url"),
		invalid("metadata: cover with a space", aRoom, setMeta("owner", meta("", "https://a b", "")), "cover_url"),
	}
}

// The room view shows the metadata; public when none was set.
func TestMetadataInTheView(t *testing.T) {
	v := room.View(given(t, then(aRoom, setMeta("owner", meta("music", "https://cdn/c.png", "unlisted", "jazz")))...))
	if v.Category != "music" || len(v.Tags) != 1 || v.CoverUrl != "https://cdn/c.png" || v.Visibility != room.VisibilityUnlisted {
		t.Fatalf("view %v", v)
	}
	if v := room.View(given(t, aRoom...)); v.Visibility != room.VisibilityPublic || v.Category != "" || v.Tags != nil {
		t.Fatalf("a room without metadata: %v", v)
	}
}
