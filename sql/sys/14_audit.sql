-- The audit trail (issue #24; the table is migration 0020): every sys function that changes users,
-- sign-ins or the schema appends one event with sys.record_audit_event, in its own transaction, so
-- a change that fails leaves no event. Owners and admins read it (sys.list_audit_events); only a
-- database administrator removes old events (sys.prune_audit_events, `plinth audit prune`).

-- Appends one event: the actor is the request's (app.user_id, and the role it runs as; a database
-- administrator, with no app role, is 'administrator'), unless p_actor_id names the user the change
-- is about when nobody is signed in yet (sign-ins, email changes), whose own role is taken then.
-- The request id is the one Plinth sets for each request (app.request_id). Called only by other
-- sys functions: no app role may execute it.
CREATE OR REPLACE FUNCTION sys.record_audit_event(p_action text, p_target text, p_details jsonb DEFAULT '{}'::jsonb, p_actor_id uuid DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_role text := current_setting('role');
  v_actor_id uuid := coalesce(p_actor_id, nullif(current_setting('app.user_id', true), '')::uuid);
  v_actor_role text := CASE v_role WHEN 'none' THEN 'administrator' ELSE v_role END;
BEGIN
  IF p_actor_id IS NOT NULL THEN
    SELECT role INTO v_actor_role FROM sys.users WHERE id = p_actor_id;
  END IF;
  INSERT INTO sys.audit_events (actor_id, actor_role, action, target, details, request_id)
  VALUES (v_actor_id, coalesce(v_actor_role, v_role), p_action, p_target, coalesce(p_details, '{}'::jsonb),
    nullif(current_setting('app.request_id', true), ''));
END
$$;

-- The sha-256 (hex) of an address in lower case: how a failed sign-in names the address tried
-- without recording it.
CREATE OR REPLACE FUNCTION sys.email_hash(p_email text) RETURNS text
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT encode(sha256(convert_to(lower(coalesce(p_email, '')), 'UTF8')), 'hex')
$$;

-- The newest events first, at or after p_since (all when NULL), at most p_limit (1 to 1000,
-- 100 when NULL). Owners and admins (and a database administrator) only.
CREATE OR REPLACE FUNCTION sys.list_audit_events(p_since timestamptz DEFAULT NULL, p_limit integer DEFAULT 100)
RETURNS TABLE (id bigint, at timestamptz, actor_id uuid, actor_role text, action text, target text, details jsonb, request_id text)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF current_setting('role') NOT IN ('owner', 'admin', 'none') THEN
    RAISE EXCEPTION 'only an owner or an admin may read the audit trail' USING ERRCODE = '42501';
  END IF;
  IF p_limit IS NOT NULL AND (p_limit < 1 OR p_limit > 1000) THEN
    RAISE EXCEPTION 'limit must be 1 to 1000' USING ERRCODE = '22023';
  END IF;
  RETURN QUERY
  SELECT e.id, e.at, e.actor_id, e.actor_role, e.action, e.target, e.details, e.request_id
  FROM sys.audit_events e
  WHERE p_since IS NULL OR e.at >= p_since
  ORDER BY e.at DESC, e.id DESC
  LIMIT coalesce(p_limit, 100);
END
$$;

-- Deletes the events older than p_before and returns how many; the prune is itself an event. For
-- a database administrator (`plinth audit prune`): no app role may execute it.
CREATE OR REPLACE FUNCTION sys.prune_audit_events(p_before timestamptz) RETURNS bigint
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_count bigint;
BEGIN
  IF current_setting('role') <> 'none' THEN
    RAISE EXCEPTION 'only a database administrator may prune the audit trail' USING ERRCODE = '42501';
  END IF;
  IF p_before IS NULL THEN
    RAISE EXCEPTION 'prune needs a date' USING ERRCODE = '22023';
  END IF;
  SET LOCAL plinth.audit_prune = 'on';
  DELETE FROM sys.audit_events WHERE at < p_before;
  GET DIAGNOSTICS v_count = ROW_COUNT;
  SET LOCAL plinth.audit_prune = 'off';
  PERFORM sys.record_audit_event('audit.prune', NULL, jsonb_build_object('before', sys.iso_utc(p_before), 'deleted', v_count));
  RETURN v_count;
END
$$;

-- Append-only: UPDATE and TRUNCATE are refused to everyone, DELETE too except inside the prune.
CREATE OR REPLACE FUNCTION sys.refuse_audit_change() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF TG_OP = 'DELETE' AND current_setting('plinth.audit_prune', true) = 'on' THEN
    RETURN NULL;
  END IF;
  RAISE EXCEPTION 'the audit trail is append-only (a database administrator removes old events with plinth audit prune)'
    USING ERRCODE = '42501';
END
$$;
CREATE OR REPLACE TRIGGER append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON sys.audit_events
FOR EACH STATEMENT EXECUTE FUNCTION sys.refuse_audit_change();

REVOKE ALL ON FUNCTION sys.record_audit_event(text, text, jsonb, uuid), sys.email_hash(text),
  sys.list_audit_events(timestamptz, integer), sys.prune_audit_events(timestamptz), sys.refuse_audit_change() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sys.list_audit_events(timestamptz, integer) TO owner, admin;
