package room_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io/fs"
	"reflect"
	"strings"
	"testing"

	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/room"
)

// eventTypes is every event type the room's registry knows.
var eventTypes = room.EventTypes()

func TestEventJSONRoundTrip(t *testing.T) {
	samples := append(allEvents(),
		// Admins absent, and present but empty, both come back as they went.
		room.RoomCreated{OwnerUserID: "o", Name: "房间 🎤", MicSeats: 20, CreatedAtMs: t0},
		room.RoomCreated{OwnerUserID: "o", Name: "n", MicSeats: 8, AdminUserIDs: []string{}, CreatedAtMs: t0},
		room.RoomUserKicked{TargetUserID: "a", OperatorUserID: "b", Reason: `quote " and \ backslash`},
	)
	seen := map[string]bool{}
	for _, e := range samples {
		seen[e.EventType()] = true
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatalf("marshal %T: %v", e, err)
		}
		back, err := room.DecodeEvent(e.EventType(), b)
		if err != nil {
			t.Fatalf("decode %s %s: %v", e.EventType(), b, err)
		}
		if !reflect.DeepEqual(back, e) {
			t.Errorf("%s round trip\n got  %#v\n want %#v", e.EventType(), back, e)
		}
	}
	for _, typ := range eventTypes {
		if !seen[typ] {
			t.Errorf("no round-trip sample of %s", typ)
		}
	}
}

// DecodeEvent hands back values of the type Decide produces (not
// pointers), with the type the name says.
func TestDecodeEventTypes(t *testing.T) {
	for _, typ := range eventTypes {
		e, err := room.DecodeEvent(typ, []byte(`{}`))
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		if e.EventType() != typ {
			t.Errorf("DecodeEvent(%s) gave a %s", typ, e.EventType())
		}
		if reflect.TypeOf(e).Kind() != reflect.Struct {
			t.Errorf("DecodeEvent(%s) gave a %T, want a struct value", typ, e)
		}
	}
}

func TestDecodeEventErrors(t *testing.T) {
	tests := []struct {
		name, typ, payload, want string
	}{
		{"unknown type", "RoomDanced", `{}`, "unknown event type"},
		{"empty type", "", `{}`, "unknown event type"},
		{"type is case sensitive", "roomuserjoined", `{}`, "unknown event type"},
		{"truncated payload", room.TypeRoomUserJoined, `{"user_id":`, "decode RoomUserJoined"},
		{"empty payload", room.TypeRoomMicTaken, ``, "decode RoomMicTaken"},
		{"wrong field type", room.TypeRoomMicTaken, `{"seat":"three"}`, "decode RoomMicTaken"},
		{"array instead of object", room.TypeRoomClosed, `[1]`, "decode RoomClosed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := room.DecodeEvent(tt.typ, []byte(tt.payload))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("DecodeEvent = %#v, %v; want error with %q", e, err, tt.want)
			}
			if e != nil {
				t.Fatalf("event %#v returned with an error", e)
			}
		})
	}
}

func TestIsIMEvent(t *testing.T) {
	want := map[string]bool{
		room.TypeRoomCreated:                false,
		room.TypeRoomUserJoined:             true,
		room.TypeRoomUserLeft:               true,
		room.TypeRoomMicTaken:               true,
		room.TypeRoomMicReleased:            true,
		room.TypeRoomGiftSent:               true,
		room.TypeRoomHeatChanged:            false,
		room.TypeRoomUserKicked:             true,
		room.TypeRoomClosed:                 true,
		room.TypeRoomRankChanged:            false,
		room.TypeRoomAdminSet:               true,
		room.TypeRoomAdminRemoved:           true,
		room.TypeRoomSeatMuted:              true,
		room.TypeRoomSeatUnmuted:            true,
		room.TypeRoomSeatLocked:             true,
		room.TypeRoomSeatUnlocked:           true,
		room.TypeRoomUpdated:                true,
		room.TypeRoomOwnerChanged:           true,
		room.TypeRoomSeatCountChanged:       true,
		room.TypeRoomUserBanned:             true,
		room.TypeRoomUserUnbanned:           true,
		room.TypeRoomMemberMuted:            true,
		room.TypeRoomMemberUnmuted:          true,
		room.TypeRoomSeatModeChanged:        true,
		room.TypeRoomSeatApplied:            true,
		room.TypeRoomSeatApplicationEnded:   true,
		room.TypeRoomSeatInvited:            true,
		room.TypeRoomSeatInvitationEnded:    true,
		room.TypeRoomMetadataChanged:        true,
		room.TypeRoomCustomInfoChanged:      true,
		room.TypeRoomPasswordChanged:        false,
		room.TypeRoomAllMicsMutedChanged:    true,
		room.TypeRoomLiked:                  true,
		room.TypeRoomLikeReceipts:           false,
		room.TypeRoomChatDisabledChanged:    true,
		room.TypeRoomAudioSeen:              false,
		room.TypeRoomAudioRemoved:           true,
		room.TypeRoomAudioDismissed:         false,
		room.TypeRoomTopContributorsChanged: true,
		"":                                  false,
		"SomethingElse":                     false,
	}
	for typ, w := range want {
		if got := room.IsIMEvent(typ); got != w {
			t.Errorf("IsIMEvent(%q) = %v, want %v", typ, got, w)
		}
	}
	if len(want) != len(eventTypes)+2 {
		t.Fatalf("the table must list every event type")
	}
	// High priority: the events a room's clients cannot do without.
	for _, typ := range eventTypes {
		info, ok := room.EventInfoOf(typ)
		wantHigh := typ == room.TypeRoomGiftSent || typ == room.TypeRoomUserKicked || typ == room.TypeRoomClosed || typ == room.TypeRoomSeatMuted || typ == room.TypeRoomMemberMuted
		if !ok || info.High != wantHigh || info.High && !info.IM {
			t.Errorf("EventInfoOf(%s) = %+v, %v; want High %v", typ, info, ok, wantHigh)
		}
	}
	if _, ok := room.EventInfoOf("SomethingElse"); ok {
		t.Error("an unknown type has info")
	}
}

func TestEventID(t *testing.T) {
	id := room.EventID("app1", "room1", 7, 0)
	if id != "app1:room1:7:0" {
		t.Fatalf("EventID = %q", id)
	}
	if again := room.EventID("app1", "room1", 7, 0); again != id {
		t.Fatalf("not deterministic: %q then %q", id, again)
	}
	// Distinct for every (room, seq, index): ids cannot contain ':', so the
	// parts never run into each other.
	seen := map[string]string{}
	for _, r := range [][2]string{{"app1", "room1"}, {"app1", "room11"}, {"app11", "room1"}, {"app2", "room1"}} {
		for seq := int64(1); seq <= 30; seq++ {
			for i := range 12 {
				id := room.EventID(r[0], r[1], seq, i)
				what := fmt.Sprintf("%s/%s seq %d event %d", r[0], r[1], seq, i)
				if prev, dup := seen[id]; dup {
					t.Fatalf("EventID %q for both %s and %s", id, prev, what)
				}
				seen[id] = what
			}
		}
	}
}

func TestErrorClasses(t *testing.T) {
	tests := []struct {
		err   error
		class string
	}{
		{room.ErrRoomNotFound, errclass.NameNotFound},
		{room.ErrRoomExists, errclass.NameExists},
		{room.ErrRoomClosed, errclass.NamePrecondition},
		{room.ErrNotMember, errclass.NamePrecondition},
		{room.ErrBanned, errclass.NamePrecondition},
		{room.ErrSeatTaken, errclass.NamePrecondition},
		{room.ErrAlreadySeated, errclass.NamePrecondition},
		{room.ErrNotSeated, errclass.NamePrecondition},
		{room.ErrReceiverAbsent, errclass.NamePrecondition},
		{room.ErrKickOwner, errclass.NamePrecondition},
		{room.ErrSeatLocked, errclass.NamePrecondition},
		{room.ErrAdminOwner, errclass.NamePrecondition},
		{room.ErrTooManyAdmins, errclass.NamePrecondition},
		{room.ErrOwnerOnly, errclass.NamePermission},
		{room.ErrKickAdmin, errclass.NamePermission},
		{room.ErrNotOwner, errclass.NamePermission},
		{errclass.Invalid, errclass.NameInvalid},
		{errclass.Unavailable, errclass.NameUnavailable},
		{errors.New("disk on fire"), errclass.NameInternal},
		{nil, errclass.NameInternal},
	}
	for _, tt := range tests {
		if got := errclass.Name(tt.err); got != tt.class {
			t.Errorf("errclass.Name(%v) = %s, want %s", tt.err, got, tt.class)
		}
		if tt.err == nil {
			continue
		}
		// Across the cluster only class and text travel; the class must
		// survive the trip.
		back := errclass.FromWire(errclass.CodeOf(tt.err), errclass.Name(tt.err), tt.err.Error())
		if errclass.Name(back) != tt.class || back.Error() != tt.err.Error() {
			t.Errorf("FromWire(%s) = %v (class %s)", tt.class, back, errclass.Name(back))
		}
	}
}

// Every rule error comes back from another node as itself, so errors.Is
// works wherever the command ran.
func TestRuleErrorsSurviveTheCluster(t *testing.T) {
	if len(room.RuleErrors()) < 16 {
		t.Fatalf("only %d rule errors registered", len(room.RuleErrors()))
	}
	for _, e := range room.RuleErrors() {
		if errclass.CodeOf(e) == 0 {
			t.Errorf("%v has no code", e)
		}
		back := errclass.FromWire(errclass.CodeOf(e), errclass.Name(e), e.Error())
		if back != e || !errors.Is(back, e) {
			t.Errorf("%v came back as %v", e, back)
		}
		// Found by code, not text: another version's wording still comes
		// back as the same error, with the text it was sent with.
		reworded := errclass.FromWire(errclass.CodeOf(e), errclass.Name(e), "reworded")
		if !errors.Is(reworded, e) || reworded.Error() != "reworded" || errclass.Name(reworded) != errclass.Name(e) {
			t.Errorf("%v reworded came back as %v (class %s)", e, reworded, errclass.Name(reworded))
		}
		// And the text alone finds nothing: no lookup by message.
		if byText := errclass.FromWire(0, errclass.Name(e), e.Error()); errors.Is(byText, e) {
			t.Errorf("%v was found by its text", e)
		}
	}
}

// An error declared without a code would come back from another node as
// its class only, and errors.Is would fail silently there: every
// package-level Err* variable of the room is made by ruleErr or
// errclass.New.
func TestEveryRuleErrorIsRegistered(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	rules := 0
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			for _, d := range f.Decls {
				gd, ok := d.(*ast.GenDecl)
				if !ok || gd.Tok != token.VAR {
					continue
				}
				for _, spec := range gd.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if !strings.HasPrefix(name.Name, "Err") || i >= len(vs.Values) {
							continue
						}
						if sel, ok := vs.Values[i].(*ast.SelectorExpr); ok && types.ExprString(sel.X) == "errclass" {
							continue // a class of the shared vocabulary under the room's name
						}
						call, ok := vs.Values[i].(*ast.CallExpr)
						if !ok {
							continue // a class: the shared vocabulary under the room's name
						}
						switch fn := types.ExprString(call.Fun); fn {
						case "ruleErr":
							rules++
						case "errclass.New": // coded too, but not Decide's (the grain's)
						default:
							t.Errorf("%s: %s is made by %s, not ruleErr: it would not cross nodes as itself", fset.Position(name.Pos()), name.Name, fn)
						}
					}
				}
			}
		}
	}
	if rules != len(room.RuleErrors()) {
		t.Errorf("%d ruleErr declarations, %d registered", rules, len(room.RuleErrors()))
	}
}
