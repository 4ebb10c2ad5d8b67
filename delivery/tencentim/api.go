package tencentim

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"time"
	"unicode/utf8"
)

// MaxMessageBytes is Tencent's limit on one message (12 KB): Data, Desc,
// Ext and CloudCustomData together, as the fake counts them. The client
// refuses a larger message itself (ClassContent, permanent) instead of
// spending a call and a share of the group's 40 messages/s on it.
const MaxMessageBytes = 12 * 1024

func messageBytes(e CustomElem, cloud string) int {
	return len(e.Data) + len(e.Desc) + len(e.Ext) + len(cloud)
}

func tooLarge(api string, e CustomElem, cloud string) error {
	if n := messageBytes(e, cloud); n > MaxMessageBytes {
		return &Error{API: api, Class: ClassContent, Reason: fmt.Sprintf("message of %d bytes is over the %d-byte limit", n, MaxMessageBytes)}
	}
	return nil
}

// CustomElem is a TIMCustomElem's content. Tencent allows one per message.
type CustomElem struct {
	Data  string `json:"Data"`
	Desc  string `json:"Desc,omitempty"`
	Ext   string `json:"Ext,omitempty"`
	Sound string `json:"Sound,omitempty"`
}

type msgElem struct {
	MsgType    string     `json:"MsgType"`
	MsgContent CustomElem `json:"MsgContent"`
}

func customBody(e CustomElem) []msgElem {
	return []msgElem{{MsgType: "TIMCustomElem", MsgContent: e}}
}

// EventRandoms derives a message's MsgSeq and MsgRandom (C2C) or Random
// (group, the first value) from an event id, so a retry of the same event
// carries the same values and falls into Tencent's dedupe window (120 s
// C2C, 5 min group) instead of reaching users twice.
func EventRandoms(eventID string) (seq, random uint32) {
	h := sha256.Sum256([]byte(eventID))
	return binary.BigEndian.Uint32(h[0:4]), binary.BigEndian.Uint32(h[4:8])
}

// GroupMessage is one send_group_msg call.
type GroupMessage struct {
	GroupID string
	// Random identifies the message for Tencent's 5-minute dedupe: derive
	// it from the event id(s) (EventRandoms).
	Random uint32
	// FromAccount: "" = the configured FromAccount (or the admin).
	FromAccount     string
	Priority        string // High | Normal | Low | Lowest; "" = Tencent's default
	Elem            CustomElem
	CloudCustomData string
}

// GroupSendResult is what Tencent returned for an accepted group message.
type GroupSendResult struct {
	MsgSeq  uint64
	MsgTime int64
}

type sendGroupReq struct {
	GroupID         string    `json:"GroupId"`
	Random          uint32    `json:"Random"`
	FromAccount     string    `json:"From_Account,omitempty"`
	MsgPriority     string    `json:"MsgPriority,omitempty"`
	MsgBody         []msgElem `json:"MsgBody"`
	CloudCustomData string    `json:"CloudCustomData,omitempty"`
}

type sendGroupResp struct {
	MsgTime       int64  `json:"MsgTime"`
	MsgSeq        uint64 `json:"MsgSeq"`
	MsgDropReason string `json:"MsgDropReason"`
}

// SendGroupMsg sends a custom-element message to a group. It waits for the
// group's budget (GroupRatePerSecond) and the API's (RatePerSecond) before
// calling, bounded by ctx. A message Tencent accepted but dropped by
// frequency control (MsgDropReason) is an ErrRateLimited error.
func (c *Client) SendGroupMsg(ctx context.Context, m GroupMessage) (GroupSendResult, error) {
	if m.GroupID == "" {
		return GroupSendResult{}, &Error{API: APISendGroupMsg, Class: ClassBadRequest, Reason: "empty group id"}
	}
	if err := tooLarge(APISendGroupMsg, m.Elem, m.CloudCustomData); err != nil {
		return GroupSendResult{}, err
	}
	from := m.FromAccount
	if from == "" {
		from = c.FromAccount()
	}
	if from != "" {
		if err := c.EnsureAccount(ctx, from); err != nil {
			return GroupSendResult{}, err
		}
	}
	release, err := c.groupSlot(ctx, m.GroupID)
	if err != nil {
		return GroupSendResult{}, err
	}
	defer func() { release() }()
	req := sendGroupReq{
		GroupID:         m.GroupID,
		Random:          m.Random,
		FromAccount:     from,
		MsgPriority:     m.Priority,
		MsgBody:         customBody(m.Elem),
		CloudCustomData: m.CloudCustomData,
	}
	var resp sendGroupResp
	err = c.call(ctx, APISendGroupMsg, req, &resp)
	if from != "" && ClassOf(err) == ClassAccountMissing {
		c.accounts.Remove(from)
		if err = c.EnsureAccount(ctx, from); err == nil {
			// The refused call may have counted at Tencent: the retry
			// takes a slot of its own.
			release()
			release = func() {}
			var again func()
			if again, err = c.groupSlot(ctx, m.GroupID); err == nil {
				release = again
				err = c.call(ctx, APISendGroupMsg, req, &resp)
			}
		}
	}
	if err != nil {
		return GroupSendResult{}, err
	}
	if resp.MsgDropReason != "" {
		return GroupSendResult{}, &Error{API: APISendGroupMsg, Class: ClassRateLimited, Retryable: true,
			Reason: "dropped by frequency control: " + shortReason(resp.MsgDropReason)}
	}
	return GroupSendResult{MsgSeq: resp.MsgSeq, MsgTime: resp.MsgTime}, nil
}

// C2CMessage is one openim/sendmsg call.
type C2CMessage struct {
	ToAccount string
	// FromAccount: "" = the configured FromAccount (or the admin).
	FromAccount string
	// MsgSeq and MsgRandom are Tencent's 120 s dedupe key (with the
	// sender and the content): derive both from the event id.
	MsgSeq          uint32
	MsgRandom       uint32
	Elem            CustomElem
	CloudCustomData string
	// MsgLifeTime is the offline retention in seconds; 0 = Tencent's
	// default (7 days).
	MsgLifeTime int
}

// C2CSendResult is what Tencent returned for an accepted C2C message.
type C2CSendResult struct {
	MsgKey  string
	MsgTime int64
}

type sendMsgReq struct {
	SyncOtherMachine int       `json:"SyncOtherMachine"`
	FromAccount      string    `json:"From_Account,omitempty"`
	ToAccount        string    `json:"To_Account"`
	MsgLifeTime      int       `json:"MsgLifeTime,omitempty"`
	MsgSeq           uint32    `json:"MsgSeq"`
	MsgRandom        uint32    `json:"MsgRandom"`
	MsgBody          []msgElem `json:"MsgBody"`
	CloudCustomData  string    `json:"CloudCustomData,omitempty"`
}

type sendMsgResp struct {
	MsgTime int64  `json:"MsgTime"`
	MsgKey  string `json:"MsgKey"`
}

// SendC2C sends a custom-element message to one user. The receiver (and a
// non-admin sender) is imported first unless this client already did; if
// Tencent still says the account is missing (it was deleted, or the cache
// is stale) the accounts are imported again and the send is retried once.
func (c *Client) SendC2C(ctx context.Context, m C2CMessage) (C2CSendResult, error) {
	if m.ToAccount == "" {
		return C2CSendResult{}, &Error{API: APISendMsg, Class: ClassBadRequest, Reason: "empty to_account"}
	}
	if err := tooLarge(APISendMsg, m.Elem, m.CloudCustomData); err != nil {
		return C2CSendResult{}, err
	}
	from := m.FromAccount
	if from == "" {
		from = c.FromAccount()
	}
	ensure := func() error {
		if from != "" {
			if err := c.EnsureAccount(ctx, from); err != nil {
				return err
			}
		}
		return c.EnsureAccount(ctx, m.ToAccount)
	}
	if err := ensure(); err != nil {
		return C2CSendResult{}, err
	}
	req := sendMsgReq{
		// 2: the notice is not a conversation of the sender's; don't sync
		// it to the sender's devices.
		SyncOtherMachine: 2,
		FromAccount:      from,
		ToAccount:        m.ToAccount,
		MsgLifeTime:      m.MsgLifeTime,
		MsgSeq:           m.MsgSeq,
		MsgRandom:        m.MsgRandom,
		MsgBody:          customBody(m.Elem),
		CloudCustomData:  m.CloudCustomData,
	}
	var resp sendMsgResp
	err := c.call(ctx, APISendMsg, req, &resp)
	if ClassOf(err) == ClassAccountMissing {
		c.log.Info("tencent im account missing; importing and retrying once", "api", APISendMsg, "code", CodeOf(err))
		c.accounts.Remove(m.ToAccount)
		if from != "" {
			c.accounts.Remove(from)
		}
		if err = ensure(); err == nil {
			err = c.call(ctx, APISendMsg, req, &resp)
		}
	}
	if err != nil {
		return C2CSendResult{}, err
	}
	return C2CSendResult{MsgKey: resp.MsgKey, MsgTime: resp.MsgTime}, nil
}

type importReq struct {
	UserID  string `json:"UserID"`
	Nick    string `json:"Nick,omitempty"`
	FaceURL string `json:"FaceUrl,omitempty"`
}

// ImportAccount imports (or re-imports: Tencent makes it idempotent) a
// user account.
func (c *Client) ImportAccount(ctx context.Context, userID, nick string) error {
	if userID == "" || len(userID) > 32 {
		return &Error{API: APIAccountImport, Class: ClassBadRequest, Reason: "user id must be 1..32 bytes"}
	}
	if err := c.call(ctx, APIAccountImport, importReq{UserID: userID, Nick: nick}, nil); err != nil {
		return err
	}
	c.accounts.Add(userID)
	return nil
}

// EnsureAccount imports userID unless this client has already imported it.
func (c *Client) EnsureAccount(ctx context.Context, userID string) error {
	if userID == c.cfg.AdminIdentifier || c.accounts.Has(userID) {
		return nil
	}
	return c.ImportAccount(ctx, userID, "")
}

// Group describes a group to create.
type Group struct {
	GroupID string
	Type    string // "" = the configured GroupType
	Name    string // ≤ 30 bytes
	// OwnerAccount: "" = no owner (the app admin manages it). A non-empty
	// owner is imported first.
	OwnerAccount string
}

type createGroupReq struct {
	OwnerAccount string `json:"Owner_Account,omitempty"`
	Type         string `json:"Type"`
	GroupID      string `json:"GroupId"`
	Name         string `json:"Name"`
}

// CreateGroup creates a group with a fixed id. A group that already exists
// (10021, 10025) is success, which makes the call idempotent.
func (c *Client) CreateGroup(ctx context.Context, g Group) error {
	if g.Type == "" {
		g.Type = c.cfg.GroupType
	}
	if g.OwnerAccount != "" {
		if err := c.EnsureAccount(ctx, g.OwnerAccount); err != nil {
			return err
		}
	}
	err := c.call(ctx, APICreateGroup, createGroupReq{
		OwnerAccount: g.OwnerAccount, Type: g.Type, GroupID: g.GroupID, Name: g.Name,
	}, nil)
	if code := CodeOf(err); code == 10021 || code == 10025 {
		return nil
	}
	return err
}

type deleteMemberReq struct {
	GroupID string   `json:"GroupId"`
	Silence int      `json:"Silence"`
	Reason  string   `json:"Reason,omitempty"`
	Members []string `json:"MemberToDel_Account"`
}

// DeleteGroupMember removes users from a group (≤ 100 per call). Silence
// is set so only the removed users are told. A non-member is success on
// Tencent's side already. An AVChatRoom refuses it with 10004: its
// members are removed by a ban (BanGroupMember).
func (c *Client) DeleteGroupMember(ctx context.Context, groupID string, userIDs []string, reason string) error {
	if len(userIDs) == 0 || len(userIDs) > 100 {
		return &Error{API: APIDeleteGroupMember, Class: ClassBadRequest, Reason: "1..100 members per call"}
	}
	return c.call(ctx, APIDeleteGroupMember, deleteMemberReq{
		GroupID: groupID, Silence: 1, Reason: reason, Members: userIDs,
	}, nil)
}

type destroyGroupReq struct {
	GroupID string `json:"GroupId"`
}

// DestroyGroup dismisses a group. A group already gone (10010) is success.
func (c *Client) DestroyGroup(ctx context.Context, groupID string) error {
	err := c.call(ctx, APIDestroyGroup, destroyGroupReq{GroupID: groupID}, nil)
	if CodeOf(err) == 10010 {
		return nil
	}
	return err
}

// MaxBanMembers is ban_group_member's cap on accounts per call.
const MaxBanMembers = 20

type banMemberReq struct {
	GroupID     string   `json:"GroupId"`
	Members     []string `json:"Members_Account"`
	Duration    uint32   `json:"Duration"`
	Description string   `json:"Description,omitempty"`
}

// BanGroupMember bans users from a group for seconds (1..2^32-1):
// Tencent removes them, and while the ban lasts they neither receive the
// group's messages nor enter it again. It is how an AVChatRoom, which
// refuses delete_group_member, loses a member. Banning again replaces
// the duration, so callers pass what is left of the ban, not its length.
// description (≤ 1000 bytes, cut on a UTF-8 boundary) is shown to them.
// Tencent requires the feature to be switched on in its console (group
// configuration, "ban members of audio-video groups") and a plan that
// has it; without it the call fails and the caller's retries wait for
// the operator.
func (c *Client) BanGroupMember(ctx context.Context, groupID string, userIDs []string, seconds int64, description string) error {
	if len(userIDs) == 0 || len(userIDs) > MaxBanMembers {
		return &Error{API: APIBanGroupMember, Class: ClassBadRequest, Reason: "1..20 members per call"}
	}
	if seconds <= 0 || seconds > math.MaxUint32 {
		return &Error{API: APIBanGroupMember, Class: ClassBadRequest, Reason: "duration must be 1..4294967295 seconds"}
	}
	return c.call(ctx, APIBanGroupMember, banMemberReq{
		GroupID: groupID, Members: userIDs, Duration: uint32(seconds), Description: cutUTF8(description, 1000),
	}, nil)
}

type unbanMemberReq struct {
	GroupID string   `json:"GroupId"`
	Members []string `json:"Members_Account"`
}

// UnbanGroupMember lifts users' group member ban (Tencent's
// "Unbanning Group Members", unban_group_member, up to 20 accounts): they
// may enter the group and receive its messages again. A user who is not
// banned is success.
func (c *Client) UnbanGroupMember(ctx context.Context, groupID string, userIDs []string) error {
	if len(userIDs) == 0 || len(userIDs) > MaxBanMembers {
		return &Error{API: APIUnbanGroupMember, Class: ClassBadRequest, Reason: "1..20 members per call"}
	}
	return c.call(ctx, APIUnbanGroupMember, unbanMemberReq{GroupID: groupID, Members: userIDs}, nil)
}

// MaxMuteMembers is forbid_send_msg's cap on accounts per call.
const MaxMuteMembers = 500

type forbidSendReq struct {
	GroupID  string   `json:"GroupId"`
	Members  []string `json:"Members_Account"`
	MuteTime uint32   `json:"MuteTime"`
}

// ForbidSendMsg mutes users in a group for seconds (Tencent's member
// mute: they stay in the group and receive its messages, but cannot send
// to it); seconds 0 lifts the mute. Muting again replaces the end, so
// callers pass what is left of the mute, not its length. Every group
// type takes it, AVChatRoom included.
func (c *Client) ForbidSendMsg(ctx context.Context, groupID string, userIDs []string, seconds int64) error {
	if len(userIDs) == 0 || len(userIDs) > MaxMuteMembers {
		return &Error{API: APIForbidSendMsg, Class: ClassBadRequest, Reason: "1..500 members per call"}
	}
	if seconds < 0 || seconds > math.MaxUint32 {
		return &Error{API: APIForbidSendMsg, Class: ClassBadRequest, Reason: "mute time must be 0..4294967295 seconds"}
	}
	return c.call(ctx, APIForbidSendMsg, forbidSendReq{GroupID: groupID, Members: userIDs, MuteTime: uint32(seconds)}, nil)
}

// cutUTF8 cuts s to at most n bytes on a rune boundary.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// MaxBanListPage is get_group_ban_member's cap on entries per page.
const MaxBanListPage = 100

// maxBanListPages bounds one listing: 100 000 bans, far above any room's,
// so a server that never ends its list cannot keep the caller forever.
const maxBanListPages = 1000

// BannedMember is one entry of a group's ban list.
type BannedMember struct {
	UserID string
	Until  time.Time // whole seconds, as Tencent reports it
}

type banListReq struct {
	GroupID string `json:"GroupId"`
	Limit   int    `json:"Limit"`
	Offset  int    `json:"Offset"`
}

type banListResp struct {
	BannedAccountList []struct {
		MemberAccount string `json:"Member_Account"`
		BannedUntil   int64  `json:"BannedUntil"`
	} `json:"BannedAccountList"`
	NextOffset int `json:"NextOffset"`
}

// GetGroupBanMembers lists a group's banned members (Tencent's "Getting
// the List of Banned Group Members", get_group_ban_member, documented for
// AVChatRoom), paging by NextOffset until it is 0. Each page is one call
// with the client's deadline and rate budget; ctx bounds the whole
// listing. A NextOffset that does not move forward is an error (retryable:
// the list changed under the paging, or the server misbehaves) rather
// than a loop.
func (c *Client) GetGroupBanMembers(ctx context.Context, groupID string) ([]BannedMember, error) {
	if groupID == "" {
		return nil, &Error{API: APIGetGroupBanMember, Class: ClassBadRequest, Reason: "empty group id"}
	}
	var out []BannedMember
	offset := 0
	for range maxBanListPages {
		var resp banListResp
		if err := c.call(ctx, APIGetGroupBanMember, banListReq{GroupID: groupID, Limit: MaxBanListPage, Offset: offset}, &resp); err != nil {
			return nil, err
		}
		for _, b := range resp.BannedAccountList {
			out = append(out, BannedMember{UserID: b.MemberAccount, Until: time.Unix(b.BannedUntil, 0)})
		}
		if resp.NextOffset == 0 {
			return out, nil
		}
		if resp.NextOffset <= offset {
			return nil, &Error{API: APIGetGroupBanMember, Class: ClassUnknown, Retryable: true,
				Reason: fmt.Sprintf("NextOffset %d does not move past %d", resp.NextOffset, offset)}
		}
		offset = resp.NextOffset
	}
	return nil, &Error{API: APIGetGroupBanMember, Class: ClassUnknown, Retryable: true,
		Reason: fmt.Sprintf("ban list longer than %d pages", maxBanListPages)}
}
