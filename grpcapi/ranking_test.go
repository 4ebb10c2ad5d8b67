package grpcapi

import (
	"context"

	"google.golang.org/protobuf/proto"

	"github.com/hyapp/roomcell/api/roomcellv1"
)

// rankingCases: the contribution ranking's read, as the grain protocol
// carries it.
func rankingCases(rid string) []rpcCase {
	return []rpcCase{
		{"ListContributors",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.ListContributors(ctx, &roomcellv1.ListContributorsRequest{AppCode: "app1", RoomId: "r1", Period: "day", PageSize: 10})
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_ListContributors{ListContributors: &roomcellv1.ListContributorsRequest{
				RequestId: rid, AppCode: "app1", RoomId: "r1", Period: "day", PageSize: 10}}}},
	}
}
