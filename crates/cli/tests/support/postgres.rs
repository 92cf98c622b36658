//! A real PostgreSQL server for one test binary: `initdb` and `pg_ctl` from Debian's
//! `postgresql` package (`scripts/install-system.sh` installs it when missing), a data folder
//! under the git-ignored `target/tmp`, a free loopback port, password authentication (so the
//! tests can look for the password where it must never be), stopped when dropped — and by a
//! watchdog shell if the test process dies first, so no server outlives its tests.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The server's user and the password every URL carries.
pub const USER: &str = "plurnk";
pub const PASSWORD: &str = "pg-pa55word-never-shown-8c1f";

/// A running server.
pub struct Postgres {
    bin: PathBuf,
    pub data: PathBuf,
    pub port: u16,
    /// Run the server's programs as this user (initdb refuses root).
    as_user: Option<&'static str>,
}

impl Postgres {
    /// Installs the binaries if missing, makes a cluster, starts it on a free port.
    pub fn start() -> Self {
        let bin = binaries();
        let data = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("postgres-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&data);
        std::fs::create_dir_all(&data).expect("the data folder");
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let as_user = root.then_some("postgres");
        if let Some(user) = as_user {
            let status = Command::new("chown")
                .args([&format!("{user}:"), data.to_str().expect("a UTF-8 path")])
                .status()
                .expect("chown runs");
            assert!(
                status.success(),
                "the data folder could not be given to {user}"
            );
        }
        let pwfile = data.join("pwfile");
        std::fs::write(&pwfile, PASSWORD).expect("the password file");
        if let Some(user) = as_user {
            let _ = Command::new("chown")
                .arg(format!("{user}:"))
                .arg(&pwfile)
                .status();
        }
        let cluster = data.join("cluster");
        let server = Self {
            bin,
            data: data.clone(),
            port: free_port(),
            as_user,
        };
        server.run(
            "initdb",
            &[
                "-D",
                path(&cluster),
                "-U",
                USER,
                "--auth=scram-sha-256",
                "--pwfile",
                path(&pwfile),
                "--no-sync",
                "-E",
                "UTF8",
            ],
        );
        let _ = std::fs::remove_file(&pwfile);
        // Loopback only, no socket file anywhere shared, and quick to stop. A commit writes its
        // WAL before it returns (synchronous_commit): `pg_ctl stop -m immediate` kills the WAL
        // writer, and an asynchronous commit of the last 600 ms (a store's migration) would be
        // lost to it, which no real crash of a server that reported a commit does. Nothing is
        // fsync'd: the machine itself never crashes under a test.
        let settings = format!(
            "\nlisten_addresses = '127.0.0.1'\nport = {}\nunix_socket_directories = ''\n\
             fsync = off\nsynchronous_commit = on\nfull_page_writes = off\nmax_connections = 200\n",
            server.port
        );
        let conf = cluster.join("postgresql.conf");
        let mut text = std::fs::read_to_string(&conf).expect("postgresql.conf");
        text.push_str(&settings);
        std::fs::write(&conf, text).expect("postgresql.conf");
        server.watchdog();
        server.up();
        server
    }

    fn cluster(&self) -> PathBuf {
        self.data.join("cluster")
    }

    /// A URL of database `name` on this server, password included.
    pub fn url(&self, name: &str) -> String {
        format!(
            "postgres://{USER}:{PASSWORD}@127.0.0.1:{}/{name}",
            self.port
        )
    }

    /// Starts the server (again), waiting until it takes connections.
    pub fn up(&self) {
        let log = self.data.join("server.log");
        self.run(
            "pg_ctl",
            &[
                "-D",
                path(&self.cluster()),
                "-l",
                path(&log),
                "-w",
                "-t",
                "60",
                "start",
            ],
        );
    }

    /// Stops it in `mode` (`fast`, or `immediate`: as a crash would).
    pub fn down(&self, mode: &str) {
        self.run(
            "pg_ctl",
            &["-D", path(&self.cluster()), "-m", mode, "-w", "stop"],
        );
    }

    /// Runs `psql`-free SQL through `postgres` single commands: a database made here.
    pub fn create_database(&self, name: &str) {
        // createdb speaks to the server as the URL's user, with the password.
        let status = self
            .command("createdb")
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                USER,
                name,
            ])
            .env("PGPASSWORD", PASSWORD)
            .status()
            .expect("createdb runs");
        assert!(status.success(), "createdb {name} failed");
    }

    /// Runs SQL in database `name` (with `psql`).
    pub fn sql(&self, name: &str, sql: &str) -> String {
        let output = self
            .command("psql")
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                USER,
                "-d",
                name,
                "-v",
                "ON_ERROR_STOP=1",
                "-qAt",
                "-c",
                sql,
            ])
            .env("PGPASSWORD", PASSWORD)
            .output()
            .expect("psql runs");
        assert!(
            output.status.success(),
            "psql {sql}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    fn command(&self, program: &str) -> Command {
        let program = self.bin.join(program);
        match self.as_user {
            Some(user) => {
                let mut command = Command::new("runuser");
                command.args(["-u", user, "--"]).arg(program);
                command
            }
            None => Command::new(program),
        }
    }

    fn run(&self, program: &str, args: &[&str]) {
        let output = self
            .command(program)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|error| panic!("{program} could not run: {error}"));
        assert!(
            output.status.success(),
            "{program} {args:?} failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// A shell that outlives this process only to stop the server and remove its folder if
    /// the process dies without doing so (a test killed, a panic in the harness).
    fn watchdog(&self) {
        let pg_ctl = self.bin.join("pg_ctl");
        let stop = match self.as_user {
            Some(user) => format!("runuser -u {user} -- {}", pg_ctl.display()),
            None => pg_ctl.display().to_string(),
        };
        let script = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 1; done; \
             {stop} -D '{cluster}' -m immediate stop >/dev/null 2>&1; rm -rf '{data}'",
            pid = std::process::id(),
            cluster = self.cluster().display(),
            data = self.data.display(),
        );
        use std::os::unix::process::CommandExt;
        let _ = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn();
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = self
            .command("pg_ctl")
            .args(["-D", path(&self.cluster()), "-m", "immediate", "-w", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&self.data);
    }
}

fn path(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

/// The newest `/usr/lib/postgresql/*/bin`, installed by the project's script when missing.
fn binaries() -> PathBuf {
    let find = || {
        let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| {
                let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
                let bin = entry.path().join("bin");
                bin.join("initdb").exists().then_some((version, bin))
            })
            .collect();
        found.sort();
        found.pop().map(|(_, bin)| bin)
    };
    if let Some(bin) = find() {
        return bin;
    }
    let script = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scripts/install-system.sh"
    ));
    let status = Command::new("bash")
        .arg(script)
        .status()
        .expect("bash runs scripts/install-system.sh");
    assert!(status.success(), "scripts/install-system.sh failed");
    find().expect("PostgreSQL's binaries under /usr/lib/postgresql/*/bin")
}

/// A port nothing listens on now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free loopback port")
}
