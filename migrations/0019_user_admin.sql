-- User administration (issue #24): owners and admins list users, deactivate and reactivate them,
-- change their roles and resend invitations (sys.list_users, sys.set_user_active,
-- sys.set_user_role, sys.resend_invite in sql/sys/13_user_admin.sql).
--
-- last_sign_in_at: set by every successful sign-in (magic link, password). invited_by: the user
-- who invited this one; NULL for a database administrator's invitation and for users invited before
-- this column existed.
ALTER TABLE sys.users
  ADD COLUMN last_sign_in_at timestamptz,
  ADD COLUMN invited_by uuid REFERENCES sys.users (id) ON DELETE SET NULL;

-- A spent magic link is a sign-in that happened; the newest one still kept is the best known time
-- (spent links are pruned as new ones are issued, so older sign-ins stay unknown: NULL).
UPDATE sys.users AS u
SET last_sign_in_at = l.at
FROM (SELECT user_id, max(consumed_at) AS at FROM sys.magic_links WHERE consumed_at IS NOT NULL GROUP BY user_id) AS l
WHERE l.user_id = u.id;

-- One user as the user administration functions show it.
CREATE TYPE sys.user_account AS (
  id uuid,
  email text,
  display_name text,
  role text,
  is_active boolean,
  needs_password boolean,
  created_at timestamptz,
  last_sign_in_at timestamptz,
  invited_by uuid
);
