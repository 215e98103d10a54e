-- Email changes take effect only once a link mailed to the new address is followed (issue #19):
-- POST /auth/change-email records a pending change (sys.request_email_change) and
-- POST /auth/change-email/verify applies it (sys.confirm_email_change), both in
-- sql/sys/01_identity.sql. Like magic links: the token is stored as sha-256, used once, 15 minutes.

CREATE TABLE sys.email_changes (
  -- sha-256 of the token: a stolen table yields no usable link.
  token_hash bytea PRIMARY KEY,
  user_id uuid NOT NULL REFERENCES sys.users (id) ON DELETE CASCADE,
  new_email text NOT NULL CHECK (length(new_email) <= 320 AND new_email ~ '^[^@\s]+@[^@\s]+$'),
  expires_at timestamptz NOT NULL DEFAULT now() + interval '15 minutes',
  consumed_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now()
);
-- Not unique on new_email: a pending change reserves nothing (an owner may still invite the address).
CREATE INDEX email_changes_user_id ON sys.email_changes (user_id);

REVOKE ALL ON sys.email_changes FROM PUBLIC;
ALTER TABLE sys.email_changes ENABLE ROW LEVEL SECURITY;
