-- The epoch fence of room ownership (docs/cluster.md): the highest shard
-- lease epoch that claimed or wrote to the room. Every fenced append
-- checks and raises it in its own transaction, so a node whose lease was
-- taken over cannot write after the new owner claimed the room, even when
-- the seq it writes is still free. The row lock it takes also serialises
-- the old and the new owner's writes to one room.
CREATE TABLE IF NOT EXISTS room_fences (
  app_code VARCHAR(64)  NOT NULL,
  room_id  VARCHAR(128) NOT NULL,
  epoch    BIGINT       NOT NULL,
  PRIMARY KEY (app_code, room_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
