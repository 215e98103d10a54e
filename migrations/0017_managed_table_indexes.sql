-- Managed tables made before issue #22 get the indexes new ones are made with (sql/sys/03_tables.sql):
-- created_by, which every `own` policy filters on, and each reference column (the read view's
-- join, the foreign key's check when a referenced row is deleted). The name is
-- sys.column_index_name's, written out here because the sys SQL is applied after the migrations.
-- A column that already leads an index (a unique reference column) gets none.
DO $$
DECLARE
  v_column record;
BEGIN
  FOR v_column IN
    SELECT t.schema_name, t.table_name, 'created_by' AS column_name FROM sys.table_metadata t
    UNION ALL
    SELECT c.schema_name, c.table_name, c.column_name FROM sys.column_metadata c WHERE c.column_type = 'reference'
    ORDER BY 1, 2, 3
  LOOP
    CONTINUE WHEN to_regclass(format('%I.%I', v_column.schema_name, v_column.table_name)) IS NULL;
    CONTINUE WHEN EXISTS (
      SELECT FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
      WHERE i.indrelid = format('%I.%I', v_column.schema_name, v_column.table_name)::regclass AND a.attname = v_column.column_name
    );
    EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON %I.%I (%I)',
      left(v_column.table_name || '_' || v_column.column_name, 50) || '_' || left(md5(v_column.table_name || '.' || v_column.column_name), 8) || '_idx',
      v_column.schema_name, v_column.table_name, v_column.column_name);
  END LOOP;
END
$$;
