-- The chat service's storage (spec §2.8, §3.1; tables in migration 0009): the trigger that bumps
-- a conversation, the start of a reply, and the read-only views public.conversations and
-- public.messages through which clients read their own.

-- Adding a message bumps its conversation (spec §2.8).
CREATE OR REPLACE FUNCTION sys.touch_conversation() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  UPDATE sys.conversations SET updated_at = now() WHERE id = NEW.conversation_id;
  RETURN NULL;
END
$$;
CREATE OR REPLACE TRIGGER message_added AFTER INSERT ON sys.messages FOR EACH ROW EXECUTE FUNCTION sys.touch_conversation();
REVOKE ALL ON FUNCTION sys.touch_conversation() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sys.touch_conversation() TO chat_authenticator;

-- The views keep their owner's rights (owner and admin get no privilege on the tables themselves,
-- so a tool's SELECT on sys.conversations stays denied), and as security barriers their WHERE runs
-- before any condition of the caller's, also where the owner is a superuser that row-level
-- security (migration 0015) does not bind.
CREATE OR REPLACE VIEW public.conversations WITH (security_barrier = true) AS
  SELECT id, title, created_at, updated_at, user_id FROM sys.conversations
  WHERE user_id = nullif(current_setting('app.user_id', true), '')::uuid;
CREATE OR REPLACE VIEW public.messages WITH (security_barrier = true) AS
  SELECT m.id, m.conversation_id, m.role, m.content, m.status, m.created_at, m.updated_at, m.error
  FROM sys.messages m JOIN sys.conversations c ON c.id = m.conversation_id
  WHERE c.user_id = nullif(current_setting('app.user_id', true), '')::uuid;
-- Only owners and admins have conversations (the chat service refuses the other roles).
REVOKE ALL ON public.conversations, public.messages FROM PUBLIC, staff, member, anon;
GRANT SELECT ON public.conversations, public.messages TO owner, admin;

-- Starting a chat reply (src/services/Conversations.ts beginTurn) in one round trip instead of six:
-- lock the caller's conversation, check whose turn it is, store the user's message (its content;
-- NULL for "continue") and the reply's pending placeholder, and return the history the reply
-- starts from.
-- Runs as its caller (the chat service's login), under the same `user_id` condition as every
-- statement of that service.
CREATE OR REPLACE FUNCTION sys.begin_turn(p_user_id uuid, p_conversation_id uuid, p_user_content jsonb) RETURNS jsonb
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  latest sys.messages;
  placeholder uuid;
BEGIN
  PERFORM FROM sys.conversations WHERE id = p_conversation_id AND user_id = p_user_id FOR UPDATE;
  IF NOT FOUND THEN
    RETURN jsonb_build_object('not_found', true);
  END IF;
  SELECT * INTO latest FROM sys.messages WHERE conversation_id = p_conversation_id ORDER BY position DESC LIMIT 1;
  IF latest.status = 'pending' THEN
    RETURN jsonb_build_object('refused', 'a reply is in progress');
  END IF;
  IF p_user_content IS NULL AND NOT coalesce(
    latest.role = 'assistant' AND latest.content ->> 'type' = 'tool_call' AND latest.status IN ('complete', 'error'), false
  ) THEN
    RETURN jsonb_build_object('refused', 'the latest message is not a completed or failed tool call');
  END IF;
  IF p_user_content IS NOT NULL THEN
    INSERT INTO sys.messages (conversation_id, role, content, status)
    VALUES (p_conversation_id, 'user', p_user_content, 'complete');
  END IF;
  INSERT INTO sys.messages (conversation_id, role, content, status)
  VALUES (p_conversation_id, 'assistant', '{"type": "text", "text": ""}', 'pending')
  RETURNING id INTO placeholder;
  RETURN jsonb_build_object(
    'placeholder_id', placeholder,
    'first_message', latest.id IS NULL,
    'messages', (
      SELECT jsonb_agg(jsonb_build_object('id', m.id, 'role', m.role, 'content', m.content, 'status', m.status, 'created_at', sys.iso_utc(m.created_at), 'error', m.error) ORDER BY m.position)
      FROM sys.messages AS m WHERE m.conversation_id = p_conversation_id
    )
  );
END
$$;

REVOKE ALL ON FUNCTION sys.begin_turn(uuid, uuid, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sys.begin_turn(uuid, uuid, jsonb) TO chat_authenticator;
