-- Cancels the statement of one of the caller's own login sessions: a request whose transaction was
-- sent pipelined (src/services/StatementConnections.ts) cannot be cancelled on its own connection,
-- so when its caller goes away the service cancels it from another. pg_cancel_backend itself is
-- revoked (0004); this reaches only backends logged in as the same login role as the caller's
-- session, and only the login roles may call it (a request's role cannot: EXECUTE is checked
-- against the current role).
CREATE OR REPLACE FUNCTION plinth.cancel_statement(p_pid integer) RETURNS boolean
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT coalesce(bool_or(pg_cancel_backend(a.pid)), false)
  FROM pg_stat_activity AS a
  WHERE a.pid = p_pid AND a.usename = session_user AND a.pid <> pg_backend_pid();
$$;

REVOKE ALL ON FUNCTION plinth.cancel_statement(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION plinth.cancel_statement(integer) TO authenticator;
