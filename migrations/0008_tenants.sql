-- Multi-tenant mode: the registry of tenants, kept in the control database (the database of
-- DATABASE_URL). Each tenant's data lives in a database of its own; only the names listed here
-- are ever connected to, so an X-Tenant header can never point a service at another database.
-- (Every database gets this table; only the control database's is filled.)

CREATE TABLE plinth.tenants (
  name text PRIMARY KEY CHECK (name ~ '^[a-z][a-z0-9_]{0,62}$'),
  created_at timestamptz NOT NULL DEFAULT now()
);
REVOKE ALL ON plinth.tenants FROM PUBLIC;
GRANT USAGE ON SCHEMA plinth TO authenticator, chat_authenticator;
GRANT SELECT ON plinth.tenants TO authenticator, chat_authenticator;
