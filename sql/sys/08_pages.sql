-- Live pages (spec §2.7, §6.1): owners and admins create, update and delete custom pages; every
-- signed-in role may read them (sys.pages_v) to render them; every change is announced on channel
-- page_change as '<schema_name>:<slug>'.

-- Read-only for every signed-in role, through a view: pages are what clients render, not secrets.
-- (The view runs with its owner's rights; the table itself stays out of the app roles' reach.)
CREATE OR REPLACE VIEW sys.pages_v AS
  SELECT schema_name, slug, title, source, created_at, updated_at, updated_by FROM sys.pages;
GRANT SELECT ON sys.pages_v TO owner, admin, staff, member;

-- SECURITY DEFINER: pg_notify is not for app roles (0004_sql_defence.sql).
CREATE OR REPLACE FUNCTION sys.notify_page_change() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_page sys.pages := CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
BEGIN
  PERFORM pg_notify('page_change', v_page.schema_name || ':' || v_page.slug);
  -- A rename of the app moves the page: the old address changed too.
  IF TG_OP = 'UPDATE' AND (OLD.schema_name, OLD.slug) IS DISTINCT FROM (NEW.schema_name, NEW.slug) THEN
    PERFORM pg_notify('page_change', OLD.schema_name || ':' || OLD.slug);
  END IF;
  RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION sys.notify_page_change() FROM PUBLIC;
CREATE OR REPLACE TRIGGER page_changed AFTER INSERT OR UPDATE OR DELETE ON sys.pages
FOR EACH ROW EXECUTE FUNCTION sys.notify_page_change();

CREATE OR REPLACE FUNCTION sys.page_json(p_page sys.pages) RETURNS jsonb
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT jsonb_build_object('schema_name', p_page.schema_name, 'slug', p_page.slug, 'title', p_page.title,
    'source', p_page.source, 'created_at', sys.iso_utc(p_page.created_at), 'updated_at', sys.iso_utc(p_page.updated_at), 'updated_by', p_page.updated_by);
$$;

CREATE OR REPLACE FUNCTION sys.create_page(p_slug text, p_title text, p_source text) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_page sys.pages;
BEGIN
  PERFORM sys.require_manager();
  IF p_slug IS NULL OR p_slug !~ '^[a-z0-9][a-z0-9_-]{0,62}$' THEN
    RAISE EXCEPTION 'page slug % must be 1 to 63 of a-z, 0-9, _ and -, starting with a letter or digit', coalesce(quote_literal(p_slug), 'null')
      USING ERRCODE = 'P0001';
  END IF;
  INSERT INTO sys.pages (schema_name, slug, title, source, updated_by)
  VALUES (sys.current_schema_name(), p_slug, coalesce(p_title, ''), coalesce(p_source, ''), nullif(current_setting('app.user_id', true), '')::uuid)
  RETURNING * INTO v_page;
  PERFORM sys.record_audit_event('page.create', v_page.schema_name || '/' || v_page.slug, jsonb_build_object('title', v_page.title));
  RETURN sys.page_json(v_page);
EXCEPTION
  WHEN unique_violation THEN
    RAISE EXCEPTION 'a page % already exists', quote_literal(p_slug) USING ERRCODE = '23505';
END
$$;

-- NULL leaves a field as it is.
CREATE OR REPLACE FUNCTION sys.update_page(p_slug text, p_title text, p_source text) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_page sys.pages;
BEGIN
  PERFORM sys.require_manager();
  UPDATE sys.pages
  SET title = coalesce(p_title, title), source = coalesce(p_source, source), updated_at = now(),
    updated_by = nullif(current_setting('app.user_id', true), '')::uuid
  WHERE schema_name = sys.current_schema_name() AND slug = p_slug
  RETURNING * INTO v_page;
  IF v_page.slug IS NULL THEN
    RAISE EXCEPTION 'no page %', quote_literal(coalesce(p_slug, 'null')) USING ERRCODE = 'P0001';
  END IF;
  PERFORM sys.record_audit_event('page.update', v_page.schema_name || '/' || v_page.slug,
    jsonb_build_object('title_changed', p_title IS NOT NULL, 'source_changed', p_source IS NOT NULL));
  RETURN sys.page_json(v_page);
END
$$;

CREATE OR REPLACE FUNCTION sys.delete_page(p_slug text) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_page sys.pages;
BEGIN
  PERFORM sys.require_manager();
  DELETE FROM sys.pages WHERE schema_name = sys.current_schema_name() AND slug = p_slug RETURNING * INTO v_page;
  IF v_page.slug IS NULL THEN
    RAISE EXCEPTION 'no page %', quote_literal(coalesce(p_slug, 'null')) USING ERRCODE = 'P0001';
  END IF;
  PERFORM sys.record_audit_event('page.delete', v_page.schema_name || '/' || v_page.slug);
  RETURN jsonb_build_object('schema_name', v_page.schema_name, 'slug', v_page.slug);
END
$$;

REVOKE ALL ON FUNCTION sys.page_json(sys.pages), sys.create_page(text, text, text), sys.update_page(text, text, text),
  sys.delete_page(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sys.create_page(text, text, text), sys.update_page(text, text, text), sys.delete_page(text) TO owner, admin;
