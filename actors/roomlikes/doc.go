// Package roomlikes gathers a room's likes, an observer of each room
// (roomgrain.Observer, Receiver, Stopper) wired by cmd/roomcell: the
// grain hands it the room's LikeRoom commands and never imports it.
//
// Likes by group commit. A LikeRoom that passes the room's rules now is
// not answered at once: it joins the room's open window
// (room.LikeWindow, decided as its likes arrive), and the room goes on
// serving every other command. When the window ends (room.like_window
// after its first like, or sooner when it holds maxLikeBatch likes) it
// is closed against the room as it is then (its likers checked again),
// ONE log row is committed through the room's command path (RoomLiked
// and RoomLikeReceipts, one IM message), and only then is each like
// answered. So an acknowledged like is durable and counted once: a crash
// before the append answers nobody (the clients retry, nothing was
// counted), and a retry after it finds its receipt in the room's state
// (rebuilt by replay like the rest) and is answered as a duplicate.
package roomlikes
