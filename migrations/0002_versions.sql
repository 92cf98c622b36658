-- 0002_versions: a version per (workspace, alias), so a writer that acts on what it last saw
-- is refused when another changed it meanwhile, instead of overwriting that change unseen.
--
-- One more with every write that changed the alias's server record or enabledness; kept when
-- the alias is removed (and its workspace with it), so a version never goes back. Rows written
-- before this step have none: their version is 0 until their next write.
CREATE TABLE revision (
    workspace TEXT NOT NULL,
    alias     TEXT NOT NULL,
    version   INTEGER NOT NULL CHECK (version > 0),
    PRIMARY KEY (workspace, alias)
) STRICT, WITHOUT ROWID;
