//! A real headless browser for the tests that look at a page as a person would: Debian's
//! chromium, installed by the project's own `scripts/install-chromium.sh`, driven over the
//! DevTools protocol on a pipe (`--remote-debugging-pipe`: NUL-terminated JSON on fds 3 and
//! 4), so no WebSocket client is needed.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How long one DevTools command may take (a page load on a busy 2-core machine included).
const COMMAND_BOUND: Duration = Duration::from_secs(60);

/// The browser's path, installed (if needed) once per test binary.
pub fn chromium() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let script = PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../scripts/install-chromium.sh"
        ));
        let output = Command::new("bash")
            .arg(&script)
            .stderr(Stdio::inherit())
            .output()
            .expect("bash runs the install script");
        assert!(
            output.status.success(),
            "scripts/install-chromium.sh failed"
        );
        let path = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        assert!(Path::new(&path).exists(), "chromium is not at {path:?}");
        PathBuf::from(path)
    })
}

/// One headless chromium with one page, killed (its whole process group) when dropped.
pub struct Browser {
    child: Child,
    commands: std::fs::File,
    answers: BufReader<std::fs::File>,
    next_id: u64,
    session: String,
    _profile: TempDir,
}

/// A directory removed when dropped: the browser's profile.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    let done = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(done, 0, "pipe2: {}", std::io::Error::last_os_error());
    // SAFETY: pipe2 succeeded, so both are open descriptors this process owns.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

impl Browser {
    /// Starts the browser with a `width`×`height` window and opens a blank page in it.
    pub fn start(width: u32, height: u32) -> Self {
        static STARTED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let profile = std::env::temp_dir().join(format!(
            "plurnk-mcp-chromium-{}-{}",
            std::process::id(),
            STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&profile).expect("a profile directory");
        let (command_read, command_write) = pipe();
        let (answer_read, answer_write) = pipe();
        let (into, out) = (command_read.as_raw_fd(), answer_write.as_raw_fd());
        let mut command = Command::new(chromium());
        command
            .args([
                "--headless",
                // Root in a container: the sandbox needs namespaces it may not have.
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--disable-background-networking",
                "--hide-scrollbars",
                "--remote-debugging-pipe",
                &format!("--window-size={width},{height}"),
                &format!("--user-data-dir={}", profile.display()),
                "about:blank",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            command.pre_exec(move || {
                // A group of its own, so dropping the browser kills its helpers too.
                libc::setpgid(0, 0);
                // dup2 clears close-on-exec on the copies: fd 3 is what the browser reads
                // commands from, fd 4 where it writes answers.
                if libc::dup2(into, 3) < 0 || libc::dup2(out, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().expect("chromium starts");
        drop((command_read, answer_write));
        let mut browser = Self {
            child,
            commands: std::fs::File::from(command_write),
            answers: BufReader::new(std::fs::File::from(answer_read)),
            next_id: 0,
            session: String::new(),
            _profile: TempDir(profile),
        };
        let target = browser.command(None, "Target.createTarget", json!({"url": "about:blank"}));
        let target = target["targetId"].as_str().expect("a target id").to_owned();
        let attached = browser.command(
            None,
            "Target.attachToTarget",
            json!({"targetId": target, "flatten": true}),
        );
        browser.session = attached["sessionId"]
            .as_str()
            .expect("a session id")
            .to_owned();
        browser.page(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}),
        );
        browser
    }

    /// Sends one DevTools command (to the page's session when `session` is given) and
    /// returns its result, skipping the events that arrive meanwhile.
    fn command(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(session) = session {
            message["sessionId"] = json!(session);
        }
        let mut bytes = serde_json::to_vec(&message).expect("a command serializes");
        bytes.push(0);
        self.commands
            .write_all(&bytes)
            .unwrap_or_else(|error| panic!("{method}: the browser is gone: {error}"));
        let deadline = Instant::now() + COMMAND_BOUND;
        loop {
            assert!(Instant::now() < deadline, "{method}: no answer in time");
            let mut frame = Vec::new();
            let read = self
                .answers
                .read_until(0, &mut frame)
                .unwrap_or_else(|error| panic!("{method}: reading the browser: {error}"));
            assert!(read > 0, "{method}: the browser closed its pipe");
            frame.pop();
            let answer: Value = serde_json::from_slice(&frame).expect("the browser writes JSON");
            if answer["id"] != json!(id) {
                continue;
            }
            if let Some(error) = answer.get("error") {
                panic!("{method}: {error}");
            }
            return answer["result"].clone();
        }
    }

    /// A command to the page.
    fn page(&mut self, method: &str, params: Value) -> Value {
        let session = self.session.clone();
        self.command(Some(&session), method, params)
    }

    /// Opens `url` and waits until it has loaded.
    pub fn open(&mut self, url: &str) {
        let navigated = self.page("Page.navigate", json!({"url": url}));
        assert!(
            navigated.get("errorText").is_none(),
            "{url}: {}",
            navigated["errorText"]
        );
        let deadline = Instant::now() + COMMAND_BOUND;
        while self.evaluate("document.readyState") != json!("complete") {
            assert!(Instant::now() < deadline, "{url} did not finish loading");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The value of a JavaScript expression in the page.
    pub fn evaluate(&mut self, expression: &str) -> Value {
        let result = self.page(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true}),
        );
        if let Some(exception) = result.get("exceptionDetails") {
            panic!("{expression}: {exception}");
        }
        result["result"]["value"].clone()
    }

    /// The page's text as it is rendered: what a person reads (hidden elements and markup
    /// left out).
    pub fn visible_text(&mut self) -> String {
        self.evaluate("document.body.innerText")
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// A PNG of the whole page, written to `path`.
    pub fn screenshot(&mut self, path: &Path) {
        use base64::Engine as _;
        let shot = self.page(
            "Page.captureScreenshot",
            json!({"format": "png", "captureBeyondViewport": true}),
        );
        let data = shot["data"].as_str().expect("screenshot data");
        let png = base64::engine::general_purpose::STANDARD
            .decode(data)
            .expect("the screenshot is base64");
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("the screenshot's directory");
        }
        std::fs::write(path, png).expect("the screenshot is written");
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let group = -(self.child.id() as i32);
        // SAFETY: signalling the browser's own process group, which it leads.
        unsafe {
            libc::kill(group, libc::SIGKILL);
        }
        let _ = self.child.wait();
    }
}
