package imfake

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"strings"
	"time"
)

// Tencent's dedupe windows and rate limits, as its REST API documents them.
const (
	c2cDedupeWindow   = 120 * time.Second
	groupDedupeWindow = 5 * time.Minute
	maxMessageBytes   = 12 * 1024
	maxUserIDBytes    = 32
	maxGroupIDBytes   = 48
	maxGroupNameBytes = 30
)

var groupTypes = map[string]string{
	"Private": "Private", "Work": "Private",
	"Public":   "Public",
	"ChatRoom": "ChatRoom", "Meeting": "ChatRoom",
	"AVChatRoom": "AVChatRoom",
	"Community":  "Community",
}

type elem struct {
	MsgType    string `json:"MsgType"`
	MsgContent struct {
		Data  *string `json:"Data"`
		Desc  string  `json:"Desc"`
		Ext   string  `json:"Ext"`
		Sound string  `json:"Sound"`
	} `json:"MsgContent"`
}

// parseBody enforces MsgBody: an array of elements with at most one
// TIMCustomElem, which must carry Data. Only custom elements are accepted:
// roomcell sends nothing else.
func parseBody(raw json.RawMessage) (elem, *apiError) {
	var body []elem
	if len(raw) == 0 || raw[0] != '[' {
		return elem{}, fail(90002, "MsgBody must be an array")
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		return elem{}, fail(90007, "MsgBody elements invalid")
	}
	return checkElems(body)
}

// checkElems is parseBody's check of the elements read.
func checkElems(body []elem) (elem, *apiError) {
	if len(body) == 0 {
		return elem{}, fail(90007, "MsgBody elements invalid")
	}
	if len(body) != 1 || body[0].MsgType != "TIMCustomElem" || body[0].MsgContent.Data == nil {
		return elem{}, fail(90007, "expected exactly one TIMCustomElem with Data")
	}
	return body[0], nil
}

func msgSize(e elem, cloud string) int {
	return len(*e.MsgContent.Data) + len(e.MsgContent.Desc) + len(e.MsgContent.Ext) + len(cloud)
}

func (s *Server) accountImport(body []byte) (map[string]any, *apiError) {
	var req struct {
		UserID string `json:"UserID"`
	}
	_ = json.Unmarshal(body, &req)
	if req.UserID == "" || len(req.UserID) > maxUserIDBytes {
		return nil, fail(70402, "UserID must be 1..32 bytes")
	}
	s.mu.Lock()
	s.accounts[req.UserID] = true
	s.mu.Unlock()
	return map[string]any{}, nil
}

// exists: admins are accounts without an import.
func (s *Server) exists(id string) bool { return s.accounts[id] || s.admins[id] }

func (s *Server) sendMsg(body []byte) (map[string]any, *apiError) {
	var req struct {
		FromAccount     string          `json:"From_Account"`
		ToAccount       string          `json:"To_Account"`
		MsgSeq          *uint32         `json:"MsgSeq"`
		MsgRandom       *uint32         `json:"MsgRandom"`
		MsgBody         json.RawMessage `json:"MsgBody"`
		CloudCustomData string          `json:"CloudCustomData"`
		MsgLifeTime     *int            `json:"MsgLifeTime"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fail(90001, "json fields have the wrong types")
	}
	if req.ToAccount == "" || req.MsgRandom == nil {
		return nil, fail(90001, "To_Account and MsgRandom are required")
	}
	if req.MsgLifeTime != nil && (*req.MsgLifeTime < 0 || *req.MsgLifeTime > 604800) {
		return nil, fail(90001, "MsgLifeTime out of range")
	}
	e, aerr := parseBody(req.MsgBody)
	if aerr != nil {
		return nil, aerr
	}
	if msgSize(e, req.CloudCustomData) > maxMessageBytes {
		return nil, fail(93000, "message body too large")
	}
	from := req.FromAccount
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.exists(req.ToAccount) {
		return nil, fail(90012, "To_Account does not exist")
	}
	if from != "" && !s.exists(from) {
		return nil, fail(20003, "From_Account does not exist")
	}
	seq := rand.Uint32() // Tencent fills an absent MsgSeq with a random value
	if req.MsgSeq != nil {
		seq = *req.MsgSeq
	}
	now := s.now()
	key := c2cKey{from: from, seq: seq, random: *req.MsgRandom, contentCRC32: crc32.ChecksumIEEE(req.MsgBody)}
	if hit, ok := s.c2cDedupe.seen(key, now); ok {
		s.duplicates++
		return map[string]any{"MsgTime": hit.at.Unix(), "MsgKey": hit.msgKey}, nil
	}
	msgKey := fmt.Sprintf("%d_%d_%d", seq, *req.MsgRandom, now.Unix())
	s.c2cDedupe.record(key, dedupeHit{at: now, msgKey: msgKey})
	s.recordLocked(Message{
		Kind: "c2c", To: req.ToAccount, From: from, MsgSeq: uint64(seq), Random: *req.MsgRandom,
		Data: *e.MsgContent.Data, Desc: e.MsgContent.Desc, Ext: e.MsgContent.Ext,
		CloudCustomData: req.CloudCustomData, At: now,
	})
	return map[string]any{"MsgTime": now.Unix(), "MsgKey": msgKey}, nil
}

// groupMsg is send_group_msg's request with its MsgBody read as elements
// in the same pass (decodeGroupMsg).
type groupMsg struct {
	GroupID         string  `json:"GroupId"`
	Random          *uint32 `json:"Random"`
	FromAccount     string  `json:"From_Account"`
	MsgPriority     string  `json:"MsgPriority"`
	MsgBody         []elem  `json:"MsgBody"`
	CloudCustomData string  `json:"CloudCustomData"`
}

// decodeGroupMsg reads a send_group_msg body and checks it as Tencent
// does. A well-formed body is read in one pass (a room's every event is
// one of these: two passes over its body were most of the dev fake's
// cost per event); any other is read again as before, field by field,
// so its error code is the one its first fault earns.
func decodeGroupMsg(body []byte) (groupMsg, elem, *apiError) {
	var req groupMsg
	err := json.Unmarshal(body, &req)
	if _, syntax := errors.AsType[*json.SyntaxError](err); syntax {
		return req, elem{}, fail(60003, errInvalidJSON) // parsesWhole: serve did not check it
	}
	if err == nil && req.MsgBody != nil {
		if aerr := checkGroupMsg(req); aerr != nil {
			return req, elem{}, aerr
		}
		e, aerr := checkElems(req.MsgBody)
		return req, e, aerr
	}
	var raw struct {
		groupMsg
		MsgBody json.RawMessage `json:"MsgBody"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return req, elem{}, fail(10004, "json fields have the wrong types")
	}
	req = raw.groupMsg
	if aerr := checkGroupMsg(req); aerr != nil {
		return req, elem{}, aerr
	}
	e, aerr := parseBody(raw.MsgBody)
	return req, e, aerr
}

func checkGroupMsg(req groupMsg) *apiError {
	if req.GroupID == "" || req.Random == nil {
		return fail(10004, "GroupId and Random are required")
	}
	switch req.MsgPriority {
	case "", "High", "Normal", "Low", "Lowest":
	default:
		return fail(10004, "invalid MsgPriority")
	}
	return nil
}

func (s *Server) sendGroupMsg(body []byte) (map[string]any, *apiError) {
	req, e, aerr := decodeGroupMsg(body)
	if aerr != nil {
		return nil, aerr
	}
	if msgSize(e, req.CloudCustomData) > maxMessageBytes {
		return nil, fail(93000, "message body too large")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[req.GroupID]
	if g == nil {
		return nil, fail(10010, "group not found")
	}
	if req.FromAccount != "" && !s.exists(req.FromAccount) {
		return nil, fail(10019, "From_Account does not exist")
	}
	now := s.now()
	key := groupKey{group: g.ID, random: *req.Random}
	if hit, ok := s.groupDedupe.seen(key, now); ok {
		s.duplicates++
		return map[string]any{"MsgTime": hit.at.Unix(), "MsgSeq": hit.seq}, nil
	}
	if s.faults.dropNext > 0 {
		s.faults.dropNext--
		return map[string]any{"MsgTime": now.Unix(), "MsgDropReason": "MsgFreqCtrl"}, nil
	}
	if lim := s.faults.groupRate; lim > 0 {
		recent := s.groupSends[g.ID][:0]
		for _, t := range s.groupSends[g.ID] {
			if now.Sub(t) < time.Second {
				recent = append(recent, t)
			}
		}
		s.groupSends[g.ID] = recent
		if len(recent) >= lim {
			return nil, fail(10023, "group message frequency limit")
		}
		s.groupSends[g.ID] = append(recent, now)
	}
	g.Seq++
	s.groupDedupe.record(key, dedupeHit{at: now, seq: g.Seq})
	s.recordLocked(Message{
		Kind: "group", GroupID: g.ID, From: req.FromAccount, MsgSeq: g.Seq, Random: *req.Random,
		Priority: req.MsgPriority, Data: *e.MsgContent.Data, Desc: e.MsgContent.Desc, Ext: e.MsgContent.Ext,
		CloudCustomData: req.CloudCustomData, At: now,
	})
	return map[string]any{"MsgTime": now.Unix(), "MsgSeq": g.Seq}, nil
}

func validGroupID(id string) bool {
	if len(id) == 0 || len(id) > maxGroupIDBytes || strings.HasPrefix(id, "@TGS#") {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

func (s *Server) createGroup(body []byte) (map[string]any, *apiError) {
	var req struct {
		OwnerAccount string            `json:"Owner_Account"`
		Type         string            `json:"Type"`
		GroupID      string            `json:"GroupId"`
		Name         string            `json:"Name"`
		MemberList   []json.RawMessage `json:"MemberList"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fail(10004, "json fields have the wrong types")
	}
	typ, ok := groupTypes[req.Type]
	if !ok {
		return nil, fail(10004, "invalid group type")
	}
	if req.Name == "" || len(req.Name) > maxGroupNameBytes {
		return nil, fail(10004, "Name must be 1..30 bytes")
	}
	if typ == "AVChatRoom" && len(req.MemberList) > 0 {
		return nil, fail(10007, "AVChatRoom does not take MemberList")
	}
	if req.GroupID != "" && !validGroupID(req.GroupID) {
		return nil, fail(10015, "invalid GroupId")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if req.OwnerAccount != "" && !s.exists(req.OwnerAccount) {
		return nil, fail(10004, "invalid owner id")
	}
	id := req.GroupID
	if id == "" {
		s.autoGroupID++
		id = fmt.Sprintf("@TGS#%dFAKE", s.autoGroupID)
	}
	if g, ok := s.groups[id]; ok {
		if g.Owner == req.OwnerAccount {
			return nil, fail(10025, "group id already used by you")
		}
		return nil, fail(10021, "group id already used")
	}
	delete(s.viewers, id) // a group made again under a destroyed one's id starts empty
	s.groups[id] = &group{ID: id, Type: typ, Name: req.Name, Owner: req.OwnerAccount, ownerIn: req.OwnerAccount != ""}
	return map[string]any{"GroupId": id}, nil
}

func (s *Server) addGroupMember(body []byte) (map[string]any, *apiError) {
	var req struct {
		GroupID    string `json:"GroupId"`
		MemberList []struct {
			MemberAccount string `json:"Member_Account"`
		} `json:"MemberList"`
	}
	if err := json.Unmarshal(body, &req); err != nil || len(req.MemberList) == 0 || len(req.MemberList) > 20 {
		return nil, fail(10004, "MemberList must hold 1..20 members")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[req.GroupID]
	if g == nil {
		return nil, fail(10010, "group not found")
	}
	if g.Type == "AVChatRoom" {
		return nil, fail(10007, "AVChatRoom members join through the client SDK")
	}
	results := make([]map[string]any, 0, len(req.MemberList))
	for _, m := range req.MemberList {
		r := 1
		switch {
		case !s.exists(m.MemberAccount):
			r = 0
		case g.isMember(m.MemberAccount):
			r = 2
		default:
			g.addMember(m.MemberAccount)
		}
		results = append(results, map[string]any{"Member_Account": m.MemberAccount, "Result": r})
	}
	return map[string]any{"MemberList": results}, nil
}

func (s *Server) deleteGroupMember(body []byte) (map[string]any, *apiError) {
	var req struct {
		GroupID string   `json:"GroupId"`
		Members []string `json:"MemberToDel_Account"`
	}
	if err := json.Unmarshal(body, &req); err != nil || len(req.Members) == 0 || len(req.Members) > 100 {
		return nil, fail(10004, "MemberToDel_Account must hold 1..100 accounts")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[req.GroupID]
	if g == nil {
		return nil, fail(10010, "group not found")
	}
	if g.Type == "AVChatRoom" {
		return nil, fail(10004, "AVChatRoom does not support deleting members")
	}
	for _, m := range req.Members {
		g.removeMember(m) // a non-member is success, as on Tencent
		s.leaveLocked(g.ID, m, g.Seq)
	}
	return map[string]any{}, nil
}

func (s *Server) destroyGroup(body []byte) (map[string]any, *apiError) {
	var req struct {
		GroupID string `json:"GroupId"`
	}
	_ = json.Unmarshal(body, &req)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !validGroupID(req.GroupID) && !strings.HasPrefix(req.GroupID, "@TGS#") {
		return nil, fail(10015, "invalid GroupId")
	}
	g := s.groups[req.GroupID]
	if g == nil {
		return nil, fail(10010, "group not found")
	}
	for _, v := range s.viewers[g.ID] {
		v.leave(g.Seq)
	}
	delete(s.groups, req.GroupID)
	return map[string]any{}, nil
}
