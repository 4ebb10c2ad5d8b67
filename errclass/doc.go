// Package errclass is roomcell's one error vocabulary: seven classes
// (Invalid, NotFound, Exists, Precondition, Permission, Conflict,
// Unavailable) that every domain error wraps, so a caller asks
// errors.Is(err, errclass.Unavailable) whether the error came from a room
// rule, the wallet, the notice service or a store. Domains keep their own
// sentinels (room.ErrSeatTaken, wallet.ErrInsufficientBalance,
// persistence.ErrConflict) as narrower errors of one class: Define makes
// one, Errorf wraps a class with detail.
//
// It owns the classes, their names for crossing process boundaries, the
// rule "which class is this error in", and the one table of error codes
// (codes.go): every room, grain and wallet error is declared with New and
// its code, and crosses processes by it (FromWire, FromCode), never by
// its text; turning a class into a gRPC status is
// grpcapi's job (toStatus), the only place that does. It imports the
// standard library only, so every package, storage included, may use it.
package errclass
