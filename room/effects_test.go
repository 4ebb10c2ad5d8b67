package room_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/hyapp/roomcell/room"
)

// Every event the package declares (a type with an EventType method) has
// a row in the registry: an event without one would decode as unknown and
// cause nothing anywhere.
func TestEveryEventHasARow(t *testing.T) {
	declared := 0
	for _, d := range sourceDecls(t) {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv == nil || fn.Name.Name != "EventType" || fn.Body == nil || len(fn.Body.List) != 1 {
			continue
		}
		ret, ok := fn.Body.List[0].(*ast.ReturnStmt)
		if !ok || len(ret.Results) != 1 {
			continue
		}
		id, ok := ret.Results[0].(*ast.Ident)
		if !ok {
			t.Errorf("an EventType method returns %T, not a Type constant", ret.Results[0])
			continue
		}
		declared++
		typ := strings.TrimPrefix(id.Name, "Type")
		if _, ok := room.EventInfoOf(typ); !ok {
			t.Errorf("event %s has no row in the registry (room/event.go eventKinds)", typ)
		}
	}
	if declared != len(room.EventTypes()) || declared < 30 {
		t.Fatalf("%d events declared, %d rows", declared, len(room.EventTypes()))
	}
}

// The rows' effects are coherent: a targeted effect's event names its
// target; a row has at most one effect per side at Tencent (delivery
// records one step per side); what reaches Tencent or clients' IM also
// reaches the MQ topic (docs: the fanout publishes what the row says).
func TestEffectRows(t *testing.T) {
	for _, typ := range room.EventTypes() {
		info, _ := room.EventInfoOf(typ)
		fx := info.Causes()
		if fx&room.Targeted != 0 {
			ev, err := room.DecodeEvent(typ, []byte(`{"target_user_id":"u1","user_id":"u1"}`))
			if err != nil {
				t.Fatal(err)
			}
			if tg, ok := room.TargetOf(ev); !ok || tg.UserID != "u1" {
				t.Errorf("%s causes %s but names no target (%+v, %v)", typ, fx&room.Targeted, tg, ok)
			}
		}
		if fx.Has(room.TRTCRevoke) && fx&room.Targeted != 0 {
			t.Errorf("%s: a revocation names its user by AudioRevoked, a target by TargetOf: not both (%s)", typ, fx)
		}
		for _, side := range []room.Effect{room.IMSide, room.AudioSide} {
			if n := fx & side; n&(n-1) != 0 {
				t.Errorf("%s has two effects on one side: %s", typ, n)
			}
		}
		if fx&room.AtTencent != 0 && !fx.Has(room.MQ) {
			t.Errorf("%s reaches Tencent (%s) but not the MQ topic", typ, fx)
		}
		if strings.Contains(fx.String(), "effect(") {
			t.Errorf("%s has an effect without a name: %s", typ, fx)
		}
	}
	// The rows that answer "what does a kick cause?".
	for typ, want := range map[string]room.Effect{
		room.TypeRoomUserKicked:      room.IMMessage | room.IMRemove | room.TRTCRemove | room.Notice | room.MQ,
		room.TypeRoomUserBanned:      room.IMMessage | room.IMBan | room.TRTCRemove | room.MQ,
		room.TypeRoomUserUnbanned:    room.IMMessage | room.IMUnban | room.MQ,
		room.TypeRoomMicReleased:     room.IMMessage | room.TRTCRevoke | room.MQ,
		room.TypeRoomClosed:          room.IMMessage | room.TRTCDismiss | room.IMDestroy | room.MQ,
		room.TypeRoomCreated:         room.IMCreate | room.MQ,
		room.TypeRoomMemberMuted:     room.IMMessage | room.IMMute | room.MQ,
		room.TypeRoomHeatChanged:     0,
		room.TypeRoomRankChanged:     0,
		room.TypeRoomAudioRemoved:    room.IMMessage | room.TRTCRemove | room.MQ,
		room.TypeRoomSeatMuted:       room.IMMessage | room.TRTCRevoke | room.MQ,
		room.TypeRoomMetadataChanged: room.IMMessage | room.MQ,
	} {
		info, _ := room.EventInfoOf(typ)
		if got := info.Causes(); got != want {
			t.Errorf("%s causes %s, want %s", typ, got, want)
		}
	}
	if got := room.TypesCausing(room.Notice); !slices.Equal(got, []string{room.TypeRoomUserKicked}) {
		t.Errorf("notice events %v", got)
	}
	if room.Causes("NoSuchEvent", room.MQ) || room.CausesAny("NoSuchEvent", room.AtTencent) || room.Effect(0).Has(0) {
		t.Fatal("an unknown type or no effect causes something")
	}
}

// sourceDecls are the top-level declarations of the package's non-test
// files.
func sourceDecls(t *testing.T) []ast.Decl {
	t.Helper()
	pkgs, err := parser.ParseDir(token.NewFileSet(), ".", func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []ast.Decl
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			out = append(out, f.Decls...)
		}
	}
	return out
}
