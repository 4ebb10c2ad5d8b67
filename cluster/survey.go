package cluster

import (
	"context"
	"errors"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/ownership"
)

// reporterName is the actor every member runs to answer MemberProbe.
const reporterName = "roomcell-member"

// probeTimeout bounds one member's answer to a probe.
const probeTimeout = 2 * time.Second

// PeerReport is one member's answer to a probe, or why it gave none.
type PeerReport struct {
	Address string
	// Self is the member that ran the survey (answered without the
	// network).
	Self   bool
	Report *v1.MemberReport
	Err    error
}

// ErrNoAnswer is a member that did not answer a probe in time.
var ErrNoAnswer = errors.New("cluster: member did not answer")

// spawnReporter starts the probe-answering actor under its well-known
// name. Reports are built from atomics and the view, never from the
// library's unlocked state.
func (m *Member) spawnReporter() error {
	props := actor.PropsFromFunc(func(ctx actor.Context) {
		if p, ok := ctx.Message().(*v1.MemberProbe); ok {
			ctx.Respond(m.report(p))
		}
	})
	_, err := m.System.Root.SpawnNamed(props, reporterName)
	return err
}

// report describes this member; with p.Identity it also names the owner
// this member would place that grain on.
func (m *Member) report(p *v1.MemberProbe) *v1.MemberReport {
	ms := m.view.get()
	r := &v1.MemberReport{
		MemberId: m.provider.SelfID(), NodeId: m.nodeID, Address: m.Address(), Status: m.Status(),
		Activations: map[string]int32{}, StartedAtMs: m.startedAt.UnixMilli(), Rejoins: m.provider.Rejoins(),
		Provider: m.cfg.Provider,
	}
	for _, mm := range ms {
		r.MemberAddresses = append(r.MemberAddresses, mm.Address())
	}
	for _, k := range m.kinds {
		r.Activations[k] = m.activations(k)
	}
	if m.Cluster.Remote != nil {
		r.Blocked = blockedMembers(m.Cluster)
		sort.Strings(r.Blocked)
	}
	if p.GetIdentity() != "" {
		r.OwnerAddress = m.Owner(p.GetKind(), p.GetIdentity())
	}
	return r
}

// Owner is the address this member places a grain on right now: the
// owner of its shard in the ownership table ("" during a handover).
func (m *Member) Owner(_, identity string) string {
	return m.ownership.Owner(identity)
}

// Ownership is the member's ownership table.
func (m *Member) Ownership() ownership.Table { return m.ownership }

// Survey asks every member in this member's view (itself included) for a
// report, in parallel, each bounded by ctx and probeTimeout. With a kind
// and identity each report also names that grain's owner as the member
// sees it. Results are sorted by address.
func (m *Member) Survey(ctx context.Context, kind, identity string) []PeerReport {
	probe := &v1.MemberProbe{Kind: kind, Identity: identity}
	ms := m.view.get()
	self := m.Address()
	out := make([]PeerReport, len(ms))
	var wg sync.WaitGroup
	for i, mm := range ms {
		addr := mm.Address()
		out[i].Address = addr
		if addr == self {
			out[i].Self = true
			out[i].Report = m.report(probe)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i].Report, out[i].Err = m.ask(ctx, addr, probe)
		}()
	}
	wg.Wait()
	if !slices.ContainsFunc(out, func(p PeerReport) bool { return p.Self }) {
		// Not in its own view (joining, draining, dropped): still report.
		out = append(out, PeerReport{Address: self, Self: true, Report: m.report(probe)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Address < out[j].Address })
	return out
}

func (m *Member) ask(ctx context.Context, addr string, probe *v1.MemberProbe) (*v1.MemberReport, error) {
	d := probeTimeout
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl))
	}
	if d <= 0 {
		return nil, ErrNoAnswer
	}
	res, err := m.System.Root.RequestFuture(actor.NewPID(addr, reporterName), probe, d).Result()
	if err != nil {
		return nil, errors.Join(ErrNoAnswer, err)
	}
	r, ok := res.(*v1.MemberReport)
	if !ok {
		return nil, errors.Join(ErrNoAnswer, errors.New("unexpected answer"))
	}
	return r, nil
}

// peersSeeMe reports whether every other member that answers lists this
// member's address, and which ones do not.
func peersSeeMe(self string, reports []PeerReport) (bool, []string) {
	var missing []string
	for _, r := range reports {
		if r.Self || r.Err != nil {
			continue
		}
		if !slices.Contains(r.Report.GetMemberAddresses(), self) {
			missing = append(missing, r.Report.GetNodeId()+"@"+r.Address)
		}
	}
	return len(missing) == 0, missing
}

// listedBy names the other members that answer and still list self.
func listedBy(self string, reports []PeerReport) []string {
	var out []string
	for _, r := range reports {
		if !r.Self && r.Err == nil && slices.Contains(r.Report.GetMemberAddresses(), self) {
			out = append(out, r.Report.GetNodeId()+"@"+r.Address)
		}
	}
	return out
}
