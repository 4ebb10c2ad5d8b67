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
