-- The MQ fanout's progress in a table of its own, one row per outbox row
-- the fanout has to publish, written in the command's transaction only
-- when the fanout is on (notice.mq.room_outbox). In room_outbox its four
-- columns and two indexes cost every durable event two index entries
-- (about 4-5 us of MariaDB CPU each) even with the fanout off, when they
-- only ever held 'none'. An outbox row without a row here has MQ status
-- 'none'. The fanout's claim, marks and leases touch only this table, so
-- they never lock an IM row; retention deletes a row here with its outbox
-- row, and never while it is MQ-pending.
--
-- The columns and indexes are those room_outbox had (migrations 006,
-- 008, 010, 014): the claim walks idx_room_outbox_mq by age and reads each
-- room's depth, lease and lowest rows from idx_room_outbox_room_mq; a mark
-- updates the row in place (mq_status CHAR(9), mq_published_at_ms 0
-- until published, mq_locked_by left as it was).
ALTER TABLE room_outbox DROP CONSTRAINT ck_room_outbox_mq_status;

CREATE TABLE IF NOT EXISTS room_outbox_mq (
  event_id           VARCHAR(255) NOT NULL,
  app_code           VARCHAR(64)  NOT NULL,
  room_id            VARCHAR(128) NOT NULL,
  room_seq           BIGINT       NOT NULL,
  event_index        INT          NOT NULL DEFAULT 0,
  created_at_ms      BIGINT       NOT NULL,
  mq_status          CHAR(9)      NOT NULL DEFAULT 'pending',
  mq_published_at_ms BIGINT       NOT NULL DEFAULT 0,
  mq_locked_by       VARCHAR(128) NULL,
  mq_lock_until_ms   BIGINT       NOT NULL DEFAULT 0,
  PRIMARY KEY (event_id),
  KEY idx_room_outbox_mq (mq_status, created_at_ms, event_id),
  KEY idx_room_outbox_room_mq (app_code, room_id, mq_status, room_seq, event_index, mq_lock_until_ms),
  CONSTRAINT ck_room_outbox_mq_status CHECK (mq_status IN ('pending', 'published', 'parked'))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

INSERT IGNORE INTO room_outbox_mq (event_id, app_code, room_id, room_seq, event_index, created_at_ms,
    mq_status, mq_published_at_ms, mq_locked_by, mq_lock_until_ms)
  SELECT event_id, app_code, room_id, room_seq, event_index, created_at_ms,
    mq_status, mq_published_at_ms, mq_locked_by, mq_lock_until_ms
  FROM room_outbox WHERE mq_status <> 'none';

ALTER TABLE room_outbox
  DROP KEY idx_room_outbox_mq,
  DROP KEY idx_room_outbox_room_mq,
  DROP COLUMN mq_status,
  DROP COLUMN mq_published_at_ms,
  DROP COLUMN mq_locked_by,
  DROP COLUMN mq_lock_until_ms;
