package memdb

import (
	"github.com/hashicorp/go-memdb"
)

// Table and index names of the room directory, which lives in its own
// MemDB (see Directory) so heartbeats never wait on room appends.
const (
	tableDirPresence = "dir_presence"
	tableDirUserRoom = "dir_user_room"
	tableDirRooms    = "dir_rooms"

	indexDirSeen   = "seen"
	indexDirRank   = "rank"
	indexDirExpiry = "expiry"
)

// directoryTables lists the directory's tables; directorySchema assembles
// them.
var directoryTables = []func() *memdb.TableSchema{
	dirPresenceTable,
	dirUserRoomTable,
	dirRoomsTable,
}

func directorySchema() *memdb.DBSchema {
	return newSchema(directoryTables...)
}

// dirPresenceTable holds *presenceRow rows, one per (room, user): the
// per-room presence set of the Redis directory and its TTL'd entry in one
// row.
func dirPresenceTable() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name: tableDirPresence,
		Indexes: map[string]*memdb.IndexSchema{
			// id serves Heartbeat's upsert, ClearUserRoom and the last-seen
			// read of UserRoom.
			indexID: {
				Name:   indexID,
				Unique: true,
				Indexer: &memdb.CompoundIndex{Indexes: []memdb.Indexer{
					&memdb.StringFieldIndex{Field: "AppCode"},
					&memdb.StringFieldIndex{Field: "RoomID"},
					&memdb.StringFieldIndex{Field: "UserID"},
				}},
			},
			// seen serves StalePresence's oldest-first scan of one room
			// and SyncRoom's walk over a room's presence; user_id breaks
			// ties as the Redis sorted set does.
			indexDirSeen: {
				Name:   indexDirSeen,
				Unique: true,
				Indexer: &memdb.CompoundIndex{Indexes: []memdb.Indexer{
					&memdb.StringFieldIndex{Field: "AppCode"},
					&memdb.StringFieldIndex{Field: "RoomID"},
					&memdb.IntFieldIndex{Field: "LastSeenMs"},
					&memdb.StringFieldIndex{Field: "UserID"},
				}},
			},
		},
	}
}

// dirUserRoomTable holds *userRoomRow rows, one per (app, user).
func dirUserRoomTable() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name: tableDirUserRoom,
		Indexes: map[string]*memdb.IndexSchema{
			// id serves every user → room read and swap.
			indexID: {
				Name:   indexID,
				Unique: true,
				Indexer: &memdb.CompoundIndex{Indexes: []memdb.Indexer{
					&memdb.StringFieldIndex{Field: "AppCode"},
					&memdb.StringFieldIndex{Field: "UserID"},
				}},
			},
		},
	}
}

// dirRoomsTable holds *roomRow rows, one per listed room.
func dirRoomsTable() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name: tableDirRooms,
		Indexes: map[string]*memdb.IndexSchema{
			// id serves UpdateRoom's upsert and RemoveRoom.
			indexID: {
				Name:   indexID,
				Unique: true,
				Indexer: &memdb.CompoundIndex{Indexes: []memdb.Indexer{
					&memdb.StringFieldIndex{Field: "AppCode"},
					&memdb.StringFieldIndex{Field: "RoomID"},
				}},
			},
			// expiry serves the purge of expired rows, oldest first.
			indexDirExpiry: {
				Name:   indexDirExpiry,
				Unique: true,
				Indexer: &memdb.CompoundIndex{Indexes: []memdb.Indexer{
					&memdb.IntFieldIndex{Field: "ExpiresAtMs"},
					&memdb.StringFieldIndex{Field: "AppCode"},
					&memdb.StringFieldIndex{Field: "RoomID"},
				}},
			},
			// rank serves ListRooms: an ascending walk is heat descending
			// (NegHeat), then room_id ascending, the order of the Redis
			// ranking (Directory.ranks holds the same order, counted, for
			// rank reads).
			indexDirRank: {
				Name:   indexDirRank,
				Unique: true,
				Indexer: &memdb.CompoundIndex{Indexes: []memdb.Indexer{
					&memdb.StringFieldIndex{Field: "AppCode"},
					&memdb.IntFieldIndex{Field: "NegHeat"},
					&memdb.StringFieldIndex{Field: "RoomID"},
				}},
			},
		},
	}
}
