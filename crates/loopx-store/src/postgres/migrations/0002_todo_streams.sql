-- Version 2 changes no table: it changes what the rows mean. From version 2
-- on, a todo's live state (status, lease, evidence) lives in a stream of its
-- own, `todo:<goal instance>/<todo id>`, once it has changed, and the goal
-- snapshot keeps the todo as added. A binary that knows only version 1
-- would write todo changes into the goal snapshot, where version 2 no longer
-- looks, so that a todo could be claimed twice; the version number is what
-- makes such a binary refuse this database, so every host must upgrade
-- before `loopx migrate` moves a shared database to it. The data needs no
-- change: a todo without a stream is read from the goal snapshot.
SELECT 1;
