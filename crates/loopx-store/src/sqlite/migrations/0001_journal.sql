-- One snapshot row per stream (a loop's ledger, later a goal), at a revision.
CREATE TABLE snapshots (
    stream      TEXT    NOT NULL PRIMARY KEY,
    revision    INTEGER NOT NULL CHECK (revision > 0),
    state       TEXT    NOT NULL,
    updated_at  TEXT    NOT NULL
) STRICT;

-- The append-only journal: one row per committed operation. The snapshot at
-- revision N is the fold of rows 1..=N of its stream.
CREATE TABLE journal (
    stream          TEXT    NOT NULL,
    revision        INTEGER NOT NULL CHECK (revision > 0),
    operation_id    TEXT    NOT NULL,
    request_digest  TEXT    NOT NULL,
    kind            TEXT    NOT NULL,
    event           TEXT    NOT NULL,
    receipt         TEXT    NOT NULL,
    committed_at    TEXT    NOT NULL,
    PRIMARY KEY (stream, revision),
    UNIQUE (stream, operation_id)
) STRICT;

-- Append-only means append-only, even for a hand-typed sqlite3 session.
CREATE TRIGGER journal_no_update BEFORE UPDATE ON journal
BEGIN SELECT RAISE(ABORT, 'the loopx journal is append-only'); END;
CREATE TRIGGER journal_no_delete BEFORE DELETE ON journal
BEGIN SELECT RAISE(ABORT, 'the loopx journal is append-only'); END;
