package grpcapi

import (
	"context"
	"errors"
	"log/slog"
	"slices"

	"github.com/hyapp/roomcell/actors/roomgrain"
	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/cluster"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/room"
)

// ClusterView is what ClusterAdmin needs of this node's cluster member;
// *cluster.Member implements it.
type ClusterView interface {
	NodeID() string
	Provider() string
	// Survey asks every member this node sees for a report; with a kind
	// and identity each names the grain's owner as that member sees it.
	Survey(ctx context.Context, kind, identity string) []cluster.PeerReport
}

// ClusterAdminServer implements roomcell.v1.ClusterAdmin. It only reads:
// membership changes go through the provider (deploy, SIGTERM), never
// through this API.
type ClusterAdminServer struct {
	roomcellv1.UnimplementedClusterAdminServer
	view ClusterView
	log  *slog.Logger
}

// NewClusterAdminServer returns the server over this node's member.
func NewClusterAdminServer(view ClusterView) *ClusterAdminServer {
	return &ClusterAdminServer{view: view, log: slog.Default()}
}

// StatusUnreachable is the status of a member that did not answer.
const StatusUnreachable = "unreachable"

// Members implements roomcell.v1.ClusterAdmin.
func (s *ClusterAdminServer) Members(ctx context.Context, _ *roomcellv1.ClusterMembersRequest) (*roomcellv1.ClusterMembersReply, error) {
	reports := s.view.Survey(ctx, "", "")
	reply := &roomcellv1.ClusterMembersReply{NodeId: s.view.NodeID(), Provider: s.view.Provider(), ViewsAgree: true}
	var first []string
	seen := false
	for _, p := range reports {
		m := &roomcellv1.ClusterMember{Address: p.Address, AnsweredHere: p.Self}
		if p.Err != nil {
			m.Status, m.Error = StatusUnreachable, unreachableReason(p.Err)
			reply.Members = append(reply.Members, m)
			continue
		}
		r := p.Report
		m.MemberId, m.NodeId, m.Status = r.GetMemberId(), r.GetNodeId(), r.GetStatus()
		m.Rooms = r.GetActivations()[roomgrain.Kind]
		m.StartedAtMs, m.MembersSeen, m.Rejoins = r.GetStartedAtMs(), int32(len(r.GetMemberAddresses())), r.GetRejoins()
		reply.Members = append(reply.Members, m)
		if !seen {
			first, seen = r.GetMemberAddresses(), true
		} else if !slices.Equal(first, r.GetMemberAddresses()) {
			reply.ViewsAgree = false
		}
	}
	return reply, nil
}

// WhereIsRoom implements roomcell.v1.ClusterAdmin.
func (s *ClusterAdminServer) WhereIsRoom(ctx context.Context, req *roomcellv1.WhereIsRoomRequest) (*roomcellv1.WhereIsRoomReply, error) {
	if err := room.CheckID("app_code", req.GetAppCode()); err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	if err := room.CheckID("room_id", req.GetRoomId()); err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	reports := s.view.Survey(ctx, roomgrain.Kind, req.GetAppCode()+"/"+req.GetRoomId())
	reply := &roomcellv1.WhereIsRoomReply{AppCode: req.GetAppCode(), RoomId: req.GetRoomId(), Settled: true}
	owners := map[string]bool{}
	byAddr := map[string]*roomcellv1.MemberReport{}
	for _, p := range reports {
		v := &roomcellv1.PlacementView{Address: p.Address}
		if p.Err != nil {
			v.Error = unreachableReason(p.Err)
			reply.Views = append(reply.Views, v)
			continue
		}
		byAddr[p.Address] = p.Report
		v.NodeId, v.OwnerAddress = p.Report.GetNodeId(), p.Report.GetOwnerAddress()
		owners[v.OwnerAddress] = true
		if p.Self {
			reply.OwnerAddress = v.OwnerAddress
		}
		reply.Views = append(reply.Views, v)
	}
	reply.Settled = len(owners) == 1
	if reply.OwnerAddress == "" {
		return nil, toStatus(ctx, s.log, errclass.Errorf(errclass.Unavailable, "no member hosting rooms is visible from this node"))
	}
	if owner := byAddr[reply.OwnerAddress]; owner != nil {
		reply.OwnerNodeId, reply.OwnerMemberId = owner.GetNodeId(), owner.GetMemberId()
	}
	return reply, nil
}

func unreachableReason(err error) string {
	if errors.Is(err, cluster.ErrNoAnswer) {
		return "did not answer within the deadline"
	}
	return err.Error()
}
