package roomim

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"time"

	"github.com/hyapp/roomcell/delivery/tencentim"
)

// BanOrder bans one user in the IM group for Seconds from now.
type BanOrder struct {
	UserID  string
	Seconds int64
}

// BanPlan is what puts an IM group's ban list back in line with the
// room's: bans to set (missing in IM, or ending earlier there) and users
// to unban (banned in IM, not in the room). Both sorted by user.
type BanPlan struct {
	Ban   []BanOrder
	Unban []string
}

// Empty reports whether the lists already agree.
func (p BanPlan) Empty() bool { return len(p.Ban) == 0 && len(p.Unban) == 0 }

// banSlack: Tencent reports a ban's end in whole seconds and a ban is set
// for whole seconds rounded up, so an IM end up to a second before the
// room's is the same ban, not drift; without it every run would re-ban.
const banSlack = time.Second

// DiffBans compares the room's bans (user → end, unix ms) with the IM
// group's list at now. A room ban already over is no ban. A user the room
// bans is banned again for what is left of it when IM lacks the ban or
// its end differs from the room's by more than banSlack (either way:
// banning again replaces the duration, which is also how a ban the room
// shortened gets shorter in IM). A user IM bans and the room does not is
// unbanned.
func DiffBans(roomBans map[string]int64, im []tencentim.BannedMember, now time.Time) BanPlan {
	var plan BanPlan
	nowMs := now.UnixMilli()
	imUntil := make(map[string]time.Time, len(im))
	for _, b := range im {
		if b.Until.After(now) {
			imUntil[b.UserID] = b.Until
		}
	}
	for user, untilMs := range roomBans {
		if untilMs <= nowMs {
			continue
		}
		until := time.UnixMilli(untilMs)
		if got, ok := imUntil[user]; ok && got.Sub(until).Abs() <= banSlack {
			continue
		}
		plan.Ban = append(plan.Ban, BanOrder{UserID: user, Seconds: (untilMs - nowMs + 999) / 1000})
	}
	for user := range imUntil {
		if untilMs, ok := roomBans[user]; !ok || untilMs <= nowMs {
			plan.Unban = append(plan.Unban, user)
		}
	}
	slices.SortFunc(plan.Ban, func(a, b BanOrder) int { return cmp.Compare(a.UserID, b.UserID) })
	slices.Sort(plan.Unban)
	return plan
}

// ReconcileBans puts the IM group of a room back in line with the room's
// bans in force (user → end, unix ms), as read from the room: it lists
// the group's bans, diffs them (DiffBans) and applies the plan, up to 20
// accounts a call. It is the repair for an outage longer than the outbox
// keeps, and safe to repeat: a second run finds nothing to do. Only an
// AVChatRoom carries room bans (banInGroup); other types get an empty
// plan. The plan returned is what was applied; on an error, part of it
// may have been.
func (p *Publisher) ReconcileBans(ctx context.Context, appCode, roomID string, roomBans map[string]int64) (BanPlan, error) {
	if p.groupType != "AVChatRoom" {
		return BanPlan{}, nil
	}
	gid := GroupID(appCode, roomID)
	im, err := p.client.GetGroupBanMembers(ctx, gid)
	if err != nil {
		return BanPlan{}, err
	}
	plan := DiffBans(roomBans, im, p.now())
	for chunk := range slices.Chunk(plan.Unban, tencentim.MaxBanMembers) {
		if err := p.client.UnbanGroupMember(ctx, gid, chunk); err != nil {
			return plan, err
		}
	}
	// One call per duration: orders from one batch ban of the room share
	// their end, so they share a call.
	bySeconds := map[int64][]string{}
	for _, o := range plan.Ban {
		bySeconds[o.Seconds] = append(bySeconds[o.Seconds], o.UserID)
	}
	for _, secs := range slices.Sorted(maps.Keys(bySeconds)) {
		for chunk := range slices.Chunk(bySeconds[secs], tencentim.MaxBanMembers) {
			if err := p.client.BanGroupMember(ctx, gid, chunk, secs, "room ban"); err != nil {
				return plan, err
			}
		}
	}
	if !plan.Empty() {
		p.log.Info("im ban list reconciled", "group", gid, "banned", len(plan.Ban), "unbanned", len(plan.Unban))
	}
	return plan, nil
}
