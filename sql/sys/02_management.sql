-- What every management function (spec §4.4 sys functions) relies on: who may manage, which
-- schema a call works in, which names are allowed, the one form of a timestamp in JSON, and the
-- notice that tells every service to drop what it cached about the catalog (channel
-- plinth_catalog). Identifiers are validated and always quoted with format('%I'), values with
-- format('%L'): nothing from a caller is spliced into SQL as text, except a custom view's SELECT
-- (05_views.sql).

-- Management is for owners and admins (and a database administrator, who has no app role).
CREATE OR REPLACE FUNCTION sys.require_manager() RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF current_setting('role') NOT IN ('owner', 'admin', 'none') THEN
    RAISE EXCEPTION 'only an owner or an admin may change the schema' USING ERRCODE = '42501';
  END IF;
END
$$;

-- The schema a call works in: the app of app.app_id (X-App-Schema), else public.
CREATE OR REPLACE FUNCTION sys.current_schema_name() RETURNS text
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_app_id text := nullif(current_setting('app.app_id', true), '');
  v_schema text;
BEGIN
  IF v_app_id IS NULL THEN
    RETURN 'public';
  END IF;
  SELECT schema_name INTO v_schema FROM sys.apps WHERE id = v_app_id::uuid;
  IF v_schema IS NULL THEN
    RAISE EXCEPTION 'the app of this request no longer exists' USING ERRCODE = 'P0001';
  END IF;
  RETURN v_schema;
END
$$;

-- Lower-case identifiers of at most 63 bytes, not reserved, not in Plinth's or PostgreSQL's namespace.
CREATE OR REPLACE FUNCTION sys.check_name(p_name text, p_what text) RETURNS text
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF p_name IS NULL OR p_name !~ '^[a-z][a-z0-9_]*$' THEN
    RAISE EXCEPTION '% name % must start with a lower-case letter and contain only a-z, 0-9 and _', p_what, coalesce(quote_literal(p_name), 'null')
      USING ERRCODE = 'P0001';
  END IF;
  IF octet_length(p_name) > 63 THEN
    RAISE EXCEPTION '% name % is longer than 63 bytes', p_what, quote_literal(p_name) USING ERRCODE = 'P0001';
  END IF;
  IF p_name = 'sys' OR p_name LIKE 'sys\_%' OR p_name LIKE 'pg\_%' THEN
    RAISE EXCEPTION '% name % may not be sys or start with sys_ or pg_', p_what, quote_literal(p_name) USING ERRCODE = 'P0001';
  END IF;
  IF EXISTS (SELECT FROM pg_get_keywords() WHERE word = p_name AND catcode IN ('R', 'T')) THEN
    RAISE EXCEPTION '% name % is a reserved word', p_what, quote_literal(p_name) USING ERRCODE = 'P0001';
  END IF;
  RETURN p_name;
END
$$;

-- A timestamp in JSON that Plinth builds (sys functions' results, the chat's history): ISO 8601 in
-- UTC with `Z` and the microseconds without trailing zeros, the form /sql gives a timestamptz column
-- (src/services/JsonColumnTypes.ts), whatever the session's TimeZone.
CREATE OR REPLACE FUNCTION sys.iso_utc(p_at timestamptz) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
  SELECT CASE WHEN isfinite(p_at)
    THEN rtrim(rtrim(to_char(p_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), '0'), '.') || 'Z'
    ELSE p_at::text END;
$$;
REVOKE ALL ON FUNCTION sys.iso_utc(timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sys.iso_utc(timestamptz) TO chat_authenticator;

-- Tells every service to drop what it cached about the catalog.
CREATE OR REPLACE FUNCTION sys.catalog_changed() RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT pg_notify('plinth_catalog', 'schema');
$$;

-- Every change of the app registry or of the settings tells the services to drop what they cached
-- about the catalog. SECURITY DEFINER: pg_notify is not for app roles (0004_sql_defence.sql).
CREATE OR REPLACE FUNCTION sys.notify_catalog_changed() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM pg_notify('plinth_catalog', 'apps');
  RETURN NULL;
END
$$;
CREATE OR REPLACE TRIGGER apps_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON sys.apps
FOR EACH STATEMENT EXECUTE FUNCTION sys.notify_catalog_changed();
-- Introspection shows the settings (app_metadata of public): a change must reach its caches.
CREATE OR REPLACE TRIGGER settings_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON sys.settings
FOR EACH STATEMENT EXECUTE FUNCTION sys.notify_catalog_changed();

REVOKE ALL ON FUNCTION sys.require_manager(), sys.current_schema_name(), sys.check_name(text, text), sys.catalog_changed(),
  sys.notify_catalog_changed() FROM PUBLIC;
