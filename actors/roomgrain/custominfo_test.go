package roomgrain

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/room"
)

func rcSetInfo(id string, set map[string]string, del ...string) *v1.RoomCommand {
	return wrap(&v1.SetRoomCustomInfoRequest{CommandId: id, AppCode: "app", RoomId: "r1", UserId: "owner", Set: set, DeleteKeys: del})
}

// Custom info at and beyond its limits: a refused change answers its
// code and writes nothing; GetRoom shows the info live and after the
// room is activated again; command replies leave it out.
func TestCustomInfoLimits(t *testing.T) {
	f := newFixture(t)
	pid := f.activate("app/r1")
	f.mustDo(pid, rcCreate("c1", "owner"))
	full := map[string]string{}
	for i := range room.MaxCustomKeys {
		full[fmt.Sprintf("k%02d", i)] = strings.Repeat("v", room.MaxCustomInfoLen/room.MaxCustomKeys-3)
	}
	reply := f.mustDo(pid, rcSetInfo("s1", full))
	if len(reply.GetRoom().GetCustomInfo()) != 0 {
		t.Fatalf("a command reply carries the custom info")
	}
	logged := f.logLen()
	for _, tc := range []struct {
		rc   *v1.RoomCommand
		code errclass.Code
	}{
		{rcSetInfo("s2", map[string]string{"k99": "x"}), errclass.CodeTooManyCustomKeys},
		{rcSetInfo("s3", map[string]string{"k00": strings.Repeat("w", room.MaxCustomInfoLen/room.MaxCustomKeys)}), errclass.CodeCustomInfoTooLarge},
		{rcSetInfo("s4", map[string]string{"k00": strings.Repeat("w", room.MaxCustomValueLen+1)}), 0},
	} {
		_, err := f.do(pid, tc.rc)
		switch {
		case err == nil:
			t.Fatalf("accepted over the limit")
		case tc.code == 0 && !errors.Is(err, errclass.Invalid):
			t.Fatalf("a value over 2 KiB: %v, want invalid", err)
		case tc.code != 0 && errclass.CodeOf(err) != tc.code:
			t.Fatalf("refused with %v, want code %s", err, tc.code)
		}
	}
	if n := f.logLen(); n != logged {
		t.Fatalf("refused changes wrote %d log rows", n-logged)
	}
	f.mustDo(pid, rcSetInfo("s5", map[string]string{"theme": "dark"}, "k00", "k01"))
	want := maps.Clone(full)
	delete(want, "k00")
	delete(want, "k01")
	want["theme"] = "dark"
	got := f.mustDo(pid, rcGet()).GetRoom().GetCustomInfo()
	if !maps.Equal(got, want) {
		t.Fatalf("live custom info %d keys, want %d", len(got), len(want))
	}
	f.sys.Root.Stop(pid)
	pid = f.activate("app/r1")
	if got := f.mustDo(pid, rcGet()).GetRoom().GetCustomInfo(); !maps.Equal(got, want) {
		t.Fatalf("replayed custom info %v", got)
	}
}
