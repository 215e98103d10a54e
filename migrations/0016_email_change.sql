-- Email changes take effect only once a link mailed to the new address is followed (issue #19):
-- sys.update_profile no longer changes the address, POST /auth/change-email records a pending
-- change (sys.request_email_change) and POST /auth/change-email/verify applies it
-- (sys.confirm_email_change). Like magic links: the token is stored as sha-256, used once, 15 minutes.

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

-- The caller's display name; the email only as a proof-free no-op (NULL or the current address,
-- in any case). Another address is refused: it would claim a mailbox nobody proved to own.
CREATE OR REPLACE FUNCTION sys.update_profile(p_email text, p_display_name text) RETURNS SETOF sys.signed_in_user
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_user_id uuid := nullif(current_setting('app.user_id', true), '')::uuid;
  v_current text;
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
  SELECT email INTO v_current FROM sys.users WHERE id = v_user_id;
  IF p_email IS NOT NULL AND v_current IS NOT NULL AND lower(p_email) <> lower(v_current) THEN
    RAISE EXCEPTION 'sys.update_profile does not change the email address: use POST /auth/change-email, which mails a confirmation link to the new address'
      USING ERRCODE = 'P0001',
        HINT = 'the change takes effect once the link is verified (POST /auth/change-email/verify); pass NULL or the current address to change only the display name';
  END IF;
  RETURN QUERY
  UPDATE sys.users
  SET display_name = coalesce(p_display_name, display_name), updated_at = now()
  WHERE id = v_user_id
  RETURNING id, email, display_name, role, password_hash IS NULL;
END
$$;

-- A pending change of the caller's (app.user_id) address and the token of its confirmation link.
-- NULL when another user has the address: nothing is mailed, and the caller's answer is the same,
-- so this cannot tell anyone which addresses have accounts. A new request replaces older ones.
-- Granted to anon only, like the magic-link functions: the service runs it for the signed-in
-- caller, and no SQL a client sends can (a client's SQL always runs as an app role).
CREATE FUNCTION sys.request_email_change(p_email text) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_user_id uuid := nullif(current_setting('app.user_id', true), '')::uuid;
  v_current text;
  v_token text := encode(extensions.gen_random_bytes(32), 'hex');
BEGIN
  SELECT email INTO v_current FROM sys.users WHERE id = v_user_id AND is_active;
  IF v_current IS NULL THEN
    RAISE EXCEPTION 'no signed-in user' USING ERRCODE = '28000';
  END IF;
  IF p_email IS NULL OR length(p_email) > 320 OR p_email !~ '^[^@\s]+@[^@\s]+$' THEN
    RAISE EXCEPTION 'invalid email address' USING ERRCODE = '22023';
  END IF;
  IF lower(p_email) = lower(v_current) THEN
    RAISE EXCEPTION 'this is already your email address' USING ERRCODE = '22023';
  END IF;
  DELETE FROM sys.email_changes WHERE user_id = v_user_id;
  IF EXISTS (SELECT FROM sys.users WHERE lower(email) = lower(p_email)) THEN
    RETURN NULL;
  END IF;
  INSERT INTO sys.email_changes (token_hash, user_id, new_email)
  VALUES (sha256(convert_to(v_token, 'UTF8')), v_user_id, p_email);
  RETURN v_token;
END
$$;

-- Apply a pending change: the token is consumed and the address changed in one transaction. No
-- row = invalid, spent, expired, or the user is inactive; 23505 when the address was taken since
-- (the token stays unspent then, and stays refused while the address is taken).
CREATE FUNCTION sys.confirm_email_change(p_token text) RETURNS SETOF sys.signed_in_user
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_user_id uuid;
  v_new_email text;
BEGIN
  UPDATE sys.email_changes AS c
  SET consumed_at = now()
  WHERE c.token_hash = sha256(convert_to(coalesce(p_token, ''), 'UTF8'))
    AND c.consumed_at IS NULL
    AND c.expires_at > now()
    AND EXISTS (SELECT FROM sys.users u WHERE u.id = c.user_id AND u.is_active)
  RETURNING c.user_id, c.new_email INTO v_user_id, v_new_email;
  IF v_user_id IS NULL THEN
    RETURN;
  END IF;
  RETURN QUERY
  UPDATE sys.users
  SET email = v_new_email, updated_at = now()
  WHERE id = v_user_id
  RETURNING id, email, display_name, role, password_hash IS NULL;
EXCEPTION
  WHEN unique_violation THEN
    RAISE EXCEPTION 'a user with this email already exists' USING ERRCODE = '23505';
END
$$;

REVOKE ALL ON FUNCTION sys.request_email_change(text), sys.confirm_email_change(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sys.request_email_change(text), sys.confirm_email_change(text) TO anon;
