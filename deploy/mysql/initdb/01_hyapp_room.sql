-- Code generated from persistence/mysql/schema/room by mysql.InitDBScript("room", "hyapp_room"). DO NOT EDIT.
-- Regenerate: ROOMCELL_UPDATE_INITDB=1 go test ./persistence/mysql -run InitDBScriptInSync
-- The MySQL image runs this once on an empty data directory. `roomcell migrate`
-- (or mysql.auto_migrate) applies the same files and finds them recorded in
-- schema_migrations, so it only ever adds newer ones.

CREATE DATABASE IF NOT EXISTS `hyapp_room` DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
USE `hyapp_room`;

CREATE TABLE IF NOT EXISTS schema_migrations (
  schema_name   VARCHAR(64)  NOT NULL,
  version       INT          NOT NULL,
  name          VARCHAR(255) NOT NULL,
  checksum      CHAR(64)     NOT NULL,
  applied_at_ms BIGINT       NOT NULL,
  PRIMARY KEY (schema_name, version)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- ---- schema/room/001_room_tables.sql ----
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
INSERT IGNORE INTO schema_migrations (schema_name, version, name, checksum, applied_at_ms)
  VALUES ('room', 1, '001_room_tables', '7ccd89b776d031cbd9a0b469c2e7e70738f14c3704ca39d37758c40eb7321744', FLOOR(UNIX_TIMESTAMP(NOW(3)) * 1000));

-- ---- schema/room/002_room_outbox_type_index.sql ----
-- The notice workers' read-only scan of one event type by age
-- (actors/notice/roomnotice reads RoomUserKicked rows after its cursor
-- (created_at_ms, event_id), whatever their status). Without it the scan
-- would read every room event to find the rare kicks; with it a scan reads
-- only the rows it returns. It costs one more index entry per outbox row,
-- written once: no column of it changes after the insert.
ALTER TABLE room_outbox ADD KEY idx_room_outbox_type_created (event_type, created_at_ms, event_id);
INSERT IGNORE INTO schema_migrations (schema_name, version, name, checksum, applied_at_ms)
  VALUES ('room', 2, '002_room_outbox_type_index', '444731fb20382942ff071a4d6784bfeb5c49ae00bc5dd8d5689e5700c55034a0', FLOOR(UNIX_TIMESTAMP(NOW(3)) * 1000));

-- ---- schema/room/003_room_outbox_order_retry_park.sql ----
-- Per-room ordered delivery, due-time retries and parked rows (issue 11).
--
-- next_retry_at_ms: a pending row is not claimed before it (created_at_ms
-- for a new row, the retry strategy's due time after a failure), so rows
-- that keep failing stop occupying claims. resolved_by / resolved_at_ms /
-- resolution record who skipped a row, when and why.
ALTER TABLE room_outbox
  ADD COLUMN next_retry_at_ms BIGINT        NOT NULL DEFAULT 0,
  ADD COLUMN resolved_by      VARCHAR(128)  NULL,
  ADD COLUMN resolved_at_ms   BIGINT        NULL,
  ADD COLUMN resolution       VARCHAR(1024) NULL;

-- The claim's first step: due pending rows in due order (status =
-- 'pending' AND next_retry_at_ms <= now ORDER BY next_retry_at_ms): a range
-- of the due rows only, never the ones waiting for a retry.
ALTER TABLE room_outbox ADD KEY idx_room_outbox_due (status, next_retry_at_ms, event_id);

-- The claim's per-room step: one room's pending rows in room_seq order,
-- locked together so one room has one sender.
ALTER TABLE room_outbox ADD KEY idx_room_outbox_room (app_code, room_id, status, room_seq);

-- parked: cannot succeed as it is, waits for an operator; skipped: an
-- operator marked it done without a send.
ALTER TABLE room_outbox DROP CONSTRAINT ck_room_outbox_status;
ALTER TABLE room_outbox ADD CONSTRAINT ck_room_outbox_status CHECK (status IN ('pending', 'published', 'parked', 'skipped'));
INSERT IGNORE INTO schema_migrations (schema_name, version, name, checksum, applied_at_ms)
  VALUES ('room', 3, '003_room_outbox_order_retry_park', '34c7a1152728708a0b3d0b5db0bb8cafd5fba4bc521983e092ec17bd9b70d915', FLOOR(UNIX_TIMESTAMP(NOW(3)) * 1000));

-- ---- schema/room/004_command_request_hash_gift_outcomes.sql ----
-- Idempotency keys bound to their request (issue 14). request_hash is the
-- SHA-256 (hex) of the command's canonical encoding without command_id
-- and request_id: a command_id reused for a different command is refused
-- even after a restart, when only the log can tell. Rows written before
-- this column existed keep '' and are answered as before.
ALTER TABLE room_command_log ADD COLUMN request_hash VARCHAR(64) NOT NULL DEFAULT '' AFTER command_type;

-- The fence between a gift's room append and its refund (actors/wallet
-- doc). A gift's append inserts outcome 'sent' in its transaction; the
-- wallet reconciler (or the grain, after an append failed) inserts 'void'
-- before it refunds. The primary key lets exactly one of the two commit,
-- so a reservation is refunded only when its gift can never be appended.
CREATE TABLE IF NOT EXISTS room_gift_outcomes (
  app_code      VARCHAR(64)  NOT NULL,
  room_id       VARCHAR(128) NOT NULL,
  command_id    VARCHAR(128) NOT NULL,
  outcome       VARCHAR(8)   NOT NULL,
  created_at_ms BIGINT       NOT NULL,
  PRIMARY KEY (app_code, room_id, command_id),
  CONSTRAINT ck_room_gift_outcomes_outcome CHECK (outcome IN ('sent', 'void'))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
INSERT IGNORE INTO schema_migrations (schema_name, version, name, checksum, applied_at_ms)
  VALUES ('room', 4, '004_command_request_hash_gift_outcomes', '997efe265d6d960627877b18f03cb81003250a1aab19544e27c420bc2d69c63a', FLOOR(UNIX_TIMESTAMP(NOW(3)) * 1000));

-- ---- schema/room/005_room_fences.sql ----
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
INSERT IGNORE INTO schema_migrations (schema_name, version, name, checksum, applied_at_ms)
  VALUES ('room', 5, '005_room_fences', '1c6df65066c57af581e0077b49adbaa9f724d34314bd4425a2d4c2fb877d5fe7', FLOOR(UNIX_TIMESTAMP(NOW(3)) * 1000));

-- ---- schema/room/006_room_outbox_mq_progress.sql ----
-- The message-queue fanout's own progress (issue 11 item 5). status is the
-- IM channel's alone (seed 000); the fanout of room_outbox to the MQ topic
-- keeps mq_status and its own claim lease, so an MQ outage never makes an
-- IM message go again and an IM outage never holds back the fanout.
--
-- mq_status: 'none' (the fanout was off when the row was written; rows
-- from before this migration too), 'pending' (to be published),
-- 'published', 'parked' (can never be published as it is).
ALTER TABLE room_outbox
  ADD COLUMN mq_status          VARCHAR(16)  NOT NULL DEFAULT 'none',
  ADD COLUMN mq_published_at_ms BIGINT       NULL,
  ADD COLUMN mq_locked_by       VARCHAR(128) NULL,
  ADD COLUMN mq_lock_until_ms   BIGINT       NOT NULL DEFAULT 0;

-- The fanout's claim walks its pending rows oldest first; retention's
-- check and the backlog gauge read the same range.
ALTER TABLE room_outbox ADD KEY idx_room_outbox_mq (mq_status, created_at_ms, event_id);

ALTER TABLE room_outbox ADD CONSTRAINT ck_room_outbox_mq_status CHECK (mq_status IN ('none', 'pending', 'published', 'parked'));
INSERT IGNORE INTO schema_migrations (schema_name, version, name, checksum, applied_at_ms)
  VALUES ('room', 6, '006_room_outbox_mq_progress', '897a36de3b34704a4de67f10ea96b58b7461d7163d3b0cb27fa340ab3ca539a7', FLOOR(UNIX_TIMESTAMP(NOW(3)) * 1000));

-- ---- schema/room/007_room_outbox_room_lease.sql ----
-- The outbox claim asks, for a handful of rooms at once, how many rows
-- each has pending and whether any of them is under a live lease. With
-- this index both answers come from the index alone (no row lookups), so
-- a claim costs the same few statements whatever the rooms' depth; only
-- the leased entries (lock_until_ms > now, few) are looked up to see who
-- holds them.
ALTER TABLE room_outbox ADD KEY idx_room_outbox_room_lease (app_code, room_id, status, lock_until_ms);
INSERT IGNORE INTO schema_migrations (schema_name, version, name, checksum, applied_at_ms)
  VALUES ('room', 7, '007_room_outbox_room_lease', '70782f5c84191b8c2fe5c7148279cf990a2a064ee9729a1089637a342fe5d2f5', FLOOR(UNIX_TIMESTAMP(NOW(3)) * 1000));

-- ---- schema/room/008_room_outbox_room_mq.sql ----
-- The MQ fanout's claim takes whole rooms, as the IM relay's does: a room
-- is claimed only when none of its MQ-pending rows is under a live MQ
-- lease, and then its lowest MQ-pending rows in room_seq order (a claim by
-- time let a second fanout publish a room's later rows before the first
-- had published its earlier ones). This index answers both from the index
-- alone: per room, how many rows are MQ-pending and whether one is leased
-- (mq_lock_until_ms is in the entry), and its lowest MQ-pending rows in
-- (room_seq, event_id) order without a sort and without reading the room's
-- published history. event_id is the primary key, which InnoDB appends to
-- every entry anyway; naming it before mq_lock_until_ms keeps the order.
ALTER TABLE room_outbox ADD KEY idx_room_outbox_room_mq (app_code, room_id, mq_status, room_seq, event_id, mq_lock_until_ms);
INSERT IGNORE INTO schema_migrations (schema_name, version, name, checksum, applied_at_ms)
  VALUES ('room', 8, '008_room_outbox_room_mq', '6cf4cfee0ff192c008db8e984be628c29cf59b2f18cb9375a574b4c9a691fee1', FLOOR(UNIX_TIMESTAMP(NOW(3)) * 1000));

-- ---- schema/room/009_room_outbox_effects_done.sql ----
-- The effect steps of a row's event that its sender finished at Tencent
-- (the group message, a kick's ban, the audio room's removal, a close's
-- teardown), as bits delivery/roomim defines: a sender retrying the row in
-- another process skips them instead of doing them again (a group message
-- repeated after Tencent's 5-minute dedupe window reached the room twice).
-- Most rows have no effects and keep 0; no index reads it.
ALTER TABLE room_outbox ADD COLUMN effects_done INT UNSIGNED NOT NULL DEFAULT 0;
INSERT IGNORE INTO schema_migrations (schema_name, version, name, checksum, applied_at_ms)
  VALUES ('room', 9, '009_room_outbox_effects_done', '98c07e09db230bdfe467c69d0521c05efa6628fe8df04c903421aaaa06e0ad8f', FLOOR(UNIX_TIMESTAMP(NOW(3)) * 1000));

-- ---- schema/room/010_room_outbox_event_index.sql ----
-- A command's events share its room_seq; their order within it is the
-- event's index in the command. The event id's text ends with that index,
-- so ordering by it put the 11th event of a command before the 2nd (a
-- batch ban of 20 reached IM out of order). The claims order a room's rows
-- by (room_seq, event_index) instead, straight from the per-room indexes.
ALTER TABLE room_outbox ADD COLUMN event_index INT NOT NULL DEFAULT 0;

-- Rows still to be sent get their index from their id (room.EventID:
-- app:room:seq:index); sent rows only matter to operators' lists.
UPDATE room_outbox SET event_index = CAST(SUBSTRING_INDEX(event_id, ':', -1) AS UNSIGNED)
  WHERE (status IN ('pending', 'parked') OR mq_status = 'pending') AND event_id REGEXP ':[0-9]{1,9}$';

ALTER TABLE room_outbox DROP KEY idx_room_outbox_room, ADD KEY idx_room_outbox_room (app_code, room_id, status, room_seq, event_index);

ALTER TABLE room_outbox DROP KEY idx_room_outbox_room_mq, ADD KEY idx_room_outbox_room_mq (app_code, room_id, mq_status, room_seq, event_index, mq_lock_until_ms);
INSERT IGNORE INTO schema_migrations (schema_name, version, name, checksum, applied_at_ms)
  VALUES ('room', 10, '010_room_outbox_event_index', '0b53fa3d01695129bfa5e6bda625136868b2fa7478812bcfbdaa716518549128', FLOOR(UNIX_TIMESTAMP(NOW(3)) * 1000));

-- ---- schema/room/011_room_outbox_fewer_status_indexes.sql ----
-- Every published row is written twice (the claim's lease, then the
-- published mark), and each write moves the row's entry in every
-- secondary index holding a column it changes: the mark moved four
-- (status is in each of them), the lease one. Fewer indexes on the hot
-- columns make both writes cheaper without changing what they record:
--  * idx_room_outbox_room_lease (app_code, room_id, status, lock_until_ms)
--    folds into idx_room_outbox_room: the claim's per-room depth and lease
--    check still read the index alone, and its locking read walks the
--    same index in (room_seq, event_index) order;
--  * idx_room_outbox_due (status, next_retry_at_ms, event_id) is read by no
--    query (the claim walks rooms by age and checks each room's lowest
--    row's due time; the operators' bulk requeue of waiting rows filters
--    the pending backlog by next_retry_at_ms).
ALTER TABLE room_outbox DROP KEY idx_room_outbox_room, ADD KEY idx_room_outbox_room (app_code, room_id, status, room_seq, event_index, lock_until_ms);

ALTER TABLE room_outbox DROP KEY idx_room_outbox_room_lease;

ALTER TABLE room_outbox DROP KEY idx_room_outbox_due;
INSERT IGNORE INTO schema_migrations (schema_name, version, name, checksum, applied_at_ms)
  VALUES ('room', 11, '011_room_outbox_fewer_status_indexes', 'ef07ee816e8d1dc909fef11e80ec7e0375551526706141dcabaf2559f52d9f05', FLOOR(UNIX_TIMESTAMP(NOW(3)) * 1000));

-- ---- schema/room/012_room_command_log_sealed.sql ----
-- What a command's events carry beside their payloads (room.SealedOf: a
-- room password's verifier), kept with the log row and never with the
-- events or the outbox, so nothing that reads events sees it; replay
-- attaches it again. NULL for the rows without (nearly all).
ALTER TABLE room_command_log ADD COLUMN sealed VARBINARY(1024) NULL;
INSERT IGNORE INTO schema_migrations (schema_name, version, name, checksum, applied_at_ms)
  VALUES ('room', 12, '012_room_command_log_sealed', 'dd5bc198caccda3b34a12ef335eb04bbf68b691991d3aff231f6cc11595eaca0', FLOOR(UNIX_TIMESTAMP(NOW(3)) * 1000));

-- ---- schema/room/013_room_outbox_leases.sql ----
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
INSERT IGNORE INTO schema_migrations (schema_name, version, name, checksum, applied_at_ms)
  VALUES ('room', 13, '013_room_outbox_leases', '80627e2ac989b72a9499d2b529cbca5c46ab37730b26c021de45bebd20de049e', FLOOR(UNIX_TIMESTAMP(NOW(3)) * 1000));

-- ---- schema/room/014_room_outbox_marks_in_place.sql ----
-- A published mark (and the MQ fanout's) rewrites the row in place: no
-- column it sets changes length. Before, status went from 'pending' (7
-- bytes) to 'published' (9) and published_at_ms from NULL to a number, so
-- InnoDB rewrote the whole record (the envelope with it) for each mark;
-- an in-place update costs MariaDB about a third less CPU per mark. CHAR(9)
-- holds every status at 9 bytes (utf8mb4_bin pads with spaces and
-- compares without them; reads come back without them), and a row not
-- yet published has published_at_ms 0 instead of NULL. A mark leaves
-- locked_by as it was (readers show no lease on a row that is not
-- pending), so a row its publisher leased at insert is not resized either.
UPDATE room_outbox SET published_at_ms = 0 WHERE published_at_ms IS NULL;

UPDATE room_outbox SET mq_published_at_ms = 0 WHERE mq_published_at_ms IS NULL;

ALTER TABLE room_outbox
  MODIFY status             CHAR(9) NOT NULL DEFAULT 'pending',
  MODIFY mq_status          CHAR(9) NOT NULL DEFAULT 'none',
  MODIFY published_at_ms    BIGINT  NOT NULL DEFAULT 0,
  MODIFY mq_published_at_ms BIGINT  NOT NULL DEFAULT 0;
INSERT IGNORE INTO schema_migrations (schema_name, version, name, checksum, applied_at_ms)
  VALUES ('room', 14, '014_room_outbox_marks_in_place', 'c6c6d0c42ecc1347f81f460cb2966db8311107988626207159ebb1b605b72d76', FLOOR(UNIX_TIMESTAMP(NOW(3)) * 1000));

-- ---- schema/room/015_room_json_checked_by_store.sql ----
-- The store writes only envelopes it encoded itself (writeEnvelope: every
-- payload compacted by encoding/json, which refuses invalid JSON before
-- anything is written), so these checks only made MariaDB parse every
-- envelope again on insert, twice per event (the log's events array and
-- the outbox row's envelope): about a tenth of a durable join's database
-- CPU. An outbox row written by hand that is not JSON is still read
-- without harm (scanOutbox hands it to the relay as a corrupt envelope,
-- which parks it).
ALTER TABLE room_outbox DROP CONSTRAINT ck_room_outbox_envelope;

ALTER TABLE room_command_log DROP CONSTRAINT ck_room_command_log_events;
INSERT IGNORE INTO schema_migrations (schema_name, version, name, checksum, applied_at_ms)
  VALUES ('room', 15, '015_room_json_checked_by_store', '1cd0e97f35ca51f16ea0da2c86af49f82441dd4604633bd3b968f6f5ad4376ed', FLOOR(UNIX_TIMESTAMP(NOW(3)) * 1000));

-- ---- schema/room/016_room_outbox_mq_table.sql ----
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
INSERT IGNORE INTO schema_migrations (schema_name, version, name, checksum, applied_at_ms)
  VALUES ('room', 16, '016_room_outbox_mq_table', '0501c2b3642993e1362ed7ae0dd9814ca07d8fa4962b18c59a75da0abac0527b', FLOOR(UNIX_TIMESTAMP(NOW(3)) * 1000));
