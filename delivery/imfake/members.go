package imfake

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hyapp/roomcell/delivery/tencentim"
)

// What the client SDK's joinGroup gets from the fake (EnterGroup).
var (
	ErrNoGroup = errors.New("imfake: group not found (10010)")
	ErrBanned  = errors.New("imfake: banned from the group")
)

// viewer is one user's presence in a group as its client SDK sees it:
// the spans of the group's MsgSeq it was in the group for (to 0: still
// in). Only users a test put in through EnterGroup have one.
type viewer struct {
	spans []span
}

// span: the messages with from < MsgSeq <= to, or all after from while open.
type span struct {
	from, to uint64
	open     bool
}

func (v *viewer) in() bool { return len(v.spans) > 0 && v.spans[len(v.spans)-1].open }

func (v *viewer) leave(seq uint64) {
	if v.in() {
		last := &v.spans[len(v.spans)-1]
		last.to, last.open = seq, false
	}
}

// leaveLocked ends user's presence in group gid at its current seq.
// Guarded by mu.
func (s *Server) leaveLocked(gid, user string, seq uint64) {
	if v := s.viewers[gid][user]; v != nil {
		v.leave(seq)
	}
}

// EnterGroup is the client SDK's joinGroup for userID: an AVChatRoom (or
// any group) takes anyone who is not banned; a banned user is refused
// (ErrBanned) until the ban ends, as Tencent refuses them. From then on
// the user receives the group's messages (Received) until removed,
// banned or the group is destroyed.
func (s *Server) EnterGroup(groupID, userID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[groupID]
	if g == nil {
		return ErrNoGroup
	}
	if until, ok := g.banned[userID]; ok && s.now().Before(until) {
		return fmt.Errorf("%w until %s", ErrBanned, until.Format(time.RFC3339))
	}
	if g.Type != "AVChatRoom" {
		g.addMember(userID)
	}
	vs := s.viewers[groupID]
	if vs == nil {
		vs = map[string]*viewer{}
		s.viewers[groupID] = vs
	}
	v := vs[userID]
	if v == nil {
		v = &viewer{}
		vs[userID] = v
	}
	if !v.in() {
		v.spans = append(v.spans, span{from: g.Seq, open: true})
	}
	return nil
}

// InGroup reports whether userID, put in by EnterGroup, is still in the
// group (not removed, banned, or the group destroyed).
func (s *Server) InGroup(groupID, userID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.viewers[groupID][userID]
	return v != nil && v.in() && s.groups[groupID] != nil
}

// Received returns the group messages userID got while in the group
// (EnterGroup until removed, banned or destroyed), in order.
func (s *Server) Received(groupID, userID string) []Message {
	s.mu.Lock()
	var spans []span
	if v := s.viewers[groupID][userID]; v != nil {
		spans = slices.Clone(v.spans)
	}
	s.mu.Unlock()
	return s.filter(func(m Message) bool {
		if m.Kind != "group" || m.GroupID != groupID {
			return false
		}
		for _, sp := range spans {
			if m.MsgSeq > sp.from && (sp.open || m.MsgSeq <= sp.to) {
				return true
			}
		}
		return false
	})
}

// BannedUntil returns when userID's ban from the group ends, if banned.
func (s *Server) BannedUntil(groupID, userID string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[groupID]
	if g == nil {
		return time.Time{}, false
	}
	until, ok := g.banned[userID]
	return until, ok && s.now().Before(until)
}

// banGroupMember is Tencent's group member ban: the members are removed
// and, for Duration seconds, neither receive the group's messages nor
// enter it again. Banning again replaces the end. Tencent documents it
// for AVChatRoom (newer pages: every type); the fake takes any type.
func (s *Server) banGroupMember(body []byte) (map[string]any, *apiError) {
	var req struct {
		GroupID     string   `json:"GroupId"`
		Members     []string `json:"Members_Account"`
		Duration    *int64   `json:"Duration"`
		Description string   `json:"Description"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fail(10004, "json fields have the wrong types")
	}
	if len(req.Members) == 0 || len(req.Members) > tencentim.MaxBanMembers {
		return nil, fail(10004, "Members_Account must hold 1..20 accounts")
	}
	if req.Duration == nil || *req.Duration <= 0 || *req.Duration > 1<<32-1 {
		return nil, fail(10004, "Duration must be 1..4294967295 seconds")
	}
	if len(req.Description) > 1000 {
		return nil, fail(10004, "Description is over 1000 bytes")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[req.GroupID]
	if g == nil {
		return nil, fail(10010, "group not found")
	}
	until := s.now().Add(time.Duration(*req.Duration) * time.Second)
	if g.banned == nil {
		g.banned = map[string]time.Time{}
	}
	for _, m := range req.Members {
		g.banned[m] = until
		g.removeMember(m)
		s.leaveLocked(g.ID, m, g.Seq)
	}
	return map[string]any{}, nil
}

// unbanGroupMember is Tencent's unban_group_member: the members' bans
// end now, so they may enter the group again (EnterGroup); a member who
// is not banned is success.
func (s *Server) unbanGroupMember(body []byte) (map[string]any, *apiError) {
	var req struct {
		GroupID string   `json:"GroupId"`
		Members []string `json:"Members_Account"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fail(10004, "json fields have the wrong types")
	}
	if len(req.Members) == 0 || len(req.Members) > tencentim.MaxBanMembers {
		return nil, fail(10004, "Members_Account must hold 1..20 accounts")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[req.GroupID]
	if g == nil {
		return nil, fail(10010, "group not found")
	}
	for _, m := range req.Members {
		delete(g.banned, m)
	}
	return map[string]any{}, nil
}

// MutedUntil returns when userID's mute in the group ends, if muted now.
func (s *Server) MutedUntil(groupID, userID string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[groupID]
	if g == nil {
		return time.Time{}, false
	}
	until, ok := g.muted[userID]
	return until, ok && s.now().Before(until)
}

// forbidSendMsg is Tencent's member mute: for MuteTime seconds the
// members cannot send to the group (they stay in it and receive); 0 lifts
// it. Muting again replaces the end. A non-member is muted all the same
// (an AVChatRoom has no member list to check).
func (s *Server) forbidSendMsg(body []byte) (map[string]any, *apiError) {
	var req struct {
		GroupID  string   `json:"GroupId"`
		Members  []string `json:"Members_Account"`
		MuteTime *int64   `json:"MuteTime"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fail(10004, "json fields have the wrong types")
	}
	if len(req.Members) == 0 || len(req.Members) > tencentim.MaxMuteMembers {
		return nil, fail(10004, "Members_Account must hold 1..500 accounts")
	}
	if req.MuteTime == nil || *req.MuteTime < 0 || *req.MuteTime > 1<<32-1 {
		return nil, fail(10004, "MuteTime must be 0..4294967295 seconds")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[req.GroupID]
	if g == nil {
		return nil, fail(10010, "group not found")
	}
	for _, m := range req.Members {
		if *req.MuteTime == 0 {
			delete(g.muted, m)
			continue
		}
		if g.muted == nil {
			g.muted = map[string]time.Time{}
		}
		g.muted[m] = s.now().Add(time.Duration(*req.MuteTime) * time.Second)
	}
	return map[string]any{}, nil
}

// getGroupBanMember is Tencent's get_group_ban_member: the bans in force,
// Limit (1..100) from Offset, ordered by account so paging is stable;
// NextOffset is where the next page starts, 0 once the list is complete.
// BannedUntil is unix seconds.
func (s *Server) getGroupBanMember(body []byte) (map[string]any, *apiError) {
	var req struct {
		GroupID string `json:"GroupId"`
		Limit   *int   `json:"Limit"`
		Offset  int    `json:"Offset"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fail(10004, "json fields have the wrong types")
	}
	if req.Limit == nil || *req.Limit <= 0 || *req.Limit > tencentim.MaxBanListPage {
		return nil, fail(10004, "Limit must be 1..100")
	}
	if req.Offset < 0 {
		return nil, fail(10004, "Offset must not be negative")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[req.GroupID]
	if g == nil {
		return nil, fail(10010, "group not found")
	}
	now := s.now()
	users := make([]string, 0, len(g.banned))
	for u, until := range g.banned {
		if now.Before(until) {
			users = append(users, u)
		}
	}
	slices.Sort(users)
	list := []map[string]any{}
	next := 0
	for i := req.Offset; i < len(users); i++ {
		if len(list) == *req.Limit {
			next = i
			break
		}
		list = append(list, map[string]any{"Member_Account": users[i], "BannedUntil": g.banned[users[i]].Unix()})
	}
	return map[string]any{"BannedAccountList": list, "NextOffset": next}, nil
}
