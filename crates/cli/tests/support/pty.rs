//! A command run on a real pseudo-terminal, as a person's shell runs it: stdin, stdout and
//! stderr on the terminal's slave side (unless the command pipes them itself), the terminal
//! its controlling one, so a Ctrl-C typed on it is a SIGINT to its foreground group.
//! Everything the command draws is kept, escapes included.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A running command on a terminal of `cols` × `rows`.
pub struct Terminal {
    child: Child,
    master: std::fs::File,
    seen: Arc<Mutex<Vec<u8>>>,
}

impl Terminal {
    /// Starts `command` on a new terminal.
    pub fn spawn(mut command: Command, cols: u16, rows: u16) -> Self {
        let (mut master, mut slave) = (0, 0);
        let size = libc::winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: openpty writes the two descriptors it opens; the name and termios are
        // not asked for.
        let opened = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                &size,
            )
        };
        assert_eq!(opened, 0, "openpty: {}", std::io::Error::last_os_error());
        // SAFETY: both were just opened by openpty and are owned here alone.
        let (master, slave) =
            unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
        let io = |fd: &OwnedFd| Stdio::from(fd.try_clone().expect("the terminal's fd"));
        command
            .stdin(io(&slave))
            .stdout(io(&slave))
            .stderr(io(&slave));
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            command.pre_exec(|| {
                // A session of its own whose controlling terminal is this one (fd 0).
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY as _, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().expect("the command starts on the terminal");
        drop(slave);
        let master = std::fs::File::from(master);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut reader = master.try_clone().expect("the terminal's master");
        let kept = seen.clone();
        std::thread::spawn(move || {
            let mut chunk = [0_u8; 8192];
            // EIO once every slave descriptor is closed: the command and its children are done.
            while let Ok(read) = reader.read(&mut chunk) {
                if read == 0 {
                    break;
                }
                kept.lock()
                    .expect("the output")
                    .extend_from_slice(&chunk[..read]);
            }
        });
        Self {
            child,
            master,
            seen,
        }
    }

    /// Everything drawn so far, escapes included.
    pub fn raw(&self) -> String {
        String::from_utf8_lossy(&self.seen.lock().expect("the output")).into_owned()
    }

    /// Everything drawn so far as text: escape sequences and carriage returns left out.
    pub fn text(&self) -> String {
        plain(&self.raw())
    }

    /// Types `bytes` on the terminal (`"\u{3}"` is Ctrl-C).
    pub fn type_in(&mut self, bytes: &str) {
        self.master
            .write_all(bytes.as_bytes())
            .expect("the terminal takes input");
    }

    /// The command's exit, waited for at most `bound`.
    pub fn wait(&mut self, bound: Duration) -> Option<ExitStatus> {
        let deadline = std::time::Instant::now() + bound;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if std::time::Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The command's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `text` without ANSI escape sequences (CSI and OSC) and carriage returns.
pub fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.next() {
                // CSI: parameters, then one final byte in @..~.
                Some('[') => {
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
                // OSC: until BEL or ST.
                Some(']') => {
                    while let Some(c) = chars.next() {
                        if c == '\u{7}' || (c == '\u{1b}' && chars.next_if_eq(&'\\').is_some()) {
                            break;
                        }
                    }
                }
                _ => {}
            },
            '\r' => {}
            c => out.push(c),
        }
    }
    out
}
