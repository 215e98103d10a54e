-- The chat service's storage (spec §2.8, §3.1): conversations and messages per user. The chat
-- service writes them as chat_authenticator, always under a `user_id = <jwt sub>` condition;
-- clients may read their own through the read-only views public.conversations and public.messages.

CREATE TABLE sys.conversations (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  user_id uuid NOT NULL REFERENCES sys.users (id) ON DELETE CASCADE,
  title text NOT NULL DEFAULT '' CHECK (length(title) <= 200),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX conversations_user ON sys.conversations (user_id, updated_at DESC);

CREATE TABLE sys.messages (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  conversation_id uuid NOT NULL REFERENCES sys.conversations (id) ON DELETE CASCADE,
  -- Insertion order: timestamps of one transaction tie.
  position bigint GENERATED ALWAYS AS IDENTITY,
  role text NOT NULL CHECK (role IN ('user', 'assistant')),
  content jsonb NOT NULL CHECK (jsonb_typeof(content) = 'object'),
  status text NOT NULL CHECK (status IN ('pending', 'pending_approval', 'complete', 'rejected', 'error')),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX messages_conversation ON sys.messages (conversation_id, position);

-- Adding a message bumps its conversation (spec §2.8).
CREATE FUNCTION sys.touch_conversation() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  UPDATE sys.conversations SET updated_at = now() WHERE id = NEW.conversation_id;
  RETURN NULL;
END
$$;
CREATE TRIGGER message_added AFTER INSERT ON sys.messages FOR EACH ROW EXECUTE FUNCTION sys.touch_conversation();

REVOKE ALL ON sys.conversations, sys.messages FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE, DELETE ON sys.conversations, sys.messages TO chat_authenticator;
REVOKE ALL ON FUNCTION sys.touch_conversation() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sys.touch_conversation() TO chat_authenticator;

CREATE VIEW public.conversations AS
  SELECT id, title, created_at, updated_at, user_id FROM sys.conversations
  WHERE user_id = nullif(current_setting('app.user_id', true), '')::uuid;
CREATE VIEW public.messages AS
  SELECT m.id, m.conversation_id, m.role, m.content, m.status, m.created_at, m.updated_at
  FROM sys.messages m JOIN sys.conversations c ON c.id = m.conversation_id
  WHERE c.user_id = nullif(current_setting('app.user_id', true), '')::uuid;
REVOKE ALL ON public.conversations, public.messages FROM PUBLIC;
GRANT SELECT ON public.conversations, public.messages TO owner, admin, staff, member;
