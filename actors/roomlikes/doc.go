// Package roomlikes gathers a room's likes, an observer of each room
// (roomgrain.Observer, Receiver, Stopper, ReceiptsEncoder) wired by
// cmd/roomcell: the grain hands it the room's LikeRoom commands and
// never imports it.
//
// Likes by group commit, decided off the room's goroutine and, once the
// room is liked, before its mailbox. The room's first like reaches the
// grain: the room takes likes from its user now (room.CheckLiker: a
// member, not banned, the room open; refused at once otherwise), its
// command_id is not a recent command's, and it goes to the room's likes
// goroutine, which opens the room's front (roomgrain.OpenFront, front.go).
// From then on this node's room client sends the room's likes to the
// front, which checks them on the caller's goroutine against what the
// room publishes at each commit and load (its lease epoch, whether it
// would write without loading first, its members and bans: a view read
// under a read lock the room takes only while a commit changes its state
// in place) and hands them to the likes goroutine; a like the front
// cannot decide (a refusal to explain, a room about to load, another
// node's like) goes to the grain as before. The likes goroutine refuses
// there an id the room's recent commands used (or the command it is
// deciding now), hashes the command_id, looks it up among the open
// window, the windows being stored and the room's receipts (a retry of a
// stored like is answered as a duplicate, another request under its id
// refused), and puts it in the open window (room.LikeWindow, decided as
// its likes arrive). When the window ends (room.like_window after its
// first like, or sooner when it holds maxLikeBatch likes) its tally
// (room.LikeTally: its likers sorted, their receipts) is the one message
// of the window the room gets: the room checks each liker again
// (room.LikeTally.Close: a user who left or was banned since is not
// counted), commits ONE log row through its command path (RoomLiked and
// RoomLikeReceipts, one IM message), and hands the outcome back; only
// then is each like answered. So an acknowledged like is durable and
// counted once: a crash before the append answers nobody (the clients
// retry, nothing was counted), and a retry after it finds its receipt in
// the room's state (rebuilt by replay like the rest) and is answered as
// a duplicate. A window whose likes were decided before the room loaded
// its state again (an append's outcome unknown, the lease retaken under
// a newer epoch) is answered unavailable, never committed: the load may
// have brought receipts of the same likes. Windows are pipelined: the
// next one gathers while one is stored.
//
// The room's receipts (each liker's newest 16) are most of a liked
// room's snapshot: after each window the likes side encodes them on a
// goroutine of its own (room.EncodeLikeReceipts), and the snapshot takes
// that encoding as it is.
package roomlikes
