package imfake

import "testing"

// A group keeps its owner apart from its other members (no map for an
// owner-only group), and reads back as one sorted set whatever the order
// of adds and removals.
func TestGroupMembersOwnerApart(t *testing.T) {
	g := &group{Owner: "owner", ownerIn: true}
	check := func(step string, want ...string) {
		t.Helper()
		got := g.memberList()
		if len(got) != len(want) {
			t.Fatalf("%s: members %v, want %v", step, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s: members %v, want %v", step, got, want)
			}
		}
		for _, u := range []string{"owner", "a", "z"} {
			in := false
			for _, w := range want {
				in = in || w == u
			}
			if g.isMember(u) != in {
				t.Fatalf("%s: isMember(%s) = %v, want %v", step, u, !in, in)
			}
		}
	}
	check("created", "owner")
	if g.members != nil {
		t.Fatal("an owner-only group made a member map")
	}
	g.addMember("z")
	g.addMember("a")
	check("two added", "a", "owner", "z")
	g.removeMember("owner")
	check("owner removed", "a", "z")
	g.removeMember("owner")
	g.removeMember("nobody")
	check("absent removed", "a", "z")
	g.addMember("owner")
	g.removeMember("a")
	check("owner back, a gone", "owner", "z")
}
