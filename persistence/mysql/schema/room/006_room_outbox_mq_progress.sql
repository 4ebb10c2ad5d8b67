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
