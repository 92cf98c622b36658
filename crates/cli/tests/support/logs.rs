//! Every log line of a test process at `trace`, every crate included, written through the
//! same scrubbing writer the command line uses, for tests that look for a secret in them.

#![allow(dead_code)]

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

#[derive(Clone)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut buffer) = self.0.lock() {
            buffer.extend_from_slice(bytes);
        }
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn buffer() -> &'static Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let capture = Capture(buffer.clone());
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new("trace"))
            .with_writer(plurnk_mcp::redact::Scrubbing::new(move || capture.clone()))
            .with_ansi(false)
            .finish();
        let _ = tracing::subscriber::set_global_default(subscriber);
        buffer
    })
}

/// Starts capturing (once per process); call it before the code whose logs matter.
pub fn capture() {
    buffer();
}

/// Everything logged so far.
pub fn logged() -> String {
    buffer()
        .lock()
        .map(|buffer| String::from_utf8_lossy(&buffer).into_owned())
        .unwrap_or_default()
}
