// Package roomlikes gathers a room's likes, an observer of each room
// (roomgrain.Observer, Receiver, Stopper) wired by cmd/roomcell: the
// grain hands it the room's LikeRoom commands and never imports it.
//
// Likes by group commit, decided off the room's goroutine. A LikeRoom
// takes only map lookups of the room's goroutine: the room takes likes
// from its user now (room.CheckLiker: a member, not banned, the room
// open; refused at once otherwise) and its command_id is not a recent
// command's. It then goes to the room's likes goroutine, which hashes
// its command_id, looks it up among the open window, the windows being
// stored and the room's receipts (a retry of a stored like is answered
// as a duplicate, another request under its id refused), and puts it in
// the open window (room.LikeWindow, decided as its likes arrive). When
// the window ends (room.like_window after its first like, or sooner when
// it holds maxLikeBatch likes) its tally (room.LikeTally: its likers
// sorted, their receipts) is the one message of the window the room
// gets: the room checks each liker again (room.LikeTally.Close), commits
// ONE log row through its command path (RoomLiked and RoomLikeReceipts,
// one IM message), and hands the outcome back; only then is each like
// answered. So an acknowledged like is durable and counted once: a crash
// before the append answers nobody (the clients retry, nothing was
// counted), and a retry after it finds its receipt in the room's state
// (rebuilt by replay like the rest) and is answered as a duplicate.
// Windows are pipelined: the next one gathers while one is stored.
package roomlikes
