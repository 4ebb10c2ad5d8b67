-- hyapp_wallet: balances, ledger, VIP state, idempotency records and the
-- wallet_outbox of seed 003. Amounts are BIGINT minor units; no float.
-- Identifiers compare byte for byte (utf8mb4_bin), as go-memdb does.

-- One balance per (app_code, user_id, asset_type). balance_version goes up
-- by one per change; the CHECK is the last line of defence against an
-- overdraft (the service refuses first).
CREATE TABLE IF NOT EXISTS wallet_accounts (
  app_code        VARCHAR(64)  NOT NULL,
  user_id         VARCHAR(64)  NOT NULL,
  asset_type      VARCHAR(16)  NOT NULL,
  available       BIGINT       NOT NULL DEFAULT 0,
  frozen          BIGINT       NOT NULL DEFAULT 0,
  balance_version BIGINT       NOT NULL DEFAULT 0,
  created_at_ms   BIGINT       NOT NULL,
  updated_at_ms   BIGINT       NOT NULL,
  PRIMARY KEY (app_code, user_id, asset_type),
  CONSTRAINT chk_wallet_accounts_non_negative CHECK (available >= 0 AND frozen >= 0)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- One row per committed command: the unique key (app_code, command_id) is
-- the idempotency fence, result the reply replayed for a repeat and
-- fingerprint the request it answered.
CREATE TABLE IF NOT EXISTS wallet_transactions (
  transaction_id VARCHAR(64)  NOT NULL,
  app_code       VARCHAR(64)  NOT NULL,
  command_id     VARCHAR(64)  NOT NULL,
  kind           VARCHAR(16)  NOT NULL,
  fingerprint    VARCHAR(512) NOT NULL,
  result         JSON         NOT NULL,
  created_at_ms  BIGINT       NOT NULL,
  PRIMARY KEY (transaction_id),
  UNIQUE KEY uk_wallet_transactions_command (app_code, command_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- One entry per changed account per transaction. The unique key refuses
-- two entries for one version and serves the per-account history scan.
CREATE TABLE IF NOT EXISTS wallet_ledger (
  id              BIGINT      NOT NULL AUTO_INCREMENT,
  transaction_id  VARCHAR(64) NOT NULL,
  command_id      VARCHAR(64) NOT NULL,
  app_code        VARCHAR(64) NOT NULL,
  user_id         VARCHAR(64) NOT NULL,
  asset_type      VARCHAR(16) NOT NULL,
  available_delta BIGINT      NOT NULL,
  frozen_delta    BIGINT      NOT NULL,
  available_after BIGINT      NOT NULL,
  frozen_after    BIGINT      NOT NULL,
  balance_version BIGINT      NOT NULL,
  created_at_ms   BIGINT      NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_wallet_ledger_version (app_code, user_id, asset_type, balance_version),
  KEY idx_wallet_ledger_transaction (transaction_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- VIP state per user; expires_at_ms <= now means no VIP.
CREATE TABLE IF NOT EXISTS wallet_vip (
  app_code      VARCHAR(64) NOT NULL,
  user_id       VARCHAR(64) NOT NULL,
  level         INT         NOT NULL DEFAULT 0,
  started_at_ms BIGINT      NOT NULL DEFAULT 0,
  expires_at_ms BIGINT      NOT NULL DEFAULT 0,
  created_at_ms BIGINT      NOT NULL,
  updated_at_ms BIGINT      NOT NULL,
  PRIMARY KEY (app_code, user_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Facts for the notice service (seed 003), written in the wallet
-- transaction. event_id is the dedupe key; id is an ascending scan cursor
-- for readers (taken at insert, so it can become visible out of order);
-- (status, created_at_ms) serves a pending scan by time.
CREATE TABLE IF NOT EXISTS wallet_outbox (
  id            BIGINT       NOT NULL AUTO_INCREMENT,
  event_id      VARCHAR(191) NOT NULL,
  app_code      VARCHAR(64)  NOT NULL,
  user_id       VARCHAR(64)  NOT NULL,
  event_type    VARCHAR(64)  NOT NULL,
  payload       JSON         NOT NULL,
  status        VARCHAR(16)  NOT NULL DEFAULT 'pending',
  created_at_ms BIGINT       NOT NULL,
  updated_at_ms BIGINT       NOT NULL,
  PRIMARY KEY (event_id),
  UNIQUE KEY uk_wallet_outbox_id (id),
  KEY idx_wallet_outbox_status_created (status, created_at_ms),
  KEY idx_wallet_outbox_user (app_code, user_id, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
