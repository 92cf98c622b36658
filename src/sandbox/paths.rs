//! What a sandboxed process may read and write: the system's read-only directories (the
//! secrets among `/etc` left out), its own program's installation, a private temporary
//! directory, the paths its policy declares; never the user's credentials or the host's
//! state. Made into a Landlock ruleset in the parent, before the child exists.

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, Scope,
};

/// The Landlock ABI whose rights the ruleset asks for; an older kernel gets what it has.
const ABI_ASKED: ABI = ABI::V6;

/// The system's directories every sandboxed process reads (and runs programs from).
const SYSTEM: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/proc", "/sys",
];

/// Devices every process may read and write.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
    "/dev/shm",
];

/// What in `/etc` holds secrets: the password hashes, sudo's rules, the SSH host keys, TLS
/// private keys. Every other entry is readable.
fn etc_secret(relative: &str) -> bool {
    let name = relative.rsplit('/').next().unwrap_or(relative);
    matches!(
        relative,
        "shadow" | "shadow-" | "gshadow" | "gshadow-" | "sudoers" | "sudoers.d" | "ssl/private"
    ) || (relative.starts_with("ssh/") && name.starts_with("ssh_host_") && !name.ends_with(".pub"))
}

/// The folders of `/etc` whose entries are looked at one by one.
const ETC_OPENED: &[&str] = &["", "ssh", "ssl"];

/// What under the user's home is never readable unless a path inside it is declared by name.
pub(crate) const HOME_SECRETS: &[&str] = &[
    ".ssh",
    ".aws",
    ".config",
    ".gnupg",
    ".netrc",
    ".docker",
    ".kube",
    ".azure",
    ".password-store",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".local/share/keyrings",
    ".pki",
];

/// The rights to read (and run); the rights to write too.
fn read_rights() -> landlock::BitFlags<AccessFs> {
    AccessFs::from_read(ABI_ASKED)
}

fn write_rights() -> landlock::BitFlags<AccessFs> {
    AccessFs::from_all(ABI_ASKED)
}

/// What a process may reach, in paths: built from its policy and its program.
#[derive(Debug, Default)]
pub(crate) struct Grants {
    pub read: Vec<PathBuf>,
    pub write: Vec<PathBuf>,
    /// How many of each were declared, for the report.
    pub declared_read: usize,
    pub declared_write: usize,
    /// How many paths the program's installation took.
    pub installation: usize,
}

/// Why a declared path cannot be granted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refused {
    pub path: String,
    pub why: String,
}

impl Grants {
    /// The system's paths, `program`'s installation, `tmp`, and the declared paths: each
    /// declared one must exist and must not be, or hold, a protected path (the user's
    /// credentials, the host's state); one inside a protected folder but for the host's state
    /// may be named explicitly.
    pub(crate) fn new(
        program: &Installation,
        tmp: &Path,
        read: &[PathBuf],
        write: &[PathBuf],
        protected: &Protected,
    ) -> Result<Self, Refused> {
        // The system's paths are the same for every process: opened once (`Base`).
        let mut grants = Self::default();
        grants.read.extend(program.paths.iter().cloned());
        grants.installation = program.paths.len();
        grants.write.push(tmp.to_owned());
        for (declared, list, count) in [
            (read, &mut grants.read, &mut grants.declared_read),
            (write, &mut grants.write, &mut grants.declared_write),
        ] {
            for path in declared {
                let canonical = path.canonicalize().map_err(|_| Refused {
                    path: path.display().to_string(),
                    why: "does not exist".to_owned(),
                })?;
                protected.check(&canonical).map_err(|why| Refused {
                    path: path.display().to_string(),
                    why,
                })?;
                list.push(canonical);
                *count += 1;
            }
        }
        Ok(grants)
    }

    /// The Landlock ruleset: these grants, every TCP bind and connect refused when
    /// `no_tcp`, and signals and abstract sockets scoped to the sandbox.
    pub(crate) fn ruleset(&self, no_tcp: bool) -> Result<std::os::fd::OwnedFd, String> {
        let failed = |error: landlock::RulesetError| error.to_string();
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(write_rights())
            .map_err(failed)?
            .scope(Scope::AbstractUnixSocket | Scope::Signal)
            .map_err(failed)?;
        if no_tcp {
            ruleset = ruleset
                .handle_access(AccessNet::from_all(ABI_ASKED))
                .map_err(failed)?;
        }
        let mut created = ruleset.create().map_err(failed)?;
        for (fd, rights) in &Base::get().rules {
            created = created
                .add_rule(PathBeneath::new(fd.as_fd(), *rights))
                .map_err(failed)?;
        }
        for (paths, rights) in [(&self.read, read_rights()), (&self.write, write_rights())] {
            for path in paths {
                let Some(rule) = opened(path, rights) else {
                    continue;
                };
                created = created
                    .add_rule(PathBeneath::new(rule.0, rule.1))
                    .map_err(failed)?;
            }
        }
        Option::<std::os::fd::OwnedFd>::from(created)
            .ok_or_else(|| "this kernel has no Landlock".to_owned())
    }
}

/// `path` opened for a rule (`O_PATH`), with `rights` cut to a file's when it is no folder;
/// `None` when it is not there (a system folder this machine does not have).
fn opened(
    path: &Path,
    rights: landlock::BitFlags<AccessFs>,
) -> Option<(PathFd, landlock::BitFlags<AccessFs>)> {
    let fd = PathFd::new(path).ok()?;
    let is_dir = std::fs::metadata(path).is_ok_and(|meta| meta.is_dir());
    let rights = if is_dir {
        rights
    } else {
        rights & AccessFs::from_file(ABI_ASKED)
    };
    Some((fd, rights))
}

/// The rules every sandboxed process gets, opened once per process: the system's folders,
/// `/etc` but its secrets, the devices. Adding a rule by an open descriptor is one system
/// call; finding and opening these hundreds of paths for every process was most of what a
/// sandbox cost to start.
struct Base {
    rules: Vec<(PathFd, landlock::BitFlags<AccessFs>)>,
}

impl Base {
    fn get() -> &'static Self {
        static BASE: std::sync::OnceLock<Base> = std::sync::OnceLock::new();
        BASE.get_or_init(|| {
            let read = SYSTEM
                .iter()
                .map(PathBuf::from)
                .chain(etc_entries())
                .filter_map(|path| opened(&path, read_rights()));
            let write = DEVICES
                .iter()
                .filter_map(|path| opened(Path::new(path), write_rights()));
            Base {
                rules: read.chain(write).collect(),
            }
        })
    }
}

/// Every entry of `/etc` (and of its folders in [`ETC_OPENED`]) but its secrets, with the
/// target of each link that leads elsewhere (`/etc/resolv.conf` into `/run`).
fn etc_entries() -> Vec<PathBuf> {
    let mut entries = Vec::new();
    for folder in ETC_OPENED {
        let dir = Path::new("/etc").join(folder);
        let Ok(read) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in read.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let relative = if folder.is_empty() {
                name.to_string()
            } else {
                format!("{folder}/{name}")
            };
            if etc_secret(&relative) || (folder.is_empty() && ETC_OPENED.contains(&&*relative)) {
                continue;
            }
            let path = entry.path();
            if let Ok(target) = path.canonicalize()
                && !target.starts_with("/etc")
            {
                entries.push(target);
            }
            entries.push(path);
        }
    }
    entries
}

/// What a declared path may never be, or hold: the user's credentials (a path inside one of
/// these folders may be named explicitly) and the host's own state (never).
#[derive(Debug, Clone, Default)]
pub(crate) struct Protected {
    /// `~/.ssh`, `~/.aws`, …: canonical, those that exist.
    pub credentials: Vec<PathBuf>,
    /// The host's state file's folder and whatever else the embedder names.
    pub state: Vec<PathBuf>,
}

impl Protected {
    /// The user's credentials under `home`, and `state`.
    pub(crate) fn new(home: Option<&Path>, state: &[PathBuf]) -> Self {
        let credentials = home
            .into_iter()
            .flat_map(|home| HOME_SECRETS.iter().map(move |secret| home.join(secret)))
            .map(|path| path.canonicalize().unwrap_or(path))
            .collect();
        // A path that is not absolute would hold, or be held by, anything: it is no state.
        let state = state
            .iter()
            .map(|path| path.canonicalize().unwrap_or_else(|_| path.clone()))
            .filter(|path| path.is_absolute())
            .collect();
        Self { credentials, state }
    }

    /// Whether `path` (canonical) may be granted; why not, when it may not.
    pub(crate) fn check(&self, path: &Path) -> Result<(), String> {
        for state in &self.state {
            if path.starts_with(state) || state.starts_with(path) {
                return Err(format!(
                    "is or holds the host's own state ({}), which no sandboxed process may reach",
                    state.display()
                ));
            }
        }
        for secret in &self.credentials {
            if secret.starts_with(path) {
                return Err(format!(
                    "holds {}, which no sandboxed process may read: name the folders beneath it \
                     the process needs instead",
                    secret.display()
                ));
            }
        }
        Ok(())
    }

    /// Whether `path` holds or is inside anything protected (an inferred grant must not).
    fn touches(&self, path: &Path) -> bool {
        self.state
            .iter()
            .chain(&self.credentials)
            .any(|protected| protected.starts_with(path) || path.starts_with(protected))
    }
}

/// A program's installation: the paths it needs to run, found from its command, (for an
/// interpreter) its script, and any executable its arguments name. A `node_modules` tree or a Python environment is taken whole;
/// an interpreter named in a `#!` line is followed once; a lone program is itself.
#[derive(Debug, Default)]
pub(crate) struct Installation {
    pub paths: Vec<PathBuf>,
}

/// Runtimes whose first argument that is a file is the program they run.
const INTERPRETERS: &[&str] = &[
    "node", "nodejs", "bun", "deno", "python", "python3", "ruby", "perl", "php", "sh", "bash",
    "dash", "zsh", "uv", "tsx",
];

impl Installation {
    /// The installation of `command` (as resolved) and, for an interpreter, of its script
    /// among `args` (relative to `cwd`).
    pub(crate) fn of(
        command: &Path,
        args: &[String],
        cwd: Option<&Path>,
        path_var: Option<&std::ffi::OsStr>,
        protected: &Protected,
    ) -> Self {
        let mut found = Self::default();
        found.add_program(command, path_var, protected, 2);
        let name = command
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        let base = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
        if INTERPRETERS.contains(&base)
            && let Some(script) = args.iter().find(|arg| !arg.starts_with('-'))
        {
            let script = match cwd {
                Some(cwd) if !script.starts_with('/') => cwd.join(script),
                _ => PathBuf::from(script),
            };
            if script.is_file() {
                found.add_program(&script, path_var, protected, 0);
            }
        }
        // A program named among the arguments runs too (`sh -c 'exec "$0" …' /opt/x/bin/x`,
        // `env`, a launcher): an executable file's installation is taken as well.
        for arg in args.iter().filter(|arg| arg.starts_with('/')) {
            let path = Path::new(arg);
            let executable = std::fs::metadata(path).is_ok_and(|meta| {
                use std::os::unix::fs::PermissionsExt;
                meta.is_file() && meta.permissions().mode() & 0o111 != 0
            });
            if executable {
                found.add_program(path, path_var, protected, 1);
            }
        }
        found
    }

    /// Adds `program`'s installation; `hops` more `#!` interpreters are followed.
    fn add_program(
        &mut self,
        program: &Path,
        path_var: Option<&std::ffi::OsStr>,
        protected: &Protected,
        hops: usize,
    ) {
        let canonical = program
            .canonicalize()
            .unwrap_or_else(|_| program.to_owned());
        for path in [program, canonical.as_path()] {
            let root = installation_root(path).unwrap_or_else(|| path.to_owned());
            if protected.touches(&root) {
                if !protected.touches(path) {
                    self.push(path.to_owned());
                }
                continue;
            }
            self.push(root);
        }
        if hops == 0 {
            return;
        }
        if let Some(interpreter) = shebang(&canonical, path_var) {
            self.add_program(&interpreter, path_var, protected, hops - 1);
        }
    }

    fn push(&mut self, path: PathBuf) {
        if !self.paths.iter().any(|held| path.starts_with(held)) {
            self.paths.retain(|held| !held.starts_with(&path));
            self.paths.push(path);
        }
    }
}

/// The root of the installation `path` belongs to: its outermost `node_modules`, a Python
/// environment (`pyvenv.cfg` beside `bin`), or a prefix whose `bin` sits beside `lib`
/// (`/usr/local`, `~/.pyenv/versions/3.11.9`); `None` for a lone file.
fn installation_root(path: &Path) -> Option<PathBuf> {
    if let Some(modules) = path
        .ancestors()
        .filter(|dir| dir.file_name().is_some_and(|name| name == "node_modules"))
        .last()
    {
        return Some(modules.to_owned());
    }
    let bin = path.parent()?;
    // A version manager's shim (pyenv, rbenv, nodenv, asdf) runs the manager, which runs one
    // of the versions it installed: its whole root.
    if bin.file_name()? == "shims" {
        return bin.parent().map(Path::to_owned);
    }
    if bin.file_name()? != "bin" {
        return None;
    }
    let prefix = bin.parent()?;
    if prefix.join("pyvenv.cfg").is_file() {
        return Some(prefix.to_owned());
    }
    // A prefix with its own libraries is an installation; one directly in a home folder
    // (`~/.local`, `~/.cargo`) holds more than programs and is not.
    let in_home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .and_then(|home| prefix.parent().map(|parent| parent == home))
        .unwrap_or(false);
    (prefix.join("lib").is_dir() && !in_home && prefix != Path::new("/")).then(|| prefix.to_owned())
}

/// The interpreter a `#!` line names (`/usr/bin/env node` looked up on `path_var`).
fn shebang(program: &Path, path_var: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let read = std::fs::File::open(program)
        .and_then(|mut file| file.read(&mut head))
        .ok()?;
    let line = head[..read].strip_prefix(b"#!")?;
    let line = line.split(|b| *b == b'\n').next()?;
    let line = String::from_utf8_lossy(line);
    let mut words = line.split_whitespace();
    let interpreter = words.next()?;
    if interpreter.ends_with("/env") {
        let name = words.find(|word| !word.starts_with('-'))?;
        return std::env::split_paths(path_var?)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file());
    }
    Some(PathBuf::from(interpreter))
}
