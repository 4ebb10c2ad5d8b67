-- A room's delivered cursor: the IM relay publishing a batch writes one
-- row per room (this one) instead of a published mark into each row. A
-- room_outbox row whose stored status is 'pending' and whose place in its
-- room (room_seq, event_index) is at or below (done_seq, done_index) reads
-- as published; every other row reads as its status column says. The
-- cursor only ever passes rows that were delivered (a row failed, released
-- or parked stops it; rows after a gap are marked in the row, as before),
-- so no row at or below it is waiting, and a requeue never meets one.
--
-- work_ms says whether the room has rows to send and how old they are:
-- NULL when no row above the cursor is pending, else the first such row's
-- created_at_ms; due_ms is when that row is due (its retry time once it
-- failed). An append sets both when work_ms is NULL (one row per room per
-- group commit), the cursor's advance sets them from the next pending row.
-- Claims walk the rooms with work oldest first
-- (idx_room_outbox_cursors_work) and take the due ones, instead of walking
-- pending rows: delivered rows keep their stored 'pending' until they are
-- purged. Either may be lower than exact (a claim checks the room's first
-- row itself), never higher.
CREATE TABLE IF NOT EXISTS room_outbox_cursors (
  app_code   VARCHAR(64)  NOT NULL,
  room_id    VARCHAR(128) NOT NULL,
  done_seq   BIGINT       NOT NULL DEFAULT 0,
  done_index INT          NOT NULL DEFAULT -1,
  done_at_ms BIGINT       NOT NULL DEFAULT 0,
  work_ms    BIGINT       NULL,
  due_ms     BIGINT       NULL,
  PRIMARY KEY (app_code, room_id),
  KEY idx_room_outbox_cursors_work (work_ms)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Each advance of a cursor: the rows after the previous advance up to
-- (to_seq, to_index) were published at published_at_ms. A delivered row's
-- published_at_ms (and updated_at_ms) is that of the first advance at or
-- above it. Purged with the rows it covers.
CREATE TABLE IF NOT EXISTS room_outbox_delivered (
  app_code        VARCHAR(64)  NOT NULL,
  room_id         VARCHAR(128) NOT NULL,
  to_seq          BIGINT       NOT NULL,
  to_index        INT          NOT NULL,
  published_at_ms BIGINT       NOT NULL,
  PRIMARY KEY (app_code, room_id, to_seq, to_index)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Existing rooms start with a cursor below their first row: every existing
-- row keeps the status it has; a room with pending rows has work from its
-- pending rows, as old and due as the oldest and the earliest due of them.
INSERT IGNORE INTO room_outbox_cursors (app_code, room_id, work_ms, due_ms)
  SELECT app_code, room_id, MIN(IF(status = 'pending', created_at_ms, NULL)), MIN(IF(status = 'pending', GREATEST(created_at_ms, next_retry_at_ms), NULL))
  FROM room_outbox GROUP BY app_code, room_id;
