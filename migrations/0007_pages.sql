-- Live pages (spec §2.7, §6.1; table sys.pages in 0005): the table stays out of the app roles'
-- reach; the view sys.pages_v, the page functions and the trigger announcing a change on channel
-- page_change are in sql/sys/08_pages.sql.
ALTER TABLE sys.pages ENABLE ROW LEVEL SECURITY;
