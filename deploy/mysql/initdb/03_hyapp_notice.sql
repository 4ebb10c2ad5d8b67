-- Code generated from persistence/mysql/schema/notice by mysql.InitDBScript("notice", "hyapp_notice"). DO NOT EDIT.
-- Regenerate: ROOMCELL_UPDATE_INITDB=1 go test ./persistence/mysql -run InitDBScriptInSync
-- The MySQL image runs this once on an empty data directory. `roomcell migrate`
-- (or mysql.auto_migrate) applies the same files and finds them recorded in
-- schema_migrations, so it only ever adds newer ones.

CREATE DATABASE IF NOT EXISTS `hyapp_notice` DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
USE `hyapp_notice`;

CREATE TABLE IF NOT EXISTS schema_migrations (
  schema_name   VARCHAR(64)  NOT NULL,
  version       INT          NOT NULL,
  name          VARCHAR(255) NOT NULL,
  checksum      CHAR(64)     NOT NULL,
  applied_at_ms BIGINT       NOT NULL,
  PRIMARY KEY (schema_name, version)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- ---- schema/notice/001_notice_tables.sql ----
-- hyapp_notice (seed 003): the notice workers' own tables. The workers read
-- the owner outboxes (hyapp_wallet.wallet_outbox, hyapp_room.room_outbox)
-- and never write them; their delivery state lives only here. IDs are
-- utf8mb4_bin: they compare byte for byte, as in the go-memdb store.

-- One row per (source event, channel): the delivery position of seed 003.
-- The primary key is the idempotency boundary: the MySQL scan and the MQ
-- consumer both insert the same fact, and the second insert is a no-op, so
-- a notice is never sent twice by two entries.
--   status: delivering (lease in locked_by/lock_until_ms; a fresh row has
--   no lease), retryable (next_retry_at_ms, exponential backoff), delivered,
--   failed (a dead letter after max_retry_count; only an operator's requeue
--   takes it back).
--   next_retry_at_ms: when the row may be attempted next (fresh: the source
--   event's time; retryable: the backoff; delivering: the lease end, when
--   another instance may reclaim it; delivered/failed: when it got there).
--   payload: the exact client payload (TIMCustomElem Data), JSON text.
CREATE TABLE IF NOT EXISTS notice_delivery_events (
  source_name          VARCHAR(64)   NOT NULL,
  app_code             VARCHAR(64)   NOT NULL,
  source_event_id      VARCHAR(255)  NOT NULL,
  channel              VARCHAR(32)   NOT NULL,
  event_type           VARCHAR(64)   NOT NULL,
  user_id              VARCHAR(64)   NOT NULL,
  ext                  VARCHAR(32)   NOT NULL,
  payload              MEDIUMTEXT    NOT NULL,
  status               VARCHAR(16)   NOT NULL,
  retry_count          INT           NOT NULL DEFAULT 0,
  next_retry_at_ms     BIGINT        NOT NULL DEFAULT 0,
  locked_by            VARCHAR(128)  NULL,
  lock_until_ms        BIGINT        NOT NULL DEFAULT 0,
  last_error           VARCHAR(1024) NULL,
  ingress              VARCHAR(16)   NOT NULL,
  source_created_at_ms BIGINT        NOT NULL,
  created_at_ms        BIGINT        NOT NULL,
  updated_at_ms        BIGINT        NOT NULL,
  delivered_at_ms      BIGINT        NULL,
  requeue_count        INT           NOT NULL DEFAULT 0,
  requeued_at_ms       BIGINT        NULL,
  PRIMARY KEY (source_name, app_code, source_event_id, channel),
  -- The claim (status = ? AND source_name = ? AND next_retry_at_ms <= now
  -- ORDER BY next_retry_at_ms LIMIT n FOR UPDATE SKIP LOCKED, once for
  -- retryable and once for delivering rows), the stats of one source and
  -- the operators' list by status. A claim walks the oldest due entries and
  -- stops after n: never the delivered history, never a sort.
  KEY idx_notice_due (status, source_name, next_retry_at_ms),
  -- Operators who know only the event id (roomctl notice show <id>).
  KEY idx_notice_source_event (source_event_id),
  CONSTRAINT ck_notice_status CHECK (status IN ('delivering', 'retryable', 'delivered', 'failed')),
  CONSTRAINT ck_notice_payload CHECK (JSON_VALID(payload))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- One scan cursor per source: the position up to which every owner outbox
-- row has been copied into notice_delivery_events (wallet_outbox: the id in
-- position_num; room_outbox: created_at_ms and event_id). locked_by and
-- lock_until_ms are the scan lease: one instance scans a source at a time,
-- the others only deliver.
CREATE TABLE IF NOT EXISTS notice_source_cursors (
  source_name   VARCHAR(64)  NOT NULL,
  position_num  BIGINT       NOT NULL DEFAULT 0,
  position_key  VARCHAR(255) NOT NULL DEFAULT '',
  locked_by     VARCHAR(128) NULL,
  lock_until_ms BIGINT       NOT NULL DEFAULT 0,
  updated_at_ms BIGINT       NOT NULL,
  PRIMARY KEY (source_name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
INSERT IGNORE INTO schema_migrations (schema_name, version, name, checksum, applied_at_ms)
  VALUES ('notice', 1, '001_notice_tables', 'b691c79cdf3515155528e4f81a8801234480502ac6d34755a45f833831bcda8e', FLOOR(UNIX_TIMESTAMP(NOW(3)) * 1000));

-- ---- schema/notice/002_notice_skipped.sql ----
-- skipped: a dead letter an operator gave up (roomctl notice bulk-skip):
-- it is no longer failed, so it stops counting as a dead letter, and it
-- is never sent. last_error records who, why and the error it died of.
ALTER TABLE notice_delivery_events DROP CONSTRAINT ck_notice_status,
  ADD CONSTRAINT ck_notice_status CHECK (status IN ('delivering', 'retryable', 'delivered', 'failed', 'skipped'));
INSERT IGNORE INTO schema_migrations (schema_name, version, name, checksum, applied_at_ms)
  VALUES ('notice', 2, '002_notice_skipped', '3a5ef2d2a9d96f0abeccf6a0d4571aab709fbf9144c3acd8eb72354935bd48bf', FLOOR(UNIX_TIMESTAMP(NOW(3)) * 1000));
