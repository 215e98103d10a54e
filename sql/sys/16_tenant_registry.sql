-- The registry's own signal (issue #27): every change of a tenant's row (its cluster, state or
-- epoch) is announced on `plinth_tenants` with the tenant's name, so that every replica of both
-- services reads the row again at once instead of waiting for its cache to expire.
CREATE OR REPLACE FUNCTION plinth.announce_tenant_change() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM pg_notify('plinth_tenants', CASE TG_OP WHEN 'DELETE' THEN OLD.name ELSE NEW.name END);
  RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS tenant_changed ON plinth.tenants;
CREATE TRIGGER tenant_changed AFTER INSERT OR UPDATE OR DELETE ON plinth.tenants
  FOR EACH ROW EXECUTE FUNCTION plinth.announce_tenant_change();

REVOKE ALL ON FUNCTION plinth.announce_tenant_change() FROM PUBLIC;
