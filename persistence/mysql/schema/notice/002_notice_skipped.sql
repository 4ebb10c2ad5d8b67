-- skipped: a dead letter an operator gave up (roomctl notice bulk-skip):
-- it is no longer failed, so it stops counting as a dead letter, and it
-- is never sent. last_error records who, why and the error it died of.
ALTER TABLE notice_delivery_events DROP CONSTRAINT ck_notice_status,
  ADD CONSTRAINT ck_notice_status CHECK (status IN ('delivering', 'retryable', 'delivered', 'failed', 'skipped'));
