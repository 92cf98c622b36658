//! Percentiles, medians and the process's own memory and CPU figures.

use std::time::Duration;

/// Latencies of one run, in microseconds.
#[derive(Debug, Default)]
pub struct Latencies(Vec<u64>);

impl Latencies {
    pub fn with_capacity(n: usize) -> Self {
        Self(Vec::with_capacity(n))
    }

    pub fn push(&mut self, elapsed: Duration) {
        self.0
            .push(u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX));
    }

    pub fn extend(&mut self, other: Latencies) {
        self.0.extend(other.0);
    }

    pub fn from_micros(values: Vec<u64>) -> Self {
        Self(values)
    }

    /// The `q` quantile (0..=1), nearest rank; 0 when empty.
    pub fn quantile(&mut self, q: f64) -> f64 {
        if self.0.is_empty() {
            return 0.0;
        }
        self.0.sort_unstable();
        let rank = (q * self.0.len() as f64).ceil() as usize;
        self.0[rank.clamp(1, self.0.len()) - 1] as f64
    }
}

/// The median of `values` (the mean of the middle two for an even count); `None` if empty.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    })
}

/// `VmRSS` and `VmHWM` of this process, in KiB (0 where /proc is unavailable).
#[derive(Debug, Clone, Copy, Default)]
pub struct Memory {
    pub rss_kib: u64,
    /// `RssAnon`: the resident pages that are the process's own (heap, stacks), without the
    /// program's code and other file pages, which a larger program touches more of once.
    pub anon_kib: u64,
    pub hwm_kib: u64,
    /// [`heap_in_use`], in bytes (0 where unknown).
    pub heap: u64,
}

pub fn memory() -> Memory {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return Memory::default();
    };
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|kib| kib.parse().ok())
            .unwrap_or(0)
    };
    Memory {
        rss_kib: field("VmRSS:"),
        anon_kib: field("RssAnon:"),
        hwm_kib: field("VmHWM:"),
        heap: heap_in_use(),
    }
}

/// Resets `VmHWM` to the current `VmRSS` (Linux ≥ 4.0), so a peak measures one phase.
pub fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// Bytes the allocator has handed out and not yet had back (glibc `mallinfo2`: in-use
/// chunks of every arena plus mmapped blocks): the heap without the fragmentation and
/// untouched pages that make RSS differ.
pub fn heap_in_use() -> u64 {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallinfo2 takes no arguments and returns a plain struct.
        let info = unsafe { libc::mallinfo2() };
        (info.uordblks + info.hblkhd) as u64
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        0
    }
}

/// CPU time and context switches this process (all its threads) has used so far.
#[derive(Debug, Clone, Copy, Default)]
pub struct Usage {
    /// User + system CPU time, in microseconds.
    pub cpu_us: u64,
    /// Voluntary + involuntary context switches.
    pub switches: u64,
}

pub fn usage() -> Usage {
    // SAFETY: getrusage only writes the struct we hand it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid pointer.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return Usage::default();
    }
    let micros = |tv: libc::timeval| tv.tv_sec as u64 * 1_000_000 + tv.tv_usec as u64;
    Usage {
        cpu_us: micros(usage.ru_utime) + micros(usage.ru_stime),
        switches: (usage.ru_nvcsw + usage.ru_nivcsw) as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_and_medians() {
        let mut l = Latencies::from_micros((1..=100).collect());
        assert_eq!(l.quantile(0.5), 50.0);
        assert_eq!(l.quantile(0.99), 99.0);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
    }
}
