-- Identity: users, magic links, and the shape the sign-in functions of spec §5.8 return (the
-- functions are in sql/sys/01_identity.sql). The tables are reachable only through those SECURITY
-- DEFINER functions: the app roles have no privilege on them, and row-level security is on with no
-- policy as a second wall.

CREATE SCHEMA IF NOT EXISTS extensions;
REVOKE ALL ON SCHEMA extensions FROM PUBLIC;
CREATE EXTENSION IF NOT EXISTS pgcrypto WITH SCHEMA extensions;

CREATE TABLE sys.users (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  email text NOT NULL CHECK (length(email) <= 320 AND email ~ '^[^@\s]+@[^@\s]+$'),
  display_name text NOT NULL DEFAULT '' CHECK (length(display_name) <= 200),
  role text NOT NULL CHECK (role IN ('owner', 'admin', 'staff', 'member')),
  password_hash text,
  is_active boolean NOT NULL DEFAULT true,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
-- One account per mailbox, whatever the case the address was typed in.
CREATE UNIQUE INDEX users_email_key ON sys.users (lower(email));

CREATE TABLE sys.magic_links (
  -- sha-256 of the token: a stolen table yields no usable link.
  token_hash bytea PRIMARY KEY,
  user_id uuid NOT NULL REFERENCES sys.users (id) ON DELETE CASCADE,
  expires_at timestamptz NOT NULL DEFAULT now() + interval '15 minutes',
  consumed_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX magic_links_user_id ON sys.magic_links (user_id);

REVOKE ALL ON sys.users, sys.magic_links FROM PUBLIC;
ALTER TABLE sys.users ENABLE ROW LEVEL SECURITY;
ALTER TABLE sys.magic_links ENABLE ROW LEVEL SECURITY;

-- The shape every sign-in function returns (spec §2.3).
CREATE TYPE sys.signed_in_user AS (
  id uuid,
  email text,
  display_name text,
  role text,
  needs_password boolean
);
