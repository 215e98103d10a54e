-- The rate limiter's keys are locked only for the few statements of one check, so a longer wait
-- means something holds a key's lock: the check then gives up (55P03) and the caller is told to
-- retry shortly (RateLimiter.ts), instead of a magic-link request waiting on it. The functions
-- the SQL guard denies, advisory locks included, are revoked by the migrator after every run
-- (src/services/Migrator.ts, from the list in src/services/DeniedFunctions.ts); this function
-- keeps its locks because it runs as its owner, the migrating administrator.
ALTER FUNCTION plinth.rate_limit_check(text[], integer[], integer[]) SET lock_timeout = '1s';
