// Package walletnotice is seed 003's wallet notice module: it reads the
// wallet's facts from wallet_outbox (WalletBalanceChanged → C2C
// TIMCustomElem with Ext wallet_notice, VipActivated → Ext vip_notice, to
// the row's user) and turns each into a notice_delivery_events row with the
// final client payload, exactly the seed's fields. Its Scanner follows
// wallet_outbox by id and waits for ids that became visible out of order
// (see Scanner). The delivery itself (claim, send, retry, dead letter) is
// actors/notice's. It reads wallet_outbox through the read-only Source and
// never writes it (its status belongs to the wallet); it must not import
// a store backend, grpcapi or another notice module.
package walletnotice
