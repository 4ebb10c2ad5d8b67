// Package giftdebit adapts the wallet to the room grain: it implements
// room.GiftDebiter over the in-process *wallet.Service (reserve, confirm,
// refund) or, with Remote, over the same three RPCs of a remote
// WalletService (*grpcapi.WalletClient), each bounded by a timeout. Wallet errors pass through unchanged: both speak
// the shared vocabulary (errclass). It is a separate package so the
// wallet itself never imports the room actors; it holds no logic beyond
// the request mapping.
package giftdebit
