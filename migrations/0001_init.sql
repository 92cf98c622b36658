-- 0001_init: per-workspace durable state.
--
-- Only normalized, unexpanded server definitions and enabledness live here: never a token,
-- OAuth state, a Task, or the expanded value of a ${NAME} reference. Applied by
-- src/store/sqlite.rs inside one transaction, which then sets PRAGMA user_version = 1.

-- A workspace that holds any durable state; its rows go when the workspace goes.
CREATE TABLE workspace (
    name TEXT NOT NULL PRIMARY KEY
) STRICT, WITHOUT ROWID;

-- A workspace's own definition of one alias: one it added, or its specialization of a
-- service definition. `definition` is the McpServerDefinition JSON exactly as given.
CREATE TABLE server (
    workspace  TEXT NOT NULL REFERENCES workspace (name) ON DELETE CASCADE,
    alias      TEXT NOT NULL,
    source     TEXT NOT NULL CHECK (source IN ('added', 'specialized')),
    definition TEXT NOT NULL CHECK (json_valid(definition)),
    PRIMARY KEY (workspace, alias)
) STRICT, WITHOUT ROWID;

-- A workspace's override of one alias's enabledness (a service definition's, or an added
-- one's). No row: the alias follows PLURNK_MCP_ENABLED. Not tied to `server`, because a
-- workspace may enable or disable a service definition it does not specialize.
CREATE TABLE enabledness (
    workspace TEXT NOT NULL REFERENCES workspace (name) ON DELETE CASCADE,
    alias     TEXT NOT NULL,
    enabled   INTEGER NOT NULL CHECK (enabled IN (0, 1)),
    PRIMARY KEY (workspace, alias)
) STRICT, WITHOUT ROWID;
