-- 0002_ended_sessions: the gateway sessions that ended, shared by every replica.
--
-- A 2025-11-25 session id is sealed, not stored: any replica opens it. Once a session ends
-- (a client's DELETE, idle past the gateway's bound), its id must not open again anywhere
-- until its sealed lifetime passes. `key` is the id's SHA-256 in hex (never the id itself);
-- `until` the end of its lifetime in seconds since the Unix epoch, after which the row is of
-- no use and is deleted. Bounded by the store (src/store/postgres/sessions.rs).
CREATE TABLE plurnk_mcp_ended_session (
    key   TEXT PRIMARY KEY,
    until BIGINT NOT NULL
);
CREATE INDEX plurnk_mcp_ended_session_until ON plurnk_mcp_ended_session (until);
