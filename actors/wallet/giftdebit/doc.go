// Package giftdebit adapts the wallet to the room grain: it implements
// room.GiftDebiter over the in-process *wallet.Service (reserve, confirm,
// refund) or, with Remote, over the one-step DebitGift of a remote
// *grpcapi.WalletClient, and turns wallet error classes into room classes.
// It is a separate package so the wallet itself never imports the room
// actors; it holds no logic beyond that translation.
package giftdebit
