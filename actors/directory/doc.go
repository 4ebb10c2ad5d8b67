// Package directory keeps the room directory (presence, user → room, heat
// ranking; persistence.Directory) in step with the rooms of a node. It is
// one of the room grain's observers (actors/roomgrain Observer): New returns
// the observer each activation gets, cmd/roomcell puts it in the grain's
// Deps.Observers, and it reaches the grain through those calls, the
// grain's Tick and Commit messages and nothing else. The grain never
// imports this package (internal/layers holds it).
//
// The room's state is the truth and the directory a read model of it, so:
//
//   - Directory writes never sit on the command path. After a commit the
//     observer hands the work to its worker (worker.go), which runs it in
//     commit order on its own queue (roomgrain.Serial); a failure is
//     logged and counted and never reaches the caller. A slow or dead
//     Redis costs no command latency; a full backlog drops work (counted)
//     for the refresh to redo.
//   - Every entry is rebuilt from state: on activation and on every Tick
//     (RefreshInterval; Hosted's one wheel per node spreads them) the room
//     re-registers (SyncRoom), which also settles users that ended up in
//     two rooms while the directory was away (the newer join keeps them).
//   - Moving a user out of their previous room is that room's own command:
//     a LeaveRoom (reason switched_room) sent through the cluster from a
//     goroutine, never from a mailbox, so two rooms trading users cannot
//     deadlock. Its command_id is derived from the join that caused it, so
//     a resent leave is deduplicated by the old room, and it carries that
//     join's time: the old room's Check refuses it when the user joined it
//     again after that time (the newest join wins).
//   - Two rooms' directory work is not ordered, and a worker runs after
//     the commit it follows: by the time a join is written the user may
//     have left and joined elsewhere. The write returns the entry it
//     replaced with its join time, and the worker looks at its room's
//     membership again after the write: only an older join (or, on a tie,
//     one displaced by a join that still holds) is told to let go; a newer
//     one, or one displaced by a join that already ended, gets its entry
//     back.
//   - RoomRankChanged: the rank is the directory's, known only after the
//     heat change is committed and written there. When a write reports a
//     changed rank (entering the ranking is not a change), the worker
//     sends the grain a Commit (command_id "rank-<seq>-<prev>-<rank>"),
//     which the room commits through its normal path: command log, outbox,
//     no-op publish. With the directory down there are no rank events.
//
// It owns the node's hosted-room registry (Hosted), which the presence
// stale worker scans, and the directory's metrics. It must not change a
// room's state but through a room's own commands, and must not know
// store, IM or wallet implementations.
package directory
