-- Rate limits shared by every replica (RATE_LIMIT_STORE=postgres): a sliding-window log per key,
-- written and read by plinth.rate_limit_check and plinth.rate_limit_sweep (sql/sys/10_rate_limits.sql).

CREATE TABLE plinth.rate_limit_hits (
  key text NOT NULL CHECK (length(key) <= 512),
  at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX rate_limit_hits_key_at ON plinth.rate_limit_hits (key, at);
REVOKE ALL ON plinth.rate_limit_hits FROM PUBLIC;
