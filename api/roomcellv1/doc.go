// Package roomcellv1 is the generated Go code of roomcell's public API,
// proto package roomcell.v1: RoomService (and the room grain protocol,
// which crosses cluster members and so is protobuf too), WalletService,
// OutboxAdmin, NoticeAdmin and ClusterAdmin. The .proto files beside it are
// the source; `make proto` regenerates the .pb.go files, which are
// committed. Nothing here is written by hand but this file.
package roomcellv1

import _ "embed" // GatewayRules

// GatewayRules is gateway.yaml, the HTTP routes grpc-gateway generated
// its handlers from: the gateway reads it to know, before a body is read,
// which RPC a route calls (its access class, whether it streams) and
// which methods a path allows.
//
//go:embed gateway.yaml
var GatewayRules []byte
