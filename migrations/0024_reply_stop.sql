-- Issue #26: stopping a reply from any instance of the chat service. The instance a stop reaches
-- runs the reply itself, or else records the stop here; the instance running the reply watches
-- for a stop recorded after its reply began, ends the reply, and the stop is answered.
ALTER TABLE sys.conversations ADD COLUMN stop_requested_at timestamptz;
