-- Each managed table gets the (created_at, id) index create_table now makes (sql/sys/03_tables.sql):
-- a list of all rows newest first, page 1 or page 10,000 by its keyset cursor, reads its rows from
-- it instead of sorting the whole table. The name is sys.column_index_name's, written out here
-- because the sys SQL is applied after the migrations.
DO $$
DECLARE
  v_table record;
BEGIN
  FOR v_table IN SELECT schema_name, table_name FROM sys.table_metadata ORDER BY 1, 2 LOOP
    CONTINUE WHEN to_regclass(format('%I.%I', v_table.schema_name, v_table.table_name)) IS NULL;
    EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON %I.%I (created_at, id)',
      left(v_table.table_name || '_created_at', 50) || '_' || left(md5(v_table.table_name || '.created_at'), 8) || '_idx',
      v_table.schema_name, v_table.table_name);
  END LOOP;
END
$$;
