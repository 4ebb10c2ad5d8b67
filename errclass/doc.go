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
// rule "which class is this error in", and the one table of error codes:
// errors.json holds each code's name, class, gRPC status, retryability,
// message and doc line; errgen (`make errors`) generates codes_gen.go and
// docs/errors.md from it, and its test fails while they differ. Every
// room, grain and wallet error is declared with New and its code (class
// and text come from its row), and crosses processes by it (FromWire,
// FromCode), never by its text; the facts of a refusal ride as metadata
// (WithMeta), not in its text. Turning an error into a gRPC status is
// grpcapi's job (toStatus), the only place that does. It imports the
// standard library only, so every package, storage included, may use it.
package errclass
