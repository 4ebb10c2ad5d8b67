package imfake_test

import (
	"testing"
	"time"

	"github.com/hyapp/roomcell/delivery/tencentim"
)

// get_group_ban_member refuses a Limit outside 1..100 and a negative
// Offset (10004), and a group that does not exist (10010).
func TestGetGroupBanMemberRules(t *testing.T) {
	s := start(t)
	q := validQuery(t, s, time.Now())
	api := tencentim.APIGetGroupBanMember
	if a := raw(t, s, tencentim.APICreateGroup, q, `{"Type":"AVChatRoom","GroupId":"g1","Name":"g"}`); a.ErrorCode != 0 {
		t.Fatalf("create: %+v", a)
	}
	for _, body := range []string{
		`{"GroupId":"g1"}`,
		`{"GroupId":"g1","Limit":0}`,
		`{"GroupId":"g1","Limit":101}`,
		`{"GroupId":"g1","Limit":10,"Offset":-1}`,
		`{"GroupId":"g1","Limit":"10"}`,
	} {
		if a := raw(t, s, api, q, body); a.ErrorCode != 10004 {
			t.Fatalf("%s: %+v, want 10004", body, a)
		}
	}
	if a := raw(t, s, api, q, `{"GroupId":"nope","Limit":10}`); a.ErrorCode != 10010 {
		t.Fatalf("missing group: %+v", a)
	}
	if a := raw(t, s, api, q, `{"GroupId":"g1","Limit":100,"Offset":0}`); a.ErrorCode != 0 {
		t.Fatalf("empty list: %+v", a)
	}
}
