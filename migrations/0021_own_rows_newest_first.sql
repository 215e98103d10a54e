-- The created_by index of each managed table becomes (created_by, created_at), as create_table now
-- makes it (sql/sys/03_tables.sql): it serves every `own` policy's filter as before, and a list of
-- one's own rows newest first reads only the rows it shows instead of all of them and a sort. The
-- name is sys.column_index_name's, written out here because the sys SQL is applied after migrations.
DO $$
DECLARE
  v_table record;
  v_name text;
BEGIN
  FOR v_table IN SELECT schema_name, table_name FROM sys.table_metadata ORDER BY 1, 2 LOOP
    CONTINUE WHEN to_regclass(format('%I.%I', v_table.schema_name, v_table.table_name)) IS NULL;
    v_name := left(v_table.table_name || '_created_by', 50) || '_' || left(md5(v_table.table_name || '.created_by'), 8) || '_idx';
    CONTINUE WHEN EXISTS (
      SELECT FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = v_table.schema_name AND c.relname = v_name AND i.indnatts = 2
    );
    EXECUTE format('DROP INDEX IF EXISTS %I.%I', v_table.schema_name, v_name);
    EXECUTE format('CREATE INDEX %I ON %I.%I (created_by, created_at)', v_name, v_table.schema_name, v_table.table_name);
  END LOOP;
END
$$;
