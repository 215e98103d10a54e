-- Introspection (spec §2.5, POST /) reads the settings as the caller (sys.introspect and
-- sys.table_stats are in sql/sys/07_introspection.sql).
GRANT SELECT ON sys.settings TO owner, admin, staff, member;
