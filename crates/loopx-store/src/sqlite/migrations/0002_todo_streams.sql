-- Version 2 changes no table: it changes what the rows mean. From version 2
-- on, a todo's live state (status, lease, evidence) lives in a stream of its
-- own, `todo:<goal instance>/<todo id>`, once it has changed, and the goal
-- snapshot keeps the todo as added. A binary that knows only version 1
-- would write todo changes into the goal snapshot, where version 2 no longer
-- looks, so that a todo could be claimed twice; the version number is what
-- makes such a binary refuse this database. Version 2 reads a version-1
-- database as it is (a todo without a stream is read from the goal), so
-- readers accept it and the next writer records the new version.
SELECT 1;
