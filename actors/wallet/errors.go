package wallet

import "github.com/hyapp/roomcell/errclass"

// The wallet's errors, each in one class of the shared vocabulary
// (errclass) with its code from the one code table: the gRPC layer maps
// the class to a status and carries the code, so a room node with a
// remote wallet gets these errors back as themselves (errors.Is holds as
// in process). Bad input is errclass.Invalid with the field named
// (errclass.Invalidf): retrying the same request cannot succeed.
var (
	// ErrCommandReused: the command_id was already used for a different
	// request. Nothing was written. Its class is Exists (the id is taken),
	// not Conflict: retrying cannot help.
	ErrCommandReused = errclass.New(errclass.CodeCommandReused)
	// ErrUnavailable: the store could not be reached or timed out. The
	// change may or may not have committed; retry with the same
	// command_id to find out without charging twice.
	ErrUnavailable = errclass.New(errclass.CodeWalletUnavailable)
)

// Rule errors: the request is well formed but the wallet's state refuses
// it. Nothing was written.
var (
	ErrInsufficientBalance = errclass.New(errclass.CodeInsufficientBalance)
	ErrVipDowngrade        = errclass.New(errclass.CodeVipDowngrade)
	// ErrGiftRefunded: the gift's reservation was returned; its
	// command_id cannot charge again.
	ErrGiftRefunded = errclass.New(errclass.CodeWalletGiftRefunded)
	// ErrGiftNotReserved: a confirm for a gift that holds no reservation.
	ErrGiftNotReserved = errclass.New(errclass.CodeGiftNotReserved)
	// ErrGiftSettled: a confirm or refund for a gift already settled the
	// other way.
	ErrGiftSettled = errclass.New(errclass.CodeGiftSettled)
)
