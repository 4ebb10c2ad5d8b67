// Package presence is the per-node presence stale worker: a supervised
// actor that every presence.scan_interval asks the room directory which
// members of the rooms this node hosts (directory.Hosted) have not heartbeated
// for presence.stale_after (256 rooms per directory read), and sends each
// such room a LeaveRoom (reason
// heartbeat_timeout) through the cluster, so the leave goes through the
// room's normal command path: command log, RoomUserLeft in the outbox, IM.
// The command_id is derived from (room, user, last_seen), so a scan that
// repeats before the room has caught up is deduplicated by the room. A
// presence entry of a user who is no longer in the room is cleared. The
// worker never changes room state itself, never writes the directory
// except to clear such orphans, and must not import grpcapi or a store
// implementation.
package presence
