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

	indexDirSeen = "seen"
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
				Indexer: rowIndex[*presenceRow]{
					args: fields(strArg, strArg, strArg),
					key: func(p *presenceRow) []byte {
						return newKey(0, p.AppCode, p.RoomID, p.UserID).str(p.AppCode).str(p.RoomID).str(p.UserID)
					},
				},
			},
			// seen serves StalePresence's oldest-first scan of one room
			// and SyncRoom's walk over a room's presence; user_id breaks
			// ties as the Redis sorted set does.
			indexDirSeen: {
				Name:   indexDirSeen,
				Unique: true,
				Indexer: rowIndex[*presenceRow]{
					args: fields(strArg, strArg, intArg, strArg),
					key: func(p *presenceRow) []byte {
						return newKey(1, p.AppCode, p.RoomID, p.UserID).str(p.AppCode).str(p.RoomID).i64(p.LastSeenMs).str(p.UserID)
					},
				},
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
				Indexer: rowIndex[*userRoomRow]{
					args: fields(strArg, strArg),
					key:  func(u *userRoomRow) []byte { return newKey(0, u.AppCode, u.UserID).str(u.AppCode).str(u.UserID) },
				},
			},
		},
	}
}

// dirRoomsTable holds *roomRow rows, one per listed room. The ranking and
// expiry orders are Directory.ranks and Directory.expiry, not indexes here.
func dirRoomsTable() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name: tableDirRooms,
		Indexes: map[string]*memdb.IndexSchema{
			// id serves UpdateRoom's upsert and RemoveRoom.
			indexID: {
				Name:   indexID,
				Unique: true,
				Indexer: rowIndex[*roomRow]{
					args: fields(strArg, strArg),
					key:  func(r *roomRow) []byte { return newKey(0, r.AppCode, r.RoomID).str(r.AppCode).str(r.RoomID) },
				},
			},
		},
	}
}
