-- 0001_init: per-workspace durable state in PostgreSQL, shared by every host of a deployment.
--
-- The same rows as the SQLite state file: only normalized, unexpanded server definitions,
-- enabledness and versions; never a token, OAuth state, a Task, or the expanded value of a
-- ${NAME} reference. Applied by src/store/postgres.rs inside one transaction under an advisory
-- lock, which then sets plurnk_mcp_meta.version = 1.

-- Whose database this is, and at which step of these migrations: a database without this
-- table (and with tables of its own), or naming another application, is refused untouched.
CREATE TABLE plurnk_mcp_meta (
    application TEXT NOT NULL,
    version     INTEGER NOT NULL
);
INSERT INTO plurnk_mcp_meta (application, version) VALUES ('plurnk-mcp', 0);

-- A workspace's own definition of one alias: one it added, or its specialization of a
-- service definition. `definition` is the McpServerDefinition JSON exactly as given.
CREATE TABLE plurnk_mcp_server (
    workspace  TEXT NOT NULL,
    alias      TEXT NOT NULL,
    source     TEXT NOT NULL CHECK (source IN ('added', 'specialized')),
    definition TEXT NOT NULL CHECK (definition::jsonb IS NOT NULL),
    PRIMARY KEY (workspace, alias)
);

-- A workspace's override of one alias's enabledness. No row: the alias follows
-- PLURNK_MCP_ENABLED.
CREATE TABLE plurnk_mcp_enabledness (
    workspace TEXT NOT NULL,
    alias     TEXT NOT NULL,
    enabled   BOOLEAN NOT NULL,
    PRIMARY KEY (workspace, alias)
);

-- One more with every write that changed the alias; kept when the alias is removed, so a
-- version never goes back and a writer that acts on an old one is refused.
CREATE TABLE plurnk_mcp_revision (
    workspace TEXT NOT NULL,
    alias     TEXT NOT NULL,
    version   BIGINT NOT NULL CHECK (version > 0),
    PRIMARY KEY (workspace, alias)
);
