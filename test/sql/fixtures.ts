/**
 * Shared pieces of the data-plane tests (POST /sql, POST /function/:name): the business tables
 * and functions a test database gets as superuser, and small helpers to call the endpoints.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { splitStatements } from "../../src/services/SqlParser.ts"
import { type AuthStack, type JsonResponse, post } from "../support/auth.ts"
import { runSql } from "../support/database.ts"

/** The structured database error body of spec §7 (shape 2). */
export interface DatabaseErrorBody {
  readonly error: {
    readonly message: string
    readonly code: string
    readonly detail: string | null
    readonly hint: string | null
    readonly position: number | null
  }
}

/** The plain error body of spec §7 (shape 1). */
export interface PlainErrorBody {
  readonly error: string
}

export interface SqlResult<Row = Record<string, unknown>> {
  readonly rows: ReadonlyArray<Row>
  readonly rowCount: number
}

/** Runs a script (several statements allowed) as the superuser of the test database, in one transaction. */
export const ddl = (stack: AuthStack, text: string) =>
  runSql(stack.db.adminUrl, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const statements = yield* splitStatements(text)
    yield* sql.withTransaction(Effect.forEach(statements, (statement) => sql.unsafe(statement).unprepared, { discard: true }))
  }))

/** Business tables, an RLS table and functions, as a migration of the application would create them. */
export const BUSINESS_FIXTURES = `
  CREATE TABLE public.items (
    id serial PRIMARY KEY,
    name text UNIQUE NOT NULL,
    price numeric(10, 2),
    qty int CHECK (qty >= 0),
    meta jsonb,
    created_by uuid NOT NULL DEFAULT current_setting('app.user_id')::uuid
  );
  GRANT SELECT, INSERT, UPDATE, DELETE ON public.items TO owner, admin, staff, member;
  GRANT USAGE ON SEQUENCE public.items_id_seq TO owner, admin, staff, member;

  CREATE TABLE public.orders (
    id serial PRIMARY KEY,
    item_id int NOT NULL REFERENCES public.items (id)
  );
  GRANT SELECT, INSERT, UPDATE, DELETE ON public.orders TO owner, admin, staff, member;
  GRANT USAGE ON SEQUENCE public.orders_id_seq TO owner, admin, staff, member;

  -- Readable by everyone, writable by nobody but the owner role.
  CREATE TABLE public.locked (id int PRIMARY KEY, label text);
  GRANT SELECT ON public.locked TO owner, admin, staff, member;
  GRANT INSERT, UPDATE, DELETE ON public.locked TO owner;

  CREATE TABLE public.numbers (id serial PRIMARY KEY, tag text UNIQUE, n int, d numeric, t text, b boolean, j jsonb);
  GRANT SELECT, INSERT, UPDATE, DELETE ON public.numbers TO owner, admin, staff, member;
  GRANT USAGE ON SEQUENCE public.numbers_id_seq TO owner, admin, staff, member;

  CREATE TABLE public.notes (
    id serial PRIMARY KEY,
    body text,
    created_by uuid NOT NULL DEFAULT current_setting('app.user_id')::uuid
  );
  ALTER TABLE public.notes ENABLE ROW LEVEL SECURITY;
  ALTER TABLE public.notes FORCE ROW LEVEL SECURITY;
  CREATE POLICY own ON public.notes
    USING (created_by = current_setting('app.user_id')::uuid)
    WITH CHECK (created_by = current_setting('app.user_id')::uuid);
  GRANT SELECT, INSERT, UPDATE, DELETE ON public.notes TO member, staff;
  GRANT USAGE ON SEQUENCE public.notes_id_seq TO member, staff;

  CREATE FUNCTION public.add(a int, b int) RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT a + b';
  CREATE FUNCTION public.series(n int) RETURNS TABLE (i int, square int)
    LANGUAGE sql IMMUTABLE AS 'SELECT g, g * g FROM generate_series(1, n) AS g';
  CREATE FUNCTION public.fail(message text) RETURNS void LANGUAGE plpgsql AS $$
  BEGIN
    RAISE EXCEPTION '%', message USING HINT = 'raised on purpose';
  END
  $$;
  GRANT EXECUTE ON FUNCTION public.add(int, int), public.series(int), public.fail(text)
    TO owner, admin, staff, member;
`

export const sqlRequest = <T = SqlResult>(
  base: string,
  token: string,
  sql: unknown,
  params?: ReadonlyArray<unknown>,
  headers?: Record<string, string>
): Promise<JsonResponse<T>> =>
  post<T>(base, "/sql", params === undefined ? { sql } : { sql, params }, { token, ...(headers === undefined ? {} : { headers }) })

