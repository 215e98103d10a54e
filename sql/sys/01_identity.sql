-- Identity (spec §5.8, §2.3): sign-in, magic links, invitations, passwords, the caller's profile and
-- email changes. The tables (migrations 0002, 0016) are reachable only through these SECURITY
-- DEFINER functions: the app roles have no privilege on them.

-- An address as sys.users accepts it (its CHECK says the same): something@something, 320 characters at most.
CREATE OR REPLACE FUNCTION sys.is_email(p_email text) RETURNS boolean
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT length(p_email) <= 320 AND p_email ~ '^[^@\s]+@[^@\s]+$'
$$;

-- A fresh one-time token for a user; only its hash is stored.
CREATE OR REPLACE FUNCTION sys.issue_magic_link(p_user_id uuid) RETURNS text
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
-- bcrypt comparison too, so timing does not reveal which addresses exist. A refusal is an audit
-- event too (by the address's hash, never the address): it returns rather than raises, so the
-- event stays.
CREATE OR REPLACE FUNCTION sys.login(p_email text, p_password text) RETURNS SETOF sys.signed_in_user
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_user sys.users;
BEGIN
  SELECT * INTO v_user FROM sys.users WHERE lower(email) = lower(p_email);
  IF v_user.id IS NULL OR v_user.password_hash IS NULL THEN
    PERFORM extensions.crypt(coalesce(p_password, ''), '$2a$10$abcdefghijklmnopqrstuu');
    PERFORM sys.record_audit_event('user.sign_in_failed', sys.email_hash(p_email), '{"method": "password"}');
    RETURN;
  END IF;
  IF extensions.crypt(coalesce(p_password, ''), v_user.password_hash) <> v_user.password_hash OR NOT v_user.is_active THEN
    PERFORM sys.record_audit_event('user.sign_in_failed', sys.email_hash(p_email), '{"method": "password"}');
    RETURN;
  END IF;
  UPDATE sys.users SET last_sign_in_at = now() WHERE id = v_user.id;
  PERFORM sys.record_audit_event('user.sign_in', v_user.id::text, '{"method": "password"}', v_user.id);
  RETURN NEXT (v_user.id, v_user.email, v_user.display_name, v_user.role, false)::sys.signed_in_user;
END
$$;

-- A sign-in link for an active user; NULL for an unknown or inactive email (the caller answers
-- the same either way), which is a failed sign-in in the audit trail (by the address's hash).
CREATE OR REPLACE FUNCTION sys.create_magic_link(p_email text) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_user_id uuid;
BEGIN
  SELECT id INTO v_user_id FROM sys.users WHERE lower(email) = lower(p_email) AND is_active;
  IF v_user_id IS NULL THEN
    PERFORM sys.record_audit_event('user.sign_in_failed', sys.email_hash(p_email), '{"method": "magic_link"}');
    RETURN NULL;
  END IF;
  RETURN sys.issue_magic_link(v_user_id);
END
$$;

-- Consume a token: one UPDATE, so of two concurrent verifications exactly one wins. No row =
-- invalid, reused, expired, or the user is inactive; a link that exists but cannot be used is a
-- failed sign-in in the audit trail (by its user's address's hash; a token that matches no link
-- names nobody, and is no event).
CREATE OR REPLACE FUNCTION sys.verify_magic_link(p_token text) RETURNS SETOF sys.signed_in_user
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_user sys.signed_in_user;
BEGIN
  WITH consumed AS (
    UPDATE sys.magic_links AS l
    SET consumed_at = now()
    WHERE l.token_hash = sha256(convert_to(coalesce(p_token, ''), 'UTF8'))
      AND l.consumed_at IS NULL
      AND l.expires_at > now()
      AND EXISTS (SELECT FROM sys.users u WHERE u.id = l.user_id AND u.is_active)
    RETURNING l.user_id
  )
  SELECT u.id, u.email, u.display_name, u.role, u.password_hash IS NULL INTO v_user
  FROM consumed c JOIN sys.users u ON u.id = c.user_id;
  IF v_user.id IS NULL THEN
    PERFORM sys.record_audit_event('user.sign_in_failed', sys.email_hash(u.email), '{"method": "magic_link"}')
    FROM sys.magic_links l JOIN sys.users u ON u.id = l.user_id
    WHERE l.token_hash = sha256(convert_to(coalesce(p_token, ''), 'UTF8'));
    RETURN;
  END IF;
  UPDATE sys.users SET last_sign_in_at = now() WHERE id = v_user.id;
  PERFORM sys.record_audit_event('user.sign_in', v_user.id::text, '{"method": "magic_link"}', v_user.id);
  RETURN NEXT v_user;
END
$$;

-- Create a user without a password and return a sign-in token for the invitation. Owners may
-- invite any role, admins only staff and member; a database administrator (no app role set)
-- may invite anyone, which is how the first owner comes to be.
CREATE OR REPLACE FUNCTION sys.invite_user(p_email text, p_role text) RETURNS text
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
  IF NOT coalesce(sys.is_email(p_email), false) THEN
    RAISE EXCEPTION 'invalid email address' USING ERRCODE = '22023';
  END IF;
  -- The inviter, when the caller is a user (a token's sub may name no user: then none).
  INSERT INTO sys.users (email, role, display_name, invited_by)
  VALUES (p_email, p_role, left(split_part(p_email, '@', 1), 200),
    (SELECT id FROM sys.users WHERE id = nullif(current_setting('app.user_id', true), '')::uuid))
  RETURNING id INTO v_user_id;
  PERFORM sys.record_audit_event('user.invite', v_user_id::text, jsonb_build_object('role', p_role));
  RETURN sys.issue_magic_link(v_user_id);
EXCEPTION
  WHEN unique_violation THEN
    RAISE EXCEPTION 'a user with this email already exists' USING ERRCODE = '23505';
END
$$;

-- Set the caller's first password (the user is app.user_id); a second set is a conflict.
CREATE OR REPLACE FUNCTION sys.set_initial_password(p_password text) RETURNS void
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
  PERFORM sys.record_audit_event('user.password_set', v_user_id::text);
END
$$;

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
  IF p_email IS NOT NULL AND NOT sys.is_email(p_email) THEN
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
CREATE OR REPLACE FUNCTION sys.request_email_change(p_email text) RETURNS text
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
  IF NOT coalesce(sys.is_email(p_email), false) THEN
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
CREATE OR REPLACE FUNCTION sys.confirm_email_change(p_token text) RETURNS SETOF sys.signed_in_user
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
  PERFORM sys.record_audit_event('user.email_change', v_user_id::text, '{}', v_user_id);
EXCEPTION
  WHEN unique_violation THEN
    RAISE EXCEPTION 'a user with this email already exists' USING ERRCODE = '23505';
END
$$;

REVOKE ALL ON FUNCTION sys.is_email(text), sys.issue_magic_link(uuid), sys.login(text, text), sys.create_magic_link(text),
  sys.verify_magic_link(text), sys.invite_user(text, text), sys.set_initial_password(text),
  sys.update_profile(text, text), sys.request_email_change(text), sys.confirm_email_change(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sys.login(text, text), sys.create_magic_link(text), sys.verify_magic_link(text) TO anon;
GRANT EXECUTE ON FUNCTION sys.request_email_change(text), sys.confirm_email_change(text) TO anon;
GRANT EXECUTE ON FUNCTION sys.invite_user(text, text) TO owner, admin;
GRANT EXECUTE ON FUNCTION sys.set_initial_password(text), sys.update_profile(text, text) TO owner, admin, staff, member;
