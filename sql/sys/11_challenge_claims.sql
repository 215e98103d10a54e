-- Bot-check tokens already presented, shared by every replica (with RATE_LIMIT_STORE=postgres), so
-- a token is accepted once whichever replica sees it. Only a digest of the token is kept.

-- True when the key was free (never claimed, or its claim expired) and is now claimed; false for a
-- replay. One statement: two replicas claiming the same key at once cannot both win.
CREATE OR REPLACE FUNCTION plinth.challenge_claim(p_key text, p_ttl_seconds integer) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_claimed boolean;
BEGIN
  DELETE FROM plinth.challenge_claims WHERE expires_at <= clock_timestamp() AND key <> p_key;
  INSERT INTO plinth.challenge_claims AS c (key, expires_at)
  VALUES (p_key, clock_timestamp() + make_interval(secs => p_ttl_seconds))
  ON CONFLICT (key) DO UPDATE SET expires_at = excluded.expires_at WHERE c.expires_at <= clock_timestamp()
  RETURNING true INTO v_claimed;
  RETURN coalesce(v_claimed, false);
END
$$;

-- Forgets a claim whose verification ended without a verdict, so the token may be tried again.
CREATE OR REPLACE FUNCTION plinth.challenge_release(p_key text) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  DELETE FROM plinth.challenge_claims WHERE key = p_key;
$$;

REVOKE ALL ON FUNCTION plinth.challenge_claim(text, integer), plinth.challenge_release(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION plinth.challenge_claim(text, integer), plinth.challenge_release(text) TO authenticator;
