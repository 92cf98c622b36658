//! The gateway sessions that ended, shared by the replicas on one database: a row per ended
//! id (its SHA-256, never the id) until its sealed lifetime passes, at most
//! [`MAX_ENDED_SESSIONS`], and a `NOTIFY` so every replica ends its own copy at once.

use super::{CHANNEL, PostgresStore, database_error};
use crate::store::{MAX_ENDED_SESSIONS, StoreError};

/// Seconds since the Unix epoch.
fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| {
            i64::try_from(elapsed.as_secs()).unwrap_or(i64::MAX)
        })
}

impl PostgresStore {
    /// Records `key` as ended until `until`, forgets what has passed its lifetime and what is
    /// past the bound (nearest its end first), and announces it: one transaction.
    pub(super) async fn end_session_now(&self, key: &str, until: u64) -> Result<(), StoreError> {
        let shown = &self.shown;
        let failed =
            |error: tokio_postgres::Error| database_error(shown, "record an ended session", &error);
        let until = i64::try_from(until).unwrap_or(i64::MAX);
        let bound = i64::try_from(MAX_ENDED_SESSIONS).unwrap_or(i64::MAX);
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(failed)?;
        tx.execute(
            "DELETE FROM plurnk_mcp_ended_session WHERE until <= $1",
            &[&now()],
        )
        .await
        .map_err(failed)?;
        tx.execute(
            "INSERT INTO plurnk_mcp_ended_session (key, until) VALUES ($1, $2)
             ON CONFLICT (key) DO NOTHING",
            &[&key, &until],
        )
        .await
        .map_err(failed)?;
        tx.execute(
            "DELETE FROM plurnk_mcp_ended_session WHERE key IN (
                 SELECT key FROM plurnk_mcp_ended_session ORDER BY until, key
                 LIMIT greatest((SELECT count(*) FROM plurnk_mcp_ended_session) - $1, 0))",
            &[&bound],
        )
        .await
        .map_err(failed)?;
        let payload = serde_json::json!({ "ended": key, "until": until });
        tx.execute(
            "SELECT pg_notify($1, $2)",
            &[&CHANNEL, &payload.to_string()],
        )
        .await
        .map_err(failed)?;
        tx.commit().await.map_err(failed)
    }

    /// Whether `key` ended and its lifetime has not passed.
    pub(super) async fn session_ended_now(&self, key: &str) -> Result<bool, StoreError> {
        let shown = &self.shown;
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT 1 FROM plurnk_mcp_ended_session WHERE key = $1 AND until > $2",
                &[&key, &now()],
            )
            .await
            .map_err(|error| database_error(shown, "read the ended sessions", &error))?;
        Ok(row.is_some())
    }
}
