-- Room store (persistence/mysql): the command log, the transactional
-- outbox and the snapshots of room grains. Accepted by MySQL 8 and
-- MariaDB 10.6+. IDs are utf8mb4_bin: they compare byte for byte, as in
-- the go-memdb store. JSON is kept as validated text, not MySQL 8's binary
-- JSON type, which would reorder keys: the envelope the grain wrote is the
-- envelope the relay publishes, byte for byte.

-- One row per command a room accepted, written in the same transaction as
-- its outbox rows. The primary key is the single-writer fence: two
-- activations of one room cannot both take a seq.
CREATE TABLE IF NOT EXISTS room_command_log (
  app_code      VARCHAR(64)  NOT NULL,
  room_id       VARCHAR(128) NOT NULL,
  seq           BIGINT       NOT NULL,
  command_id    VARCHAR(128) NOT NULL,
  command_type  VARCHAR(64)  NOT NULL,
  -- The reply the caller got (encoded protobuf), replayed verbatim for a
  -- duplicate command_id.
  reply         MEDIUMBLOB   NOT NULL,
  -- JSON array of the command's event envelopes, replayed on activation.
  events        MEDIUMTEXT   NOT NULL,
  created_at_ms BIGINT       NOT NULL,
  PRIMARY KEY (app_code, room_id, seq),
  -- Command idempotency: a retried command_id finds its recorded reply,
  -- and a second write of it is refused.
  UNIQUE KEY uk_room_command_log_command_id (app_code, room_id, command_id),
  CONSTRAINT ck_room_command_log_events CHECK (JSON_VALID(events))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- One row per event, pending until the relay (or the grain's synchronous
-- publish) marks it published (seed 000). locked_by/lock_until_ms are the
-- relay's claim lease across instances.
CREATE TABLE IF NOT EXISTS room_outbox (
  event_id        VARCHAR(255)  NOT NULL,
  app_code        VARCHAR(64)   NOT NULL,
  room_id         VARCHAR(128)  NOT NULL,
  room_seq        BIGINT        NOT NULL,
  event_type      VARCHAR(64)   NOT NULL,
  envelope        MEDIUMTEXT    NOT NULL,
  status          VARCHAR(16)   NOT NULL DEFAULT 'pending',
  retry_count     INT           NOT NULL DEFAULT 0,
  last_error      VARCHAR(1024) NULL,
  locked_by       VARCHAR(128)  NULL,
  lock_until_ms   BIGINT        NOT NULL DEFAULT 0,
  created_at_ms   BIGINT        NOT NULL,
  updated_at_ms   BIGINT        NOT NULL,
  published_at_ms BIGINT        NULL,
  PRIMARY KEY (event_id),
  -- The pending scans by age: the relay's claim (status = 'pending' AND
  -- lock_until_ms <= now ORDER BY created_at_ms, event_id LIMIT n FOR
  -- UPDATE SKIP LOCKED), ListPendingOutbox and OutboxStats. The walk starts
  -- at the oldest pending entry and stops after n free rows: it reads n
  -- plus the rows under a live lease, never the published history and
  -- never a sort. (status, lock_until_ms, created_at_ms) would instead
  -- range-scan every free pending row and filesort them for each claim,
  -- and rewrite the index entry on every claim and release; here a claim
  -- only changes columns outside any secondary index.
  KEY idx_room_outbox_pending (status, created_at_ms, event_id),
  CONSTRAINT ck_room_outbox_status CHECK (status IN ('pending', 'published')),
  CONSTRAINT ck_room_outbox_envelope CHECK (JSON_VALID(envelope))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- The newest snapshot of each room; only a higher seq replaces it.
CREATE TABLE IF NOT EXISTS room_snapshots (
  app_code      VARCHAR(64)  NOT NULL,
  room_id       VARCHAR(128) NOT NULL,
  seq           BIGINT       NOT NULL,
  state         MEDIUMBLOB   NOT NULL,
  updated_at_ms BIGINT       NOT NULL,
  PRIMARY KEY (app_code, room_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
