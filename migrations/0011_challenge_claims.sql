-- Bot-check tokens already presented, shared by every replica (with RATE_LIMIT_STORE=postgres), so
-- a token is accepted once whichever replica sees it. Only a digest of the token is kept.
-- (plinth.challenge_claim and plinth.challenge_release are in sql/sys/11_challenge_claims.sql.)

CREATE TABLE plinth.challenge_claims (
  key text PRIMARY KEY CHECK (length(key) <= 64),
  expires_at timestamptz NOT NULL
);
CREATE INDEX challenge_claims_expires_at ON plinth.challenge_claims (expires_at);
REVOKE ALL ON plinth.challenge_claims FROM PUBLIC;
