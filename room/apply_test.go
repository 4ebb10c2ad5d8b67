package room_test

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hyapp/roomcell/room"
)

// busy is a room with something in every field: admins, members, seats
// taken, a live ban, an expired ban, heat, a muted seat, a locked seat, an
// announcement.
func busy(t *testing.T) room.State {
	t.Helper()
	return given(t, then(aRoom,
		join("carol"), join("dave"),
		takeMic("alice", 0), takeMic("bob", 3),
		gift("alice", "bob", 2, 40),
		kick("owner", "carol", ban(10)),                // until t0+10s
		kick("owner", "dave", ban(3600), at(t0+1_000)), // until t0+1h+1s
		muteSeat("owner", 3), lockSeat("admin", 6), updateRoom("owner", announce("hi")),
	)...)
}

func allEvents() []room.Event {
	return []room.Event{
		room.RoomCreated{OwnerUserID: "x", Name: "n", MicSeats: 2, AdminUserIDs: []string{"y"}, CreatedAtMs: 1},
		room.RoomUserJoined{UserID: "erin", JoinedAtMs: t0 + 20_000},
		room.RoomUserLeft{UserID: "alice", Reason: room.ReasonLeft},
		room.RoomMicTaken{UserID: "bob", Seat: 5},
		room.RoomMicReleased{UserID: "alice", Seat: 0, Reason: room.ReasonReleased},
		room.RoomGiftSent{FromUserID: "alice", ToUserID: "bob", GiftID: "rose", GiftCount: 1, HeatValue: 5},
		room.RoomHeatChanged{Delta: 5, Heat: 45},
		room.RoomUserKicked{TargetUserID: "bob", OperatorUserID: "owner", BanUntilMs: t0 + 99},
		room.RoomClosed{OperatorUserID: "owner"},
		room.RoomRankChanged{Rank: 1, PrevRank: 2, Heat: 45},
		room.RoomAdminSet{TargetUserID: "alice", OperatorUserID: "owner"},
		room.RoomAdminRemoved{TargetUserID: "admin", OperatorUserID: "owner"},
		room.RoomSeatMuted{Seat: 0, UserID: "alice", OperatorUserID: "admin"},
		room.RoomSeatUnmuted{Seat: 3, OperatorUserID: "admin"},
		room.RoomSeatLocked{Seat: 2, OperatorUserID: "owner"},
		room.RoomSeatUnlocked{Seat: 6, OperatorUserID: "owner"},
		room.RoomUpdated{OperatorUserID: "owner", Name: "新名字", Announcement: "line 1\nline 2"},
		room.RoomOwnerChanged{OwnerUserID: "admin", PreviousOwnerUserID: "owner"},
		room.RoomSeatModeChanged{Mode: room.SeatModeApply, OperatorUserID: "owner"},
		room.RoomSeatApplied{UserID: "alice", Seat: 3, ExpiresAtMs: t0 + 60_000},
		room.RoomSeatApplicationEnded{UserID: "alice", Seat: 3, Outcome: room.OutcomeApproved, OperatorUserID: "admin"},
		room.RoomSeatInvited{UserID: "bob", Seat: 4, OperatorUserID: "owner", ExpiresAtMs: t0 + 60_000},
		room.RoomSeatInvitationEnded{UserID: "bob", Seat: 4, Outcome: room.OutcomeDeclined},
		room.RoomSeatCountChanged{MicSeats: 4, OperatorUserID: "owner"},
		room.RoomUserBanned{TargetUserID: "carol", OperatorUserID: "owner", Reason: "r", BanUntilMs: t0 + 60_000, AtMs: t0},
		room.RoomUserUnbanned{TargetUserID: "carol", OperatorUserID: "owner"},
		room.RoomMemberMuted{TargetUserID: "alice", OperatorUserID: "owner", MutedUntilMs: t0 + 60_000, AtMs: t0},
		room.RoomMemberUnmuted{TargetUserID: "alice", OperatorUserID: "owner"},
		room.RoomAllMicsMutedChanged{Muted: true, OperatorUserID: "owner"},
		room.RoomLiked{Count: 3, Total: 3, Likers: 1, Users: []room.LikeUser{{UserID: "alice", Count: 3}}},
		room.RoomLikeReceipts{AtMs: t0, Users: map[string][]string{"alice": {"0123456789abcdef:3"}}},
		room.RoomChatDisabledChanged{Disabled: true, OperatorUserID: "owner"},
		room.RoomSeatMuted{Seat: 1, OperatorUserID: "owner", All: true},
		room.RoomPasswordChanged{Set: true, OperatorUserID: "owner"},
		room.RoomPasswordChanged{Legacy: room.Verifier{Salt: "s", MAC: "m"}, OperatorUserID: "owner"}, // as logged before verifiers were sealed
		room.RoomCustomInfoChanged{Set: map[string]string{"theme": "dark"}, Deleted: []string{"pin"}, OperatorUserID: "owner"},
		room.RoomMetadataChanged{Meta: room.Meta{Category: "music", Tags: []string{"chill", "jazz"}, CoverURL: "https://c/1.png", Visibility: room.VisibilityUnlisted}, OperatorUserID: "owner"},
		room.RoomCreated{OwnerUserID: "x", Name: "n", MicSeats: 2, CreatedAtMs: 1, Reopened: true, Meta: room.Meta{Category: "talk"}},
		room.RoomAudioSeen{UserID: "alice", Kind: room.AudioExit, EventMs: t0, ReleaseAtMs: t0 + 10_000, Reason: "timeout"},
		room.RoomAudioRemoved{UserID: "carol", Reason: room.AudioRemovedNotMember, Kind: room.AudioEnter},
		room.RoomAudioDismissed{EventMs: t0},
		room.RoomGiftSent{FromUserID: "bob", ToUserID: "alice", GiftID: "rose", GiftCount: 2, HeatValue: 20, Value: 20, Day: "2026-12-07"},
		room.RoomTopContributorsChanged{Lifecycle: []room.Leader{{UserID: "bob", Value: 20}}, Today: []room.Leader{{UserID: "bob", Value: 20}}, Day: "2026-12-07"},
	}
}

func TestApplyNeverChangesItsInput(t *testing.T) {
	for _, e := range allEvents() {
		t.Run(e.EventType(), func(t *testing.T) {
			s := busy(t)
			keep := s.Clone()
			n := room.Apply(s, e)
			if !reflect.DeepEqual(s, keep) {
				t.Fatalf("Apply changed its input:\nbefore %+v\nafter  %+v", keep, s)
			}
			// The result owns its maps and slices: writing to it leaves
			// the input alone.
			for i := range n.Seats {
				n.Seats[i] = "scribble"
			}
			for k := range n.Members {
				n.Members[k] = -1
			}
			for k := range n.Bans {
				n.Bans[k] = -1
			}
			for i := range n.Admins {
				n.Admins[i] = "scribble"
			}
			for i := range n.MutedSeats {
				n.MutedSeats[i] = -1
			}
			for i := range n.LockedSeats {
				n.LockedSeats[i] = -1
			}
			if !reflect.DeepEqual(s, keep) {
				t.Fatalf("result shares memory with the input: %+v", s)
			}
			m := room.ApplyCommand(s, s.Seq+1, []room.Event{e, e})
			if !reflect.DeepEqual(s, keep) {
				t.Fatalf("ApplyCommand changed its input: %+v", s)
			}
			if m.Seq != s.Seq+1 {
				t.Fatalf("ApplyCommand seq %d, want %d", m.Seq, s.Seq+1)
			}
		})
	}
}

func TestApplyEffects(t *testing.T) {
	tests := []struct {
		name string
		e    room.Event
		// want edits a copy of busy into the state expected after e.
		want func(s *room.State)
	}{
		{"joined: added with the join time; own ban and expired bans go, live bans stay",
			room.RoomUserJoined{UserID: "carol", JoinedAtMs: t0 + 10_000},
			func(s *room.State) {
				s.Members["carol"] = t0 + 10_000
				delete(s.Bans, "carol")
				delete(s.Extra.BanNotes, "carol") // the note goes with its ban
			}},
		{"joined: a ban ending exactly at the join time is pruned",
			room.RoomUserJoined{UserID: "erin", JoinedAtMs: t0 + 10_000},
			func(s *room.State) {
				s.Members["erin"] = t0 + 10_000
				delete(s.Bans, "carol")
				delete(s.Extra.BanNotes, "carol")
			}},
		{"joined: before any ban ends nothing is pruned",
			room.RoomUserJoined{UserID: "erin", JoinedAtMs: t0 + 9_999},
			func(s *room.State) { s.Members["erin"] = t0 + 9_999 }},
		{"left: member gone",
			room.RoomUserLeft{UserID: "bob", Reason: room.ReasonLeft},
			func(s *room.State) { delete(s.Members, "bob"); s.Seats[3] = "" }},
		{"mic taken",
			room.RoomMicTaken{UserID: "admin", Seat: 7},
			func(s *room.State) { s.Seats[7] = "admin" }},
		{"mic taken: seat out of range is ignored",
			room.RoomMicTaken{UserID: "admin", Seat: 8},
			func(s *room.State) {}},
		{"mic released",
			room.RoomMicReleased{UserID: "bob", Seat: 3, Reason: room.ReasonReleased},
			func(s *room.State) { s.Seats[3] = "" }},
		{"mic released: a stale release of someone else's seat is ignored",
			room.RoomMicReleased{UserID: "alice", Seat: 3, Reason: room.ReasonReleased},
			func(s *room.State) {}},
		{"gift sent: heat moves only with RoomHeatChanged",
			room.RoomGiftSent{FromUserID: "alice", ToUserID: "bob", GiftID: "rose", GiftCount: 1, HeatValue: 7},
			func(s *room.State) {}},
		{"heat changed",
			room.RoomHeatChanged{Delta: 7, Heat: 47},
			func(s *room.State) { s.Heat = 47 }},
		{"kicked without ban: leaves members and seat",
			room.RoomUserKicked{TargetUserID: "bob", OperatorUserID: "owner"},
			func(s *room.State) { delete(s.Members, "bob"); s.Seats[3] = "" }},
		{"kicked with ban: leaves and is banned until",
			room.RoomUserKicked{TargetUserID: "alice", OperatorUserID: "owner", BanUntilMs: t0 + 5},
			func(s *room.State) {
				delete(s.Members, "alice")
				s.Seats[0] = ""
				s.Bans["alice"] = t0 + 5
				s.Extra.BanNotes["alice"] = room.BanNote{OperatorUserID: "owner", Role: room.RoleOwner}
			}},
		{"kicked with ban by an admin: the ban is an admin's",
			room.RoomUserKicked{TargetUserID: "alice", OperatorUserID: "admin", BanUntilMs: t0 + 5},
			func(s *room.State) {
				delete(s.Members, "alice")
				s.Seats[0] = ""
				s.Bans["alice"] = t0 + 5
				s.Extra.BanNotes["alice"] = room.BanNote{OperatorUserID: "admin", Role: room.RoleAdmin}
			}},
		{"closed: nobody left in it, seats free, the rest kept",
			room.RoomClosed{OperatorUserID: "owner"},
			func(s *room.State) {
				s.Status = room.StatusClosed
				s.Members = nil
				s.Seats = make([]string, 8)
			}},
		{"rank changed: room state untouched",
			room.RoomRankChanged{Rank: 1, Heat: 40},
			func(s *room.State) {}},
		{"admin set: inserted in order",
			room.RoomAdminSet{TargetUserID: "alice", OperatorUserID: "owner"},
			func(s *room.State) { s.Admins = []string{"admin", "admin2", "alice"} }},
		{"admin set: already listed is unchanged",
			room.RoomAdminSet{TargetUserID: "admin2", OperatorUserID: "owner"},
			func(s *room.State) {}},
		{"admin removed",
			room.RoomAdminRemoved{TargetUserID: "admin", OperatorUserID: "owner"},
			func(s *room.State) { s.Admins = []string{"admin2"} }},
		{"seat muted: inserted in order, the holder stays",
			room.RoomSeatMuted{Seat: 0, UserID: "alice", OperatorUserID: "owner"},
			func(s *room.State) { s.MutedSeats = []int{0, 3} }},
		{"seat muted: out of range is ignored",
			room.RoomSeatMuted{Seat: 8, OperatorUserID: "owner"},
			func(s *room.State) {}},
		{"seat unmuted: the last mute goes, the list is nil",
			room.RoomSeatUnmuted{Seat: 3, OperatorUserID: "owner"},
			func(s *room.State) { s.MutedSeats = nil }},
		{"seat locked",
			room.RoomSeatLocked{Seat: 1, OperatorUserID: "owner"},
			func(s *room.State) { s.LockedSeats = []int{1, 6} }},
		{"seat unlocked",
			room.RoomSeatUnlocked{Seat: 6, OperatorUserID: "owner"},
			func(s *room.State) { s.LockedSeats = nil }},
		{"room updated: name and announcement replaced",
			room.RoomUpdated{OperatorUserID: "admin", Name: "Sat", Announcement: ""},
			func(s *room.State) { s.Name, s.Announcement = "Sat", "" }},
		{"user left: the mute stays with the seat",
			room.RoomUserLeft{UserID: "bob", Reason: room.ReasonLeft},
			func(s *room.State) { delete(s.Members, "bob"); s.Seats[3] = "" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := busy(t)
			want := before.Clone()
			tt.want(&want)
			got := room.Apply(before, tt.e)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("after %#v\n got  %+v\n want %+v", tt.e, got, want)
			}
		})
	}
}

// busy itself is what the rules say it is, so the rows above start where
// they claim to.
func TestApplyBusyFixture(t *testing.T) {
	s := busy(t)
	want := room.State{
		AppCode: tApp, RoomID: tRoom, Seq: 15, Exists: true, Owner: "owner", Name: "Friday night", Status: room.StatusOpen,
		Admins:       []string{"admin", "admin2"},
		Members:      map[string]int64{"owner": t0, "admin": t0, "admin2": t0, "alice": t0, "bob": t0},
		Seats:        []string{"alice", "", "", "bob", "", "", "", ""},
		Bans:         map[string]int64{"carol": t0 + 10_000, "dave": t0 + 3_601_000},
		Heat:         40,
		CreatedAtMs:  t0,
		Announcement: "hi",
		MutedSeats:   []int{3},
		LockedSeats:  []int{6},
		Extra: &room.Extra{BanNotes: map[string]room.BanNote{
			"carol": {OperatorUserID: "owner", Role: room.RoleOwner}, "dave": {OperatorUserID: "owner", Role: room.RoleOwner}}},
	}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("busy\n got  %+v\n want %+v", s, want)
	}
}

func TestApplyCreated(t *testing.T) {
	got := room.ApplyCommand(room.NewState(tApp, tRoom), 1, []room.Event{
		room.RoomCreated{OwnerUserID: "o", Name: "n", MicSeats: 3, AdminUserIDs: []string{"a"}, CreatedAtMs: 9},
		room.RoomUserJoined{UserID: "o", JoinedAtMs: 9},
	})
	want := room.State{AppCode: tApp, RoomID: tRoom, Seq: 1, Exists: true, Owner: "o", Name: "n", Status: room.StatusOpen,
		Admins: []string{"a"}, Members: map[string]int64{"o": 9}, Seats: []string{"", "", ""}, CreatedAtMs: 9}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}

// A room everyone left has nil maps, as a snapshot of it decodes to.
func TestStateCanonicalAfterEmptying(t *testing.T) {
	s := given(t, create("owner"), join("bob"), kick("owner", "bob", ban(1)), join("bob", at(t0+1000)), leave("bob"), leave("owner"))
	if s.Members != nil || s.Bans != nil || s.Admins != nil {
		t.Fatalf("empty collections must be nil: members %#v bans %#v admins %#v", s.Members, s.Bans, s.Admins)
	}
	b, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := room.UnmarshalState(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, s) {
		t.Fatalf("snapshot round trip\n got  %+v\n want %+v", back, s)
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	s := busy(t)
	b, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := room.UnmarshalState(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, s) {
		t.Fatalf("round trip\n got  %+v\n want %+v", back, s)
	}
	// Marshal is deterministic: the same state gives the same bytes.
	b2, _ := back.Marshal()
	if string(b) != string(b2) {
		t.Fatalf("marshal not deterministic:\n%s\n%s", b, b2)
	}
	// Foreign JSON with empty collections decodes canonical too.
	empty, err := room.UnmarshalState([]byte(`{"app_code":"a","room_id":"r","members":{},"bans":{},"admins":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	if empty.Members != nil || empty.Bans != nil || empty.Admins != nil {
		t.Fatalf("not canonical: %+v", empty)
	}
	for _, bad := range []string{``, `{`, `{"seq":"x"}`, `[]`} {
		if _, err := room.UnmarshalState([]byte(bad)); err == nil || !strings.Contains(err.Error(), "snapshot") {
			t.Errorf("UnmarshalState(%q) = %v, want a snapshot error", bad, err)
		}
	}
}

// A snapshot written before seats could be muted or locked and rooms had
// an announcement (the JSON of that version, byte for byte) still decodes
// to the state it was, and the new commands work on it.
func TestSnapshotFromBeforeSeatRulesDecodes(t *testing.T) {
	old := `{"app_code":"app1","room_id":"room1","seq":7,"exists":true,"owner":"owner","name":"Friday night","status":"open",` +
		`"admins":["admin"],"members":{"alice":1700000000000,"owner":1700000000000},"seats":["alice","","",""],` +
		`"bans":{"bob":1700000600000},"heat":30,"created_at_ms":1700000000000}`
	s, err := room.UnmarshalState([]byte(old))
	if err != nil {
		t.Fatal(err)
	}
	want := room.State{AppCode: tApp, RoomID: tRoom, Seq: 7, Exists: true, Owner: "owner", Name: "Friday night", Status: room.StatusOpen,
		Admins: []string{"admin"}, Members: map[string]int64{"alice": t0, "owner": t0}, Seats: []string{"alice", "", "", ""},
		Bans: map[string]int64{"bob": t0 + 600_000}, Heat: 30, CreatedAtMs: t0}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("old snapshot\n got  %#v\n want %#v", s, want)
	}
	// Re-marshalled without the new fields: an older node reading it back
	// (rolling upgrade) sees the same JSON.
	if b, _ := s.Marshal(); string(b) != old {
		t.Fatalf("re-marshalled old snapshot differs:\n%s\n%s", b, old)
	}
	for _, c := range []room.Command{muteSeat("owner", 0), lockSeat("owner", 0), updateRoom("owner", announce("hi")), setAdmin("owner", "alice")} {
		evs, err := room.Decide(s, c)
		if err != nil || len(evs) == 0 {
			t.Fatalf("%s on an old snapshot: %v %v", c.Type, evs, err)
		}
		s = room.ApplyCommand(s, s.Seq+1, evs)
	}
	if !s.SeatMuted(0) || !s.SeatLocked(0) || s.Seats[0] != "" || s.Announcement != "hi" || !s.IsAdmin("alice") {
		t.Fatalf("after the new commands: %+v", s)
	}
}

func TestStateQueries(t *testing.T) {
	s := busy(t)
	if got := s.SortedMembers(); !slices.Equal(got, []string{"admin", "admin2", "alice", "bob", "owner"}) {
		t.Errorf("SortedMembers %v", got)
	}
	if s.SeatOf("bob") != 3 || s.SeatOf("owner") != -1 {
		t.Errorf("SeatOf bob %d owner %d", s.SeatOf("bob"), s.SeatOf("owner"))
	}
	if !s.IsAdmin("owner") || !s.IsAdmin("admin2") || s.IsAdmin("alice") {
		t.Error("IsAdmin")
	}
	if !s.BannedAt("carol", t0+9_999) || s.BannedAt("carol", t0+10_000) || s.BannedAt("alice", t0) {
		t.Error("BannedAt")
	}
	if c := s.Clone(); !reflect.DeepEqual(c, s) || &c.Seats[0] == &s.Seats[0] || !maps.Equal(c.Members, s.Members) {
		t.Error("Clone must be an equal deep copy")
	}
}
