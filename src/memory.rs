//! Memory a burst made the process hold, given back to the system once the burst is over.
//!
//! glibc keeps what a process freed: a thousand legacy sessions of the gateway, answers held
//! for clients that never read them, or the futures and buffers of thousands of connection
//! attempts, come from several worker threads and leave their arenas fragmented, so the
//! process keeps its peak size after they end. Each time such a burst ends (gateway sessions
//! closed, a connection that moved a megabyte or more gone, the last connection attempt of a
//! hydration settled) the free pages go back (`malloc_trim`), at most once per [`AFTER`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How long after something ended the memory freed meanwhile is given back: what ends together
/// (a burst of sessions expiring, slow readers cut off) is given back in one pass.
const AFTER: Duration = Duration::from_secs(1);

/// Whether a pass is already due.
static DUE: AtomicBool = AtomicBool::new(false);

/// Gives back, within [`AFTER`], the memory freed meanwhile (nothing off a runtime).
pub(crate) fn give_back() {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    if DUE.swap(true, Ordering::AcqRel) {
        return;
    }
    runtime.spawn(async {
        tokio::time::sleep(AFTER).await;
        DUE.store(false, Ordering::Release);
        trim();
    });
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    // SAFETY: malloc_trim(3) only returns free heap pages to the system; it touches no memory
    // the program holds.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}
