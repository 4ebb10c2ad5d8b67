// Package grpcapi is roomcell's public gRPC surface: the servers behind the
// generated services (RoomServer for roomcell.v1.RoomService), the checks
// every request passes before it reaches a grain (for room commands the
// room's own, room.ParseClientCommand, which reads the request once into
// its checks, room, user and rate class, so bad input answers
// InvalidArgument and changes nothing), the interceptors (server.go: one
// pass of the edge, request id and access log; go-grpc-middleware's
// Prometheus metrics and panic recovery; the gate, bearer auth by caller
// class from the one method table in auth.go, then the bad-body check of
// codec.go), TLS, health and reflection, the listener that lets large
// replies share writes with the replies answered beside them
// (batchwrites.go),
// and the one mapping from error classes to gRPC status codes (errors.go). It holds
// no room rules (those live in actors/roomgrain) and must not touch a store,
// cluster or delivery package: it reaches rooms only through a RoomBackend
// that the process wiring supplies.
package grpcapi
