package imfake

import "testing"

// A send_group_msg body earns the code of its first fault whichever way
// it is read (one pass for a well-formed body, field by field for the
// rest), and a well-formed one yields its custom element.
func TestGroupMsgFaultsKeepTheirCodes(t *testing.T) {
	const elem = `[{"MsgType":"TIMCustomElem","MsgContent":{"Data":"x","Desc":"d"}}]`
	for _, tc := range []struct {
		name, body string
		code       int
	}{
		{"ok", `{"GroupId":"g","Random":1,"MsgBody":` + elem + `}`, 0},
		{"ok with priority", `{"GroupId":"g","Random":1,"MsgPriority":"Low","MsgBody":` + elem + `}`, 0},
		// serve leaves the syntax check of this API to its decode.
		{"not json", `{"GroupId":`, 60003},
		{"GroupId a number", `{"GroupId":7,"Random":1,"MsgBody":` + elem + `}`, 10004},
		{"Random negative", `{"GroupId":"g","Random":-1,"MsgBody":` + elem + `}`, 10004},
		{"no GroupId", `{"Random":1,"MsgBody":` + elem + `}`, 10004},
		{"no Random", `{"GroupId":"g","MsgBody":` + elem + `}`, 10004},
		{"no Random, MsgBody an object", `{"GroupId":"g","MsgBody":{"MsgType":"TIMCustomElem"}}`, 10004},
		{"bad priority", `{"GroupId":"g","Random":1,"MsgPriority":"Urgent","MsgBody":` + elem + `}`, 10004},
		{"bad priority, MsgBody empty", `{"GroupId":"g","Random":1,"MsgPriority":"Urgent","MsgBody":[]}`, 10004},
		{"no MsgBody", `{"GroupId":"g","Random":1}`, 90002},
		{"MsgBody null", `{"GroupId":"g","Random":1,"MsgBody":null}`, 90002},
		{"MsgBody an object", `{"GroupId":"g","Random":1,"MsgBody":{"MsgType":"TIMCustomElem"}}`, 90002},
		{"MsgBody a string", `{"GroupId":"g","Random":1,"MsgBody":"x"}`, 90002},
		{"MsgBody empty", `{"GroupId":"g","Random":1,"MsgBody":[]}`, 90007},
		{"element of the wrong shape", `{"GroupId":"g","Random":1,"MsgBody":[{"MsgType":7}]}`, 90007},
		{"element not an object", `{"GroupId":"g","Random":1,"MsgBody":[1]}`, 90007},
		{"two elements", `{"GroupId":"g","Random":1,"MsgBody":[{"MsgType":"TIMCustomElem","MsgContent":{"Data":"x"}},{"MsgType":"TIMCustomElem","MsgContent":{"Data":"y"}}]}`, 90007},
		{"text element", `{"GroupId":"g","Random":1,"MsgBody":[{"MsgType":"TIMTextElem","MsgContent":{"Text":"x"}}]}`, 90007},
		{"no Data", `{"GroupId":"g","Random":1,"MsgBody":[{"MsgType":"TIMCustomElem","MsgContent":{"Desc":"d"}}]}`, 90007},
	} {
		req, e, aerr := decodeGroupMsg([]byte(tc.body))
		code := 0
		if aerr != nil {
			code = aerr.code
		}
		if code != tc.code {
			t.Errorf("%s: code %d, want %d", tc.name, code, tc.code)
			continue
		}
		if code == 0 && (req.GroupID != "g" || *req.Random != 1 || e.MsgContent.Data == nil || *e.MsgContent.Data != "x" || e.MsgContent.Desc != "d") {
			t.Errorf("%s: read %+v, element %+v", tc.name, req, e)
		}
	}
}
