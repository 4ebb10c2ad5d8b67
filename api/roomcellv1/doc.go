// Package roomcellv1 is the generated Go code of roomcell's public API,
// proto package roomcell.v1: RoomService (and the room grain protocol,
// which crosses cluster members and so is protobuf too), WalletService,
// OutboxAdmin, NoticeAdmin and ClusterAdmin. The .proto files beside it are
// the source; `make proto` regenerates the .pb.go files, which are
// committed. Nothing here is written by hand but this file.
package roomcellv1
