// Package imfake is a fake Tencent Cloud IM REST server on loopback for
// tests and --dev: it checks the query string and the admin UserSig like
// Tencent does, implements the APIs roomcell calls with Tencent's rules
// (imported accounts for C2C, existing groups for sends, AVChatRoom member
// ops refused (10007 add, 10004 delete), member bans (ban_group_member:
// out of the group, no messages, no re-entry until the ban ends), member
// mutes (forbid_send_msg: MutedUntil), 12 KB
// limit, 120 s C2C and 5 min group dedupe windows, per-group MsgSeq), a
// client's presence in a group as its SDK would have it (EnterGroup,
// InGroup, Received: members.go), records every accepted message (GET /debug/messages,
// an HTML list at GET /, one log line each), and takes injected faults
// (error codes, HTTP statuses, delays, drops, a group rate limit). It is
// never a production path and never listens off loopback; it touches no
// roomcell state other than its own memory.
package imfake
