//! Finding the processes a test's servers started, by the mark they inherit; and a child a
//! test starts itself, killed when the test ends however it ends.

#![allow(dead_code)]

/// Every live (not zombie) process whose environment holds `TEST_MARK=<value>` with a value
/// starting with `prefix`, as (pid, value).
pub fn marked(prefix: &str) -> Vec<(i32, String)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            !std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|stat| stat.contains(") Z "))
        })
        .filter_map(|pid| {
            let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
            environ.split(|byte| *byte == 0).find_map(|entry| {
                let mark = std::str::from_utf8(entry)
                    .ok()?
                    .strip_prefix("TEST_MARK=")?;
                mark.starts_with(prefix).then(|| (pid, mark.to_owned()))
            })
        })
        .collect()
}

/// A child process the test started, killed and reaped when this drops: a test that fails
/// half-way leaves no server running.
pub struct Killed(pub std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
