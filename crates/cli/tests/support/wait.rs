//! Waiting for a condition, bounded: how a test waits for something to happen, so that a
//! slow machine costs time but never a verdict, and a fast one never sleeps out a guess.

#![allow(dead_code)]

use std::future::Future;
use std::time::{Duration, Instant};

/// A generous guard on waits that normally end in milliseconds: only a hung host reaches it,
/// so it decides nothing on a slow machine.
pub const BOUND: Duration = Duration::from_secs(20);

/// How often a condition is checked: short beside what tests wait for, long enough not to
/// take the machine's two cores from the host under test.
const POLL: Duration = Duration::from_millis(20);

/// Checks `done` every 20 ms until it holds or `bound` passes; whether it held.
pub async fn until(bound: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + bound;
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        tokio::time::sleep(POLL).await;
    }
    done()
}

/// [`until`] for a check that has to await (a call, a request to a server).
pub async fn until_async<F, Fut>(bound: Duration, mut done: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + bound;
    while Instant::now() < deadline {
        if done().await {
            return true;
        }
        tokio::time::sleep(POLL).await;
    }
    done().await
}

/// [`until`] blocking the thread (std), for tests with no runtime.
pub fn until_blocking(bound: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + bound;
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(POLL);
    }
    done()
}
