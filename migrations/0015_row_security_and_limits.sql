-- Security hardening (issue #19): chats and UI metadata are filtered by row-level security, not
-- only by a view's WHERE, and every statement of the login roles has bounded temporary files and
-- sort/hash memory.

-- ---------------------------------------------------------------------------------------------
-- Chats (finding 1)

-- A plain view's WHERE may run after a caller's own condition (`WHERE content::text::bool`), whose
-- error message then shows another user's row; row-level security is evaluated first.
ALTER TABLE sys.conversations ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
ALTER TABLE sys.messages ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;

-- The chat service scopes every statement by the caller's user id itself and closes other users'
-- abandoned replies as it starts (Conversations.failAbandoned), so it is not keyed on app.user_id.
CREATE POLICY chat_service ON sys.conversations FOR ALL TO chat_authenticator USING (true) WITH CHECK (true);
CREATE POLICY chat_service ON sys.messages FOR ALL TO chat_authenticator USING (true) WITH CHECK (true);

-- Anyone else who reads them (the views' owner where it is not a superuser): the caller's own rows.
CREATE POLICY own_rows ON sys.conversations FOR SELECT
  USING (user_id = nullif(current_setting('app.user_id', true), '')::uuid);
CREATE POLICY own_rows ON sys.messages FOR SELECT
  USING (EXISTS (
    SELECT FROM sys.conversations c
    WHERE c.id = conversation_id AND c.user_id = nullif(current_setting('app.user_id', true), '')::uuid
  ));

-- The views public.conversations and public.messages (sql/sys/09_chat.sql) are security barriers
-- that only owners and admins may read.

-- ---------------------------------------------------------------------------------------------
-- UI metadata (finding 11)

-- A role sees the metadata of the tables it has some privilege on, as introspection shows them;
-- the sys functions run as the tables' owner, which row-level security does not bind here.
ALTER TABLE sys.table_metadata ENABLE ROW LEVEL SECURITY;
ALTER TABLE sys.column_metadata ENABLE ROW LEVEL SECURITY;
CREATE POLICY privileged ON sys.table_metadata FOR SELECT
  USING (has_table_privilege(to_regclass(format('%I.%I', schema_name, table_name)), 'SELECT, INSERT, UPDATE, DELETE'));
CREATE POLICY privileged ON sys.column_metadata FOR SELECT
  USING (has_table_privilege(to_regclass(format('%I.%I', schema_name, table_name)), 'SELECT, INSERT, UPDATE, DELETE'));

-- ---------------------------------------------------------------------------------------------
-- Temporary files and memory per statement (finding 3)

-- Role settings are cluster-wide (no IN DATABASE), so every tenant database gets them; a value an
-- operator already set for a login role is kept. temp_file_limit needs a superuser (or SET on the
-- parameter): where the migration lacks the right, the main service warns at start instead.
DO $$
DECLARE
  login_role text;
  limit_setting record;
BEGIN
  FOREACH login_role IN ARRAY ARRAY['authenticator', 'chat_authenticator'] LOOP
    FOR limit_setting IN SELECT * FROM (VALUES ('temp_file_limit', '1GB'), ('work_mem', '4MB')) AS s (name, value) LOOP
      CONTINUE WHEN EXISTS (
        SELECT FROM pg_catalog.pg_db_role_setting d, unnest(d.setconfig) AS c (item)
        WHERE d.setrole = login_role::regrole AND d.setdatabase = 0 AND c.item LIKE limit_setting.name || '=%'
      );
      BEGIN
        EXECUTE format('ALTER ROLE %I SET %I = %L', login_role, limit_setting.name, limit_setting.value);
      EXCEPTION WHEN insufficient_privilege THEN
        RAISE NOTICE 'cannot set % for %: %', limit_setting.name, login_role, SQLERRM;
      END;
    END LOOP;
  END LOOP;
END
$$;
