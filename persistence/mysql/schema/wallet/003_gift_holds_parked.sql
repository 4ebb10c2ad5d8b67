-- Parked gift reservations. A reservation whose settlement keeps failing
-- is parked by the gift reconciler: no reconciler on any node tries it
-- again (a restart does not forget it) and an operator resolves it with
-- roomctl wallet hold confirm|refund from any node. parked_at_ms is 0 for
-- a reservation that is not parked; park_reason is the last failure, for
-- the operator. A settled row keeps both as history.
ALTER TABLE wallet_gift_holds
  ADD COLUMN parked_at_ms BIGINT       NOT NULL DEFAULT 0,
  ADD COLUMN park_reason  VARCHAR(512) NOT NULL DEFAULT '';

-- The reconciler's scan reads open rows that are not parked by age
-- (state = 'open' AND parked_at_ms = 0 ORDER BY created_at_ms): one range,
-- never the parked rows, however many there are. The operator's list of
-- parked rows (state = 'open' AND parked_at_ms > 0 ORDER BY parked_at_ms)
-- and the open-row metrics use the same index.
ALTER TABLE wallet_gift_holds
  DROP KEY idx_wallet_gift_holds_state_created,
  ADD KEY idx_wallet_gift_holds_state_parked_created (state, parked_at_ms, created_at_ms);
