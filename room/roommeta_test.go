package room_test

import (
	"slices"
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
		invalid("metadata: cover over http", aRoom, setMeta("owner", meta("", "http://cdn/c.png", "")), "cover_url"),
		invalid("metadata: cover with credentials", aRoom, setMeta("owner", meta("", "https://user:pass@cdn/c.png", "")), "cover_url"),
		invalid("metadata: cover with a user only", aRoom, setMeta("owner", meta("", "https://user@cdn/c.png", "")), "cover_url"),
		invalid("metadata: cover without a host", aRoom, setMeta("owner", meta("", "https:///c.png", "")), "cover_url"),
		invalid("metadata: cover with only a port", aRoom, setMeta("owner", meta("", "https://:443/c.png", "")), "cover_url"),
		invalid("metadata: cover scheme only", aRoom, setMeta("owner", meta("", "https:", "")), "cover_url"),
		{name: "metadata: the cover's scheme in any case", given: aRoom, cmd: setMeta("owner", meta("", "HTTPS://cdn/c.png", "")),
			want: []room.Event{room.RoomMetadataChanged{Meta: room.Meta{CoverURL: "HTTPS://cdn/c.png"}, OperatorUserID: "owner"}}},
		{name: "metadata: 20 copies of one tag are one tag", given: aRoom, cmd: setMeta("owner", meta("", "", "", slices.Repeat([]string{"jazz"}, 20)...)),
			want: []room.Event{room.RoomMetadataChanged{Meta: room.Meta{Tags: []string{"jazz"}}, OperatorUserID: "owner"}}},
		invalid("metadata: 11 distinct tags among repeats", aRoom, setMeta("owner", meta("", "", "", append(slices.Repeat([]string{"1"}, 5), "2", "3", "4", "5", "6", "7", "8", "9", "10", "11")...)), "tags"),
		invalid("metadata: a tag with a right-to-left override", aRoom, setMeta("owner", meta("", "", "", "jazz\u202egnp")), "tags"),
		invalid("metadata: a tag with a zero-width space", aRoom, setMeta("owner", meta("", "", "", "ja\u200bzz")), "tags"),
		invalid("metadata: a tag with a bare zero-width joiner", aRoom, setMeta("owner", meta("", "", "", "ja\u200dzz")), "tags"),
		invalid("metadata: a tag with a byte order mark", aRoom, setMeta("owner", meta("", "", "", "\ufeffjazz")), "tags"),
		invalid("metadata: a tag with an isolate", aRoom, setMeta("owner", meta("", "", "", "\u2067jazz\u2069")), "tags"),
		{name: "metadata: an emoji joined by a zero-width joiner is one tag", given: aRoom, cmd: setMeta("owner", meta("", "", "", "👨\u200d👩\u200d👧", "🏳\ufe0f\u200d🌈")),
			want: []room.Event{room.RoomMetadataChanged{Meta: room.Meta{Tags: []string{"🏳\ufe0f\u200d🌈", "👨\u200d👩\u200d👧"}}, OperatorUserID: "owner"}}},
		invalid("create: a name with a left-to-right mark", nil, create("owner", named("Friday\u200enight")), "name"),
		invalid("create: a name with a zero-width space", nil, create("owner", named("Friday\u200b night")), "name"),
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
