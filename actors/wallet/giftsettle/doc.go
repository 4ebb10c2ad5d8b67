// Package giftsettle is the gift reconciler: a supervised polling worker
// that settles the gift reservations nobody settled (the node died, or the
// wallet or the room database failed between the steps). For each open
// reservation older than a bound it asks the room store to void the gift
// (persistence.RoomStore.VoidGift) and confirms the reservation if the
// room had logged the gift, refunds it otherwise. It owns the metrics of
// open reservations. It uses the wallet service and the room store
// contract; it must not import a store backend, the room actors or gRPC.
package giftsettle
