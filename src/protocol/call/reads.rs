//! Resource reads kept as the server wrote them, for as long as the answer's `ttlMs` says.
//!
//! rmcp's response cache keeps its typed `ReadResourceResult`, which drops what rmcp does not
//! know (a field beside `contents`, one inside a content): the host keeps the answer itself,
//! whole. One cache per connection, so a `private` answer is never served to another
//! connection's credentials; an entry is forgotten when the server says the resource was
//! updated, when its time is up, and when the connection goes.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

/// The most reads one connection keeps: past it, the entry closest to its end makes room.
const MAX_ENTRIES: usize = 1024;

/// The longest a read is kept, whatever its `ttlMs` says.
const MAX_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// The reads of one connection, by URI.
#[derive(Debug, Default)]
pub(crate) struct Reads {
    entries: Mutex<HashMap<String, (Instant, Value)>>,
}

impl Reads {
    /// The answer kept for `uri`, while it is fresh.
    pub(crate) fn fresh(&self, uri: &str, now: Instant) -> Option<Value> {
        let mut entries = self.entries.lock().ok()?;
        match entries.get(uri) {
            Some((until, answer)) if *until > now => Some(answer.clone()),
            Some(_) => {
                entries.remove(uri);
                None
            }
            None => None,
        }
    }

    /// Keeps `answer` for `uri` when it is a complete result that says it stays fresh a while
    /// (`ttlMs` above zero).
    pub(crate) fn keep(&self, uri: &str, answer: &Value, now: Instant) {
        let complete = answer
            .get("resultType")
            .and_then(Value::as_str)
            .is_none_or(|kind| kind == "complete");
        let ttl = answer.get("ttlMs").and_then(Value::as_u64).unwrap_or(0);
        if !complete || ttl == 0 {
            return;
        }
        let until = now + Duration::from_millis(ttl).min(MAX_TTL);
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        if entries.len() >= MAX_ENTRIES && !entries.contains_key(uri) {
            entries.retain(|_, (until, _)| *until > now);
            if entries.len() >= MAX_ENTRIES
                && let Some(soonest) = entries
                    .iter()
                    .min_by_key(|(_, (until, _))| *until)
                    .map(|(uri, _)| uri.clone())
            {
                entries.remove(&soonest);
            }
        }
        entries.insert(uri.to_owned(), (until, answer.clone()));
    }

    /// Forgets what was kept for `uri` (the server said it changed).
    pub(crate) fn forget(&self, uri: &str) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.remove(uri);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_read_is_kept_whole_for_its_ttl_and_forgotten_when_updated() {
        let reads = Reads::default();
        let now = Instant::now();
        let answer = json!({"contents": [{"uri": "a", "text": "x", "x-kept": 1}], "ttlMs": 100,
                            "x-vendor": {"kept": true}});
        reads.keep("a", &answer, now);
        assert_eq!(reads.fresh("a", now), Some(answer.clone()));
        assert_eq!(reads.fresh("a", now + Duration::from_millis(100)), None);
        reads.keep("a", &answer, now);
        reads.forget("a");
        assert_eq!(reads.fresh("a", now), None);
        // No ttl, a zero one, or a round that is not the result: nothing kept.
        for answer in [
            json!({"contents": []}),
            json!({"contents": [], "ttlMs": 0}),
            json!({"resultType": "input_required", "ttlMs": 100}),
        ] {
            reads.keep("b", &answer, now);
            assert_eq!(reads.fresh("b", now), None, "{answer}");
        }
    }

    #[test]
    fn a_full_cache_makes_room_with_the_entry_closest_to_its_end() {
        let reads = Reads::default();
        let now = Instant::now();
        for n in 0..MAX_ENTRIES {
            let ttl = 1000 + n as u64;
            reads.keep(
                &format!("r{n}"),
                &json!({"contents": [], "ttlMs": ttl}),
                now,
            );
        }
        reads.keep("new", &json!({"contents": [], "ttlMs": 5}), now);
        assert!(reads.fresh("new", now).is_some());
        assert!(
            reads.fresh("r0", now).is_none(),
            "the soonest to end made room"
        );
        assert!(reads.fresh("r1", now).is_some());
    }
}
