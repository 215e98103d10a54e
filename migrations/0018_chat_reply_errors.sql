-- Issue #22: a reply that fails keeps its reason, and stored chat messages carry timestamps in
-- one form.
--
-- sys.messages.error: what the `error` event that ended a reply at this message said (a model
-- failure, no model configured, the step bound, the service shutting down, a reply abandoned by a
-- process that died); NULL otherwise. Beside the content, not in it: the content stays one of
-- spec §2.8's shapes, and what the model is given back of a conversation is its content only.
ALTER TABLE sys.messages ADD COLUMN error text;

-- Page tools (propose_create_page, propose_update_page) stored the page as sys.page_json gave it,
-- with jsonb's rendering of timestamptz (`2026-11-25T02:53:21.471099+00:00`); sys.page_json now
-- gives ISO 8601 in UTC with `Z`, as /sql does (sys.iso_utc, sql/sys/02_management.sql). The same
-- form is written here inline: migrations never call the functions of sql/sys/.
WITH page_results AS (
  SELECT m.id, t.key, t.value
  FROM sys.messages m
  CROSS JOIN LATERAL jsonb_each_text(m.content #> '{tool_result,result}') AS t(key, value)
  WHERE m.content ->> 'type' = 'tool_call'
    AND m.content #>> '{tool_calls,0,name}' IN ('propose_create_page', 'propose_update_page')
    AND jsonb_typeof(m.content #> '{tool_result,result}') = 'object'
    AND t.key IN ('created_at', 'updated_at')
    AND t.value ~ '^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?[+-]\d\d(:\d\d)?$'
), converted AS (
  SELECT id, jsonb_object_agg(key, rtrim(rtrim(to_char(value::timestamptz AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), '0'), '.') || 'Z') AS times
  FROM page_results GROUP BY id
)
UPDATE sys.messages m
SET content = jsonb_set(m.content, '{tool_result,result}', (m.content #> '{tool_result,result}') || c.times)
FROM converted c
WHERE m.id = c.id;
