-- Identity: users, magic links, and the database functions of spec §5.8 plus sys.update_profile.
-- The tables are reachable only through these SECURITY DEFINER functions: the app roles have no
-- privilege on them, and row-level security is on with no policy as a second wall.

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

-- A fresh one-time token for a user; only its hash is stored.
CREATE FUNCTION sys.issue_magic_link(p_user_id uuid) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_token text := encode(extensions.gen_random_bytes(32), 'hex');
BEGIN
  INSERT INTO sys.magic_links (token_hash, user_id) VALUES (sha256(convert_to(v_token, 'UTF8')), p_user_id);
  -- Spent and expired links are useless; keep the table small as it goes.
  DELETE FROM sys.magic_links WHERE user_id = p_user_id AND (consumed_at IS NOT NULL OR expires_at < now() - interval '1 day');
  RETURN v_token;
END
$$;

-- Verify credentials (the development-only /auth/login). No row = refused; unknown emails cost a
-- bcrypt comparison too, so timing does not reveal which addresses exist.
CREATE FUNCTION sys.login(p_email text, p_password text) RETURNS SETOF sys.signed_in_user
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_user sys.users;
BEGIN
  SELECT * INTO v_user FROM sys.users WHERE lower(email) = lower(p_email);
  IF v_user.id IS NULL OR v_user.password_hash IS NULL THEN
    PERFORM extensions.crypt(coalesce(p_password, ''), '$2a$10$abcdefghijklmnopqrstuu');
    RETURN;
  END IF;
  IF extensions.crypt(coalesce(p_password, ''), v_user.password_hash) <> v_user.password_hash OR NOT v_user.is_active THEN
    RETURN;
  END IF;
  RETURN NEXT (v_user.id, v_user.email, v_user.display_name, v_user.role, false)::sys.signed_in_user;
END
$$;

-- A sign-in link for an active user; NULL for an unknown or inactive email (the caller answers
-- the same either way).
CREATE FUNCTION sys.create_magic_link(p_email text) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_user_id uuid;
BEGIN
  SELECT id INTO v_user_id FROM sys.users WHERE lower(email) = lower(p_email) AND is_active;
  IF v_user_id IS NULL THEN
    RETURN NULL;
  END IF;
  RETURN sys.issue_magic_link(v_user_id);
END
$$;

-- Consume a token: one UPDATE, so of two concurrent verifications exactly one wins. No row =
-- invalid, reused, expired, or the user is inactive.
CREATE FUNCTION sys.verify_magic_link(p_token text) RETURNS SETOF sys.signed_in_user
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  RETURN QUERY
  WITH consumed AS (
    UPDATE sys.magic_links AS l
    SET consumed_at = now()
    WHERE l.token_hash = sha256(convert_to(coalesce(p_token, ''), 'UTF8'))
      AND l.consumed_at IS NULL
      AND l.expires_at > now()
      AND EXISTS (SELECT FROM sys.users u WHERE u.id = l.user_id AND u.is_active)
    RETURNING l.user_id
  )
  SELECT u.id, u.email, u.display_name, u.role, u.password_hash IS NULL
  FROM consumed c JOIN sys.users u ON u.id = c.user_id;
END
$$;

-- Create a user without a password and return a sign-in token for the invitation. Owners may
-- invite any role, admins only staff and member; a database administrator (no app role set)
-- may invite anyone, which is how the first owner comes to be.
CREATE FUNCTION sys.invite_user(p_email text, p_role text) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_caller text := current_setting('role');
  v_user_id uuid;
BEGIN
  IF p_role IS NULL OR p_role NOT IN ('owner', 'admin', 'staff', 'member') THEN
    RAISE EXCEPTION 'invalid role: %', coalesce(p_role, 'null') USING ERRCODE = '22023',
      HINT = 'role must be one of owner, admin, staff, member';
  END IF;
  IF v_caller = 'admin' AND p_role NOT IN ('staff', 'member') THEN
    RAISE EXCEPTION 'an admin may invite only staff and member' USING ERRCODE = '42501';
  ELSIF v_caller NOT IN ('owner', 'admin', 'none') THEN
    RAISE EXCEPTION 'only an owner or an admin may invite users' USING ERRCODE = '42501';
  END IF;
  IF p_email IS NULL OR length(p_email) > 320 OR p_email !~ '^[^@\s]+@[^@\s]+$' THEN
    RAISE EXCEPTION 'invalid email address' USING ERRCODE = '22023';
  END IF;
  INSERT INTO sys.users (email, role, display_name)
  VALUES (p_email, p_role, left(split_part(p_email, '@', 1), 200))
  RETURNING id INTO v_user_id;
  RETURN sys.issue_magic_link(v_user_id);
EXCEPTION
  WHEN unique_violation THEN
    RAISE EXCEPTION 'a user with this email already exists' USING ERRCODE = '23505';
END
$$;

-- Set the caller's first password (the user is app.user_id); a second set is a conflict.
CREATE FUNCTION sys.set_initial_password(p_password text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_user_id uuid := nullif(current_setting('app.user_id', true), '')::uuid;
BEGIN
  IF v_user_id IS NULL OR NOT EXISTS (SELECT FROM sys.users WHERE id = v_user_id) THEN
    RAISE EXCEPTION 'no signed-in user' USING ERRCODE = '28000';
  END IF;
  IF p_password IS NULL OR length(p_password) < 8 OR length(p_password) > 128 THEN
    RAISE EXCEPTION 'password must be 8 to 128 characters' USING ERRCODE = '22023';
  END IF;
  UPDATE sys.users
  SET password_hash = extensions.crypt(p_password, extensions.gen_salt('bf', 10)), updated_at = now()
  WHERE id = v_user_id AND password_hash IS NULL;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'password already set' USING ERRCODE = '23000';
  END IF;
END
$$;

-- Update the caller's own email and display name; NULL leaves a field as it is.
CREATE FUNCTION sys.update_profile(p_email text, p_display_name text) RETURNS SETOF sys.signed_in_user
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_user_id uuid := nullif(current_setting('app.user_id', true), '')::uuid;
BEGIN
  IF v_user_id IS NULL THEN
    RAISE EXCEPTION 'no signed-in user' USING ERRCODE = '28000';
  END IF;
  IF p_email IS NOT NULL AND (length(p_email) > 320 OR p_email !~ '^[^@\s]+@[^@\s]+$') THEN
    RAISE EXCEPTION 'invalid email address' USING ERRCODE = '22023';
  END IF;
  IF p_display_name IS NOT NULL AND length(p_display_name) > 200 THEN
    RAISE EXCEPTION 'display name is longer than 200 characters' USING ERRCODE = '22023';
  END IF;
  RETURN QUERY
  UPDATE sys.users
  SET email = coalesce(p_email, email), display_name = coalesce(p_display_name, display_name), updated_at = now()
  WHERE id = v_user_id
  RETURNING id, email, display_name, role, password_hash IS NULL;
EXCEPTION
  WHEN unique_violation THEN
    RAISE EXCEPTION 'a user with this email already exists' USING ERRCODE = '23505';
END
$$;

REVOKE ALL ON FUNCTION sys.issue_magic_link(uuid), sys.login(text, text), sys.create_magic_link(text),
  sys.verify_magic_link(text), sys.invite_user(text, text), sys.set_initial_password(text),
  sys.update_profile(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sys.login(text, text), sys.create_magic_link(text), sys.verify_magic_link(text) TO anon;
GRANT EXECUTE ON FUNCTION sys.invite_user(text, text) TO owner, admin;
GRANT EXECUTE ON FUNCTION sys.set_initial_password(text), sys.update_profile(text, text) TO owner, admin, staff, member;
