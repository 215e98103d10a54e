-- Rate limits shared by every replica (RATE_LIMIT_STORE=postgres): a sliding-window log per key.
-- One call checks and records atomically: the keys are locked (in a fixed order, so two callers
-- never deadlock) for the rest of the transaction, counted, and recorded only if every key has room.

-- 0 when admitted; otherwise the whole seconds until a slot frees on every full key.
-- The keys are locked only for the few statements of one check, so a longer wait means something
-- holds a key's lock: the check then gives up (55P03, lock_timeout) and the caller is told to retry
-- shortly (RateLimiter.ts), instead of a magic-link request waiting on it. The functions the SQL
-- guard denies, advisory locks included, are revoked by the migrator after every run
-- (src/services/Migrator.ts, from the list in src/services/DeniedFunctions.ts); this function keeps
-- its locks because it runs as its owner, the migrating administrator.
CREATE OR REPLACE FUNCTION plinth.rate_limit_check(p_keys text[], p_limits integer[], p_window_seconds integer[])
RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET lock_timeout = '1s' AS $$
DECLARE
  v_now timestamptz := clock_timestamp();
  v_retry integer := 0;
  v_index integer;
  v_count integer;
  v_oldest timestamptz;
BEGIN
  IF coalesce(array_length(p_keys, 1), 0) = 0 THEN
    RETURN 0;
  END IF;
  PERFORM pg_advisory_xact_lock(hashtextextended(k, 7270002)) FROM unnest(p_keys) AS k ORDER BY k;
  FOR v_index IN 1 .. array_length(p_keys, 1) LOOP
    DELETE FROM plinth.rate_limit_hits
    WHERE key = p_keys[v_index] AND at <= v_now - make_interval(secs => p_window_seconds[v_index]);
    SELECT count(*), min(at) INTO v_count, v_oldest FROM (
      SELECT at FROM plinth.rate_limit_hits WHERE key = p_keys[v_index] ORDER BY at DESC LIMIT p_limits[v_index]
    ) recent;
    IF v_count >= p_limits[v_index] THEN
      v_retry := greatest(v_retry, ceil(extract(epoch FROM v_oldest + make_interval(secs => p_window_seconds[v_index]) - v_now))::integer, 1);
    END IF;
  END LOOP;
  IF v_retry = 0 THEN
    INSERT INTO plinth.rate_limit_hits (key, at) SELECT k, v_now FROM unnest(p_keys) AS k;
  END IF;
  RETURN v_retry;
END
$$;

-- Expired rows of keys nobody asks about any more; called from time to time by the services.
CREATE OR REPLACE FUNCTION plinth.rate_limit_sweep(p_window_seconds integer) RETURNS integer
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  WITH gone AS (DELETE FROM plinth.rate_limit_hits WHERE at <= clock_timestamp() - make_interval(secs => p_window_seconds) RETURNING 1)
  SELECT count(*)::integer FROM gone;
$$;

REVOKE ALL ON FUNCTION plinth.rate_limit_check(text[], integer[], integer[]), plinth.rate_limit_sweep(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION plinth.rate_limit_check(text[], integer[], integer[]), plinth.rate_limit_sweep(integer) TO authenticator;
