-- User administration (issue #24): list users, deactivate and reactivate them, change their roles,
-- resend invitations. Owners manage everyone; admins only staff and members, and make nobody an
-- owner or an admin; nobody deactivates or demotes themselves; the last active owner stays an
-- active owner. A database administrator (no app role: `plinth users`) manages like an owner.
-- Refusals: 42501 (403) for who may not, 23000 (409) for a state that forbids it, P0002 for an
-- unknown user, 22023 for a bad value.

-- The rights of the caller: 'owner', 'admin' or 'none' (a database administrator). The account
-- behind the token must still be active and hold its role (or be an owner since): a JWT outlives
-- a deactivation or a demotion, and must not undo it.
CREATE OR REPLACE FUNCTION sys.require_user_manager() RETURNS text
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_caller text := current_setting('role');
  v_user_id uuid := nullif(current_setting('app.user_id', true), '')::uuid;
BEGIN
  IF v_caller NOT IN ('owner', 'admin', 'none') THEN
    RAISE EXCEPTION 'only an owner or an admin may manage users' USING ERRCODE = '42501';
  END IF;
  IF v_caller <> 'none' AND NOT EXISTS (
    SELECT FROM sys.users WHERE id = v_user_id AND is_active AND role IN (v_caller, 'owner')
  ) THEN
    RAISE EXCEPTION 'your account was deactivated or its role changed since you signed in: sign in again'
      USING ERRCODE = '42501';
  END IF;
  RETURN v_caller;
END
$$;

-- The target of a change, locked until the transaction ends. The active owners are locked first,
-- always in one order: two changes that together could leave no active owner (two owners demoting
-- each other) run one after the other, and the second sees the first's outcome; none deadlocks.
CREATE OR REPLACE FUNCTION sys.locked_user(p_user_id uuid) RETURNS sys.users
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_user sys.users;
BEGIN
  PERFORM FROM sys.users WHERE role = 'owner' AND is_active ORDER BY id FOR UPDATE;
  SELECT * INTO v_user FROM sys.users WHERE id = p_user_id FOR UPDATE;
  IF v_user.id IS NULL THEN
    RAISE EXCEPTION 'no user with id %', coalesce(p_user_id::text, 'null') USING ERRCODE = 'P0002';
  END IF;
  RETURN v_user;
END
$$;

-- Whether p_user is the caller (a database administrator is nobody).
CREATE OR REPLACE FUNCTION sys.is_caller(p_user sys.users) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT coalesce(p_user.id = nullif(current_setting('app.user_id', true), '')::uuid, false)
$$;

-- Admins manage only staff and members.
CREATE OR REPLACE FUNCTION sys.check_may_manage(p_caller text, p_user sys.users) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF p_caller = 'admin' AND p_user.role NOT IN ('staff', 'member') THEN
    IF sys.is_caller(p_user) THEN
      RAISE EXCEPTION 'you cannot manage your own account: an admin manages only staff and members' USING ERRCODE = '42501';
    END IF;
    RAISE EXCEPTION 'an admin may manage only staff and members, and % is %', p_user.email, p_user.role USING ERRCODE = '42501';
  END IF;
END
$$;

-- Refuses to leave no active owner: p_user (locked by sys.locked_user, with the other active
-- owners) is about to stop being an active owner.
CREATE OR REPLACE FUNCTION sys.keep_an_owner(p_user sys.users, p_what text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF p_user.role = 'owner' AND p_user.is_active
    AND NOT EXISTS (SELECT FROM sys.users WHERE role = 'owner' AND is_active AND id <> p_user.id) THEN
    RAISE EXCEPTION 'cannot % %: they are the last active owner (make another user an owner first)', p_what, p_user.email
      USING ERRCODE = '23000';
  END IF;
END
$$;

CREATE OR REPLACE FUNCTION sys.user_account_of(p_user sys.users) RETURNS sys.user_account
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT (p_user.id, p_user.email, p_user.display_name, p_user.role, p_user.is_active, p_user.password_hash IS NULL,
    p_user.created_at, p_user.last_sign_in_at, p_user.invited_by)::sys.user_account
$$;

-- Every user, oldest first.
CREATE OR REPLACE FUNCTION sys.list_users() RETURNS SETOF sys.user_account
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM sys.require_user_manager();
  RETURN QUERY SELECT (sys.user_account_of(u)).* FROM sys.users u ORDER BY u.created_at, lower(u.email);
END
$$;

-- Deactivates (refused at once by every sign-in; issued JWTs stay valid until they expire) or
-- reactivates a user.
CREATE OR REPLACE FUNCTION sys.set_user_active(p_user_id uuid, p_active boolean) RETURNS sys.user_account
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_caller text := sys.require_user_manager();
  v_user sys.users;
BEGIN
  IF p_active IS NULL THEN
    RAISE EXCEPTION 'active must be true or false' USING ERRCODE = '22023';
  END IF;
  v_user := sys.locked_user(p_user_id);
  PERFORM sys.check_may_manage(v_caller, v_user);
  IF v_user.is_active = p_active THEN
    RETURN sys.user_account_of(v_user);
  END IF;
  IF NOT p_active THEN
    PERFORM sys.keep_an_owner(v_user, 'deactivate');
    IF sys.is_caller(v_user) THEN
      RAISE EXCEPTION 'you cannot deactivate yourself' USING ERRCODE = '42501';
    END IF;
  END IF;
  UPDATE sys.users SET is_active = p_active, updated_at = now() WHERE id = v_user.id RETURNING * INTO v_user;
  PERFORM sys.record_audit_event('user.set_active', v_user.id::text, jsonb_build_object('active', p_active));
  RETURN sys.user_account_of(v_user);
END
$$;

-- Gives a user another role. Takes effect at their next sign-in: issued JWTs keep their role.
CREATE OR REPLACE FUNCTION sys.set_user_role(p_user_id uuid, p_role text) RETURNS sys.user_account
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_caller text := sys.require_user_manager();
  v_user sys.users;
BEGIN
  IF p_role IS NULL OR p_role NOT IN ('owner', 'admin', 'staff', 'member') THEN
    RAISE EXCEPTION 'invalid role: %', coalesce(p_role, 'null') USING ERRCODE = '22023',
      HINT = 'role must be one of owner, admin, staff, member';
  END IF;
  v_user := sys.locked_user(p_user_id);
  PERFORM sys.check_may_manage(v_caller, v_user);
  IF v_caller = 'admin' AND p_role NOT IN ('staff', 'member') THEN
    RAISE EXCEPTION 'an admin may not make anyone %', p_role USING ERRCODE = '42501';
  END IF;
  IF v_user.role = p_role THEN
    RETURN sys.user_account_of(v_user);
  END IF;
  PERFORM sys.keep_an_owner(v_user, 'demote');
  IF sys.is_caller(v_user) THEN
    RAISE EXCEPTION 'you cannot change your own role' USING ERRCODE = '42501';
  END IF;
  PERFORM sys.record_audit_event('user.set_role', v_user.id::text, jsonb_build_object('from', v_user.role, 'to', p_role));
  UPDATE sys.users SET role = p_role, updated_at = now() WHERE id = v_user.id RETURNING * INTO v_user;
  RETURN sys.user_account_of(v_user);
END
$$;

-- A fresh invitation link for a user who has not signed in yet (their earlier links stay valid
-- until they expire): the address to mail and the token. Someone who has signed in gets no link
-- here: its token would let whoever called this sign in as them. They ask for a sign-in link
-- themselves (POST /auth/magic-link).
CREATE OR REPLACE FUNCTION sys.resend_invite(p_user_id uuid) RETURNS TABLE (email text, token text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_caller text := sys.require_user_manager();
  v_user sys.users := sys.locked_user(p_user_id);
BEGIN
  PERFORM sys.check_may_manage(v_caller, v_user);
  IF NOT v_user.is_active THEN
    RAISE EXCEPTION '% is deactivated: activate them before resending the invitation', v_user.email USING ERRCODE = '23000';
  END IF;
  IF v_user.last_sign_in_at IS NOT NULL OR v_user.password_hash IS NOT NULL
    OR EXISTS (SELECT FROM sys.magic_links l WHERE l.user_id = v_user.id AND l.consumed_at IS NOT NULL) THEN
    RAISE EXCEPTION '% has signed in already: they request a sign-in link on the sign-in page', v_user.email USING ERRCODE = '23000',
      HINT = 'POST /auth/magic-link {"email": "..."} mails a sign-in link to an active user';
  END IF;
  PERFORM sys.record_audit_event('user.resend_invite', v_user.id::text);
  RETURN QUERY SELECT v_user.email, sys.issue_magic_link(v_user.id);
END
$$;

REVOKE ALL ON FUNCTION sys.require_user_manager(), sys.locked_user(uuid), sys.check_may_manage(text, sys.users),
  sys.is_caller(sys.users), sys.keep_an_owner(sys.users, text),
  sys.user_account_of(sys.users), sys.list_users(), sys.set_user_active(uuid, boolean), sys.set_user_role(uuid, text),
  sys.resend_invite(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sys.list_users(), sys.set_user_active(uuid, boolean), sys.set_user_role(uuid, text),
  sys.resend_invite(uuid) TO owner, admin;
