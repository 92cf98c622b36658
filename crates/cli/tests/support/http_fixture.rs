//! The fixture serving Streamable HTTP in a child process, on a free loopback port.

#![allow(dead_code)]

use std::io::BufRead;
use std::process::{Child, Command, Stdio};

use crate::env::EXE;

/// The fixture serving Streamable HTTP in a child process, with `extra` flags (such as
/// `--bearer TOKEN`); killed on drop.
pub struct HttpFixture {
    pub child: Child,
    /// Where it listens (`http://127.0.0.1:PORT/mcp`).
    pub url: String,
}

impl HttpFixture {
    pub fn start(extra: &[&str]) -> Self {
        let mut child = Command::new(EXE)
            .args(["fixture", "--name", "web", "--http", "127.0.0.1:0"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the fixture starts");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        std::io::BufReader::new(stdout)
            .read_line(&mut line)
            .expect("it says where it listens");
        let url = line
            .trim()
            .strip_prefix("listening ")
            .expect("a listening line")
            .to_owned();
        Self { child, url }
    }
}

impl Drop for HttpFixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
