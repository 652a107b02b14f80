-- One snapshot row per stream (a loop's ledger, a goal, the driver state),
-- at a revision. The compare-and-swap is a conditional UPDATE of this row.
CREATE TABLE snapshots (
    stream      TEXT   NOT NULL PRIMARY KEY,
    revision    BIGINT NOT NULL CHECK (revision > 0),
    state       TEXT   NOT NULL,
    updated_at  TEXT   NOT NULL
);

-- The append-only journal: one row per committed operation. The snapshot at
-- revision N is the fold of rows 1..=N of its stream. The UNIQUE constraint
-- on (stream, operation_id) is what refuses a second commit of one
-- operation id, race or not.
CREATE TABLE journal (
    stream          TEXT   NOT NULL,
    revision        BIGINT NOT NULL CHECK (revision > 0),
    operation_id    TEXT   NOT NULL,
    request_digest  TEXT   NOT NULL,
    kind            TEXT   NOT NULL,
    event           TEXT   NOT NULL,
    receipt         TEXT   NOT NULL,
    committed_at    TEXT   NOT NULL,
    PRIMARY KEY (stream, revision),
    CONSTRAINT journal_operation_once UNIQUE (stream, operation_id)
);

-- Append-only means append-only, even for a hand-typed psql session.
CREATE FUNCTION loopx_journal_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the loopx journal is append-only';
END
$$;
CREATE TRIGGER journal_no_update_or_delete BEFORE UPDATE OR DELETE ON journal
    FOR EACH ROW EXECUTE FUNCTION loopx_journal_append_only();
CREATE TRIGGER journal_no_truncate BEFORE TRUNCATE ON journal
    FOR EACH STATEMENT EXECUTE FUNCTION loopx_journal_append_only();
