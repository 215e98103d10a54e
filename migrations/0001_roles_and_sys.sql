-- The spec's roles (cluster-wide, so created only when missing), the login roles the services
-- connect as, and the `sys` schema that holds Plinth's own tables and functions.

DO $$
DECLARE
  app_role text;
BEGIN
  FOREACH app_role IN ARRAY ARRAY['owner', 'admin', 'staff', 'member', 'anon'] LOOP
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = app_role) THEN
      EXECUTE format('CREATE ROLE %I NOLOGIN', app_role);
    END IF;
  END LOOP;
  -- The main service: it owns nothing and can act only by switching to one of the five roles.
  IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'authenticator') THEN
    CREATE ROLE authenticator LOGIN NOINHERIT NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION;
  END IF;
  -- The chat service: writes conversations under a user_id condition and runs tools as owner/admin.
  IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'chat_authenticator') THEN
    CREATE ROLE chat_authenticator LOGIN NOINHERIT NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION;
  END IF;
END
$$;

GRANT owner, admin, staff, member, anon TO authenticator;
GRANT owner, admin TO chat_authenticator;

CREATE SCHEMA IF NOT EXISTS sys;
REVOKE ALL ON SCHEMA sys FROM PUBLIC;
GRANT USAGE ON SCHEMA sys TO owner, admin, staff, member, anon, chat_authenticator;

-- Nobody but the migrations creates objects in public; the app roles use what they are granted.
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
GRANT USAGE ON SCHEMA public TO owner, admin, staff, member, anon;
