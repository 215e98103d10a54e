-- The chat service's storage (spec §2.8, §3.1): conversations and messages per user. The chat
-- service writes them as chat_authenticator, always under a `user_id = <jwt sub>` condition;
-- clients may read their own through the read-only views public.conversations and public.messages
-- (sql/sys/09_chat.sql, with the trigger that bumps a conversation).

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

REVOKE ALL ON sys.conversations, sys.messages FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE, DELETE ON sys.conversations, sys.messages TO chat_authenticator;
