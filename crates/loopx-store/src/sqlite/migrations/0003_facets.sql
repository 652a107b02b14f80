-- Version 3: facets, an index kept beside the snapshots of a family of
-- streams (a goal lifetime's todos), written in the transaction of each
-- commit that carries one, so that should-run reads a few index rows
-- instead of every todo. Derived state: the snapshot is the truth.
--
-- One row per faceted stream: its family, place, class (a todo's status),
-- until when it is pending (microseconds since the epoch, rounded up), and
-- who holds it meanwhile.
CREATE TABLE facets (
    stream    TEXT    NOT NULL PRIMARY KEY,
    family    TEXT    NOT NULL,
    position  INTEGER NOT NULL,
    class     INTEGER NOT NULL,
    due       INTEGER,
    holder    TEXT
) STRICT, WITHOUT ROWID;
-- The first stream of a class in the family's order.
CREATE INDEX facets_in_order ON facets (family, class, position);
-- What is still pending: counted, its soonest due found per class, and a
-- holder's own streams found among it (a few rows: the live leases and
-- unfinished deferrals). No more indexes: each is a page more that every
-- commit of a todo writes.
CREATE INDEX facets_pending ON facets (family, due, class) WHERE due IS NOT NULL;

-- How many streams of each class a family has, kept by the same commits,
-- so that counting a family reads one row per class. `shard` spreads a
-- family's counts over rows (PostgreSQL, where concurrent commits to
-- distinct streams must not queue on one row); SQLite has one writer and
-- keeps shard 0.
CREATE TABLE facet_counts (
    family  TEXT    NOT NULL,
    shard   INTEGER NOT NULL,
    class   INTEGER NOT NULL,
    n       INTEGER NOT NULL CHECK (n >= 0),
    PRIMARY KEY (family, shard, class)
) STRICT, WITHOUT ROWID;
