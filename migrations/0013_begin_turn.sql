-- Starting a chat reply (src/services/Conversations.ts beginTurn) in one round trip instead of six:
-- lock the caller's conversation, check whose turn it is, store the user's message (its content;
-- NULL for "continue") and the reply's pending placeholder, and return the history the reply
-- starts from.
-- Runs as its caller (the chat service's login), under the same `user_id` condition as every
-- statement of that service.
CREATE FUNCTION sys.begin_turn(p_user_id uuid, p_conversation_id uuid, p_user_content jsonb) RETURNS jsonb
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
      SELECT jsonb_agg(jsonb_build_object('id', m.id, 'role', m.role, 'content', m.content, 'status', m.status, 'created_at', m.created_at::text) ORDER BY m.position)
      FROM sys.messages AS m WHERE m.conversation_id = p_conversation_id
    )
  );
END
$$;

REVOKE ALL ON FUNCTION sys.begin_turn(uuid, uuid, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sys.begin_turn(uuid, uuid, jsonb) TO chat_authenticator;
