-- pg_trgm, for the trigram indexes the reference picker's search ('%…%' over a table's display
-- columns) is read from. In the `extensions` schema: owned by the migrations' role, no app role has
-- USAGE on it and none has it on its search path, so its functions and operators are out of their
-- reach; the indexes name its operator class schema-qualified.
CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA extensions;

-- Each managed table's text display columns get the index create_table and alter_table now make
-- (sql/sys/03_tables.sql, sys.index_display_columns). The display column rule and the index name
-- are written out here because the sys SQL is applied after the migrations.
DO $$
DECLARE
  v_table record;
  v_display text[];
  v_column text;
BEGIN
  FOR v_table IN SELECT schema_name, table_name, display_columns FROM sys.table_metadata ORDER BY 1, 2 LOOP
    CONTINUE WHEN to_regclass(format('%I.%I', v_table.schema_name, v_table.table_name)) IS NULL;
    v_display := CASE WHEN cardinality(v_table.display_columns) > 0 THEN v_table.display_columns ELSE ARRAY(
      SELECT column_name FROM sys.column_metadata
      WHERE schema_name = v_table.schema_name AND table_name = v_table.table_name AND column_type IN ('text', 'email', 'choice')
      ORDER BY position LIMIT 1) END;
    FOR v_column IN
      SELECT a.attname FROM pg_attribute a
      WHERE a.attrelid = format('%I.%I', v_table.schema_name, v_table.table_name)::regclass AND a.attname = ANY (v_display)
        AND NOT a.attisdropped AND a.atttypid IN ('text'::regtype, 'varchar'::regtype)
    LOOP
      EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON %I.%I USING gin (%I extensions.gin_trgm_ops)',
        left(v_table.table_name || '_' || v_column, 44) || '_' || left(md5(v_table.table_name || '.' || v_column || '.trgm'), 8) || '_trgm',
        v_table.schema_name, v_table.table_name, v_column);
    END LOOP;
  END LOOP;
END
$$;
