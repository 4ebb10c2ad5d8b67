-- A claim leases a room, not each of its rows. One row here per room a
-- sender claimed: the claimer (locked_by), until when (lock_until_ms) and
-- the last row of the room the claim took (upto_seq, upto_index). The
-- lease holds the room's pending rows up to that row: while it runs and
-- one of them is still pending, no other owner claims the room; once they
-- are all published the room is free again without a write here. A claim
-- thus writes one row per room instead of a lease into each claimed row
-- (each such write also moved the row's entry in idx_room_outbox_room),
-- so a published row is written once after its insert, by its published
-- mark. A failure or a release of a row ends the lease below it (its
-- sender gives back that row and the room's later ones).
--
-- A room's own publisher still leases the rows it inserts in the row
-- (locked_by, lock_until_ms: part of the command's insert, no extra
-- write); a claim respects both kinds.
CREATE TABLE IF NOT EXISTS room_outbox_leases (
  app_code      VARCHAR(64)  NOT NULL,
  room_id       VARCHAR(128) NOT NULL,
  locked_by     VARCHAR(128) NOT NULL,
  lock_until_ms BIGINT       NOT NULL,
  upto_seq      BIGINT       NOT NULL,
  upto_index    INT          NOT NULL,
  PRIMARY KEY (app_code, room_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
