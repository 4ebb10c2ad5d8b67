// Package giftdebit adapts the wallet to the room grain: it implements
// room.GiftDebiter over anything with the wallet's DebitGift (the
// in-process *wallet.Service or the gRPC *grpcapi.WalletClient). Wallet
// errors pass through unchanged: both speak the shared vocabulary
// (errclass). It is a separate package so the wallet itself never imports
// the room actors; it holds no logic beyond the request mapping.
package giftdebit
