//! The sandbox policy of a process the host starts (a stdio server, a tool source's program or
//! script): what it may read and write, its network, its limits and how strictly the policy is
//! held. Written on a definition (`sandbox`), in `PLURNK_MCP_<server>_SANDBOX`, in a tool
//! source's declaration, and host-wide in `PLURNK_MCP_SANDBOX`; read here with every fault at
//! once, each naming the member and the fix. Enforcing it is `crate::sandbox`'s.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::ConfigError;
use super::json;

/// How strictly a policy is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Every part must be enforced by the kernel, or the process is not started.
    Require,
    /// What this machine can enforce is enforced, and what it cannot is reported.
    BestEffort,
    /// No sandbox: the process runs with the daemon's user and view of the machine.
    Off,
}

/// What network a process reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxNetwork {
    /// None: a network namespace of its own with no interface up.
    None,
    /// Its own loopback only: a network namespace of its own with `lo` up, so it may talk to
    /// itself and its children (a browser it drives), never to another host or the machine's
    /// own services.
    Loopback,
    /// The daemon's network.
    Any,
}

/// A limit as written: a whole number, a text with a unit (`"512MiB"`, `"90s"`), or
/// `"unlimited"`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum SandboxAmount {
    /// A whole number: bytes, processes, files or seconds.
    Count(u64),
    /// A number with a unit, or `"unlimited"`.
    Text(String),
}

/// A sandbox policy as written: every member optional, paths unexpanded (`${NAME}` allowed).
/// A member left out takes the host-wide policy's (`PLURNK_MCP_SANDBOX`), and that one's the
/// built-in default's. `read` and `write` add to what every sandboxed process gets (the
/// system's read-only directories, its own program's installation, a private temporary
/// directory).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SandboxPolicy {
    /// `require`, `best-effort` (the default) or `off`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<SandboxMode>,
    /// Absolute paths readable (and their contents), beyond the default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<Vec<String>>,
    /// Absolute paths writable (and readable), beyond the private temporary directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write: Option<Vec<String>>,
    /// `none`, `loopback` or `any` (the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<SandboxNetwork>,
    /// Memory of each process (`"512MiB"`, `"1GiB"`, bytes), default 1 GiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<SandboxAmount>,
    /// Processes and threads together, default 512.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<SandboxAmount>,
    /// Open files of each process, default 4096.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<SandboxAmount>,
    /// CPU time of each process (`"90s"`, `"10m"`, seconds), unlimited by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<SandboxAmount>,
}

/// The built-in default's limits, and the least each may be set to.
pub(crate) const DEFAULT_MEMORY: u64 = 1 << 30;
/// Processes and threads: Node runs about a dozen threads, a headless Chromium a few hundred.
pub(crate) const DEFAULT_PROCESSES: u64 = 512;
/// Open files of each process: four times the soft limit most programs run under.
pub(crate) const DEFAULT_FILES: u64 = 4096;
/// Below these no runtime the host starts can run: Node needs about 40 MiB of data and a
/// dozen threads and its first few dozen files.
pub(crate) const MIN_MEMORY: u64 = 64 << 20;
/// See [`MIN_MEMORY`].
pub(crate) const MIN_PROCESSES: u64 = 16;
/// See [`MIN_MEMORY`].
pub(crate) const MIN_FILES: u64 = 64;

/// A policy with every member decided: the built-in default under the host-wide policy
/// under the process's own, paths expanded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// How strictly it is held.
    pub mode: SandboxMode,
    /// Declared readable paths.
    pub read: Vec<PathBuf>,
    /// Declared writable paths.
    pub write: Vec<PathBuf>,
    /// The network.
    pub network: SandboxNetwork,
    /// Bytes of memory per process; `None` unlimited.
    pub memory: Option<u64>,
    /// Processes and threads; `None` unlimited.
    pub processes: Option<u64>,
    /// Open files per process; `None` unlimited.
    pub files: Option<u64>,
    /// CPU seconds per process; `None` unlimited.
    pub cpu: Option<u64>,
}

/// Which limit an amount is, for reading and for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Measure {
    Memory,
    Processes,
    Files,
    Cpu,
}

impl Measure {
    fn member(self) -> &'static str {
        match self {
            Self::Memory => "memory",
            Self::Processes => "processes",
            Self::Files => "files",
            Self::Cpu => "cpu",
        }
    }

    fn least(self) -> u64 {
        match self {
            Self::Memory => MIN_MEMORY,
            Self::Processes => MIN_PROCESSES,
            Self::Files => MIN_FILES,
            Self::Cpu => 1,
        }
    }

    fn example(self) -> &'static str {
        match self {
            Self::Memory => "\"512MiB\", \"2GiB\" or a number of bytes",
            Self::Processes => "a whole number such as 256",
            Self::Files => "a whole number such as 1024",
            Self::Cpu => "\"90s\", \"10m\", \"1h\" or a number of seconds",
        }
    }

    /// The amount in its unit (bytes, count, seconds); `Ok(None)` for `"unlimited"`.
    fn read(self, amount: &SandboxAmount) -> Result<Option<u64>, ()> {
        let text = match amount {
            SandboxAmount::Count(count) => return Ok(Some(*count)),
            SandboxAmount::Text(text) => text.trim(),
        };
        if text.eq_ignore_ascii_case("unlimited") {
            return Ok(None);
        }
        let split = text
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len());
        let (number, unit) = text.split_at(split);
        let number: u64 = number.parse().map_err(|_| ())?;
        let scale: u64 = match (self, unit.trim()) {
            (_, "") => 1,
            (Self::Memory, "B") => 1,
            (Self::Memory, "K" | "KiB" | "k") => 1 << 10,
            (Self::Memory, "M" | "MiB") => 1 << 20,
            (Self::Memory, "G" | "GiB") => 1 << 30,
            (Self::Cpu, "s") => 1,
            (Self::Cpu, "m" | "min") => 60,
            (Self::Cpu, "h") => 3600,
            _ => return Err(()),
        };
        number.checked_mul(scale).map(Some).ok_or(())
    }

    /// How an amount in this measure's unit is shown: `512 MiB`, `64`, `90 s`.
    fn show(self, amount: u64) -> String {
        match self {
            Self::Memory => show_bytes(amount),
            Self::Cpu => format!("{amount} s"),
            Self::Processes | Self::Files => amount.to_string(),
        }
    }
}

/// Bytes in the largest binary unit that divides them: `512 MiB`, `1 GiB`.
pub fn show_bytes(bytes: u64) -> String {
    for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{} {unit}", bytes >> shift);
        }
    }
    format!("{bytes} B")
}

const MEMBERS: &str = "mode, read, write, network, memory, processes, files, cpu";
const POLICY: &str = "a JSON object such as {\"write\": [\"/srv/data\"], \"network\": \"none\"}";

impl SandboxPolicy {
    /// Reads a policy from the JSON value `variable` holds, or `None` with every fault in
    /// `faults`, each naming `<variable>.<member>`. No fault quotes a value.
    pub(crate) fn from_value(
        variable: &str,
        value: &Value,
        faults: &mut Vec<ConfigError>,
    ) -> Option<Self> {
        let before = faults.len();
        let Value::Object(object) = value else {
            faults.push(ConfigError::WrongJsonShape {
                variable: variable.to_owned(),
                expected: POLICY,
                found: format!("it is {}", json::kind(value)),
            });
            return None;
        };
        let fault = |member: &str, problem: String, fix: &str| ConfigError::InvalidSandbox {
            variable: format!("{variable}.{member}"),
            problem,
            fix: fix.to_owned(),
        };
        for (key, member) in object {
            match key.as_str() {
                "mode" => {
                    if !matches!(member.as_str(), Some("require" | "best-effort" | "off")) {
                        faults.push(fault(
                            key,
                            "is not a mode".to_owned(),
                            "write \"require\", \"best-effort\" or \"off\"",
                        ));
                    }
                }
                "network" => {
                    if !matches!(member.as_str(), Some("none" | "loopback" | "any")) {
                        faults.push(fault(
                            key,
                            "is not a network".to_owned(),
                            "write \"none\", \"loopback\" or \"any\"",
                        ));
                    }
                }
                "read" | "write" => check_paths(variable, key, member, faults),
                "memory" | "processes" | "files" | "cpu" => {
                    let measure = match key.as_str() {
                        "memory" => Measure::Memory,
                        "processes" => Measure::Processes,
                        "files" => Measure::Files,
                        _ => Measure::Cpu,
                    };
                    check_amount(variable, measure, member, faults);
                }
                _ => faults.push(ConfigError::UnknownField {
                    variable: variable.to_owned(),
                    field: key.chars().take(64).collect(),
                    allowed: MEMBERS.to_owned(),
                }),
            }
        }
        if faults.len() > before {
            return None;
        }
        serde_json::from_value(value.clone()).ok().or_else(|| {
            faults.push(ConfigError::WrongJsonShape {
                variable: variable.to_owned(),
                expected: POLICY,
                found: "it does not match that shape".to_owned(),
            });
            None
        })
    }

    /// Reads a policy from JSON text (`PLURNK_MCP_SANDBOX`, `PLURNK_MCP_<server>_SANDBOX`).
    pub(crate) fn from_variable(
        variable: &str,
        raw: &str,
        faults: &mut Vec<ConfigError>,
    ) -> Option<Self> {
        match json::parse(variable, raw, POLICY) {
            Ok(value) => Self::from_value(variable, &value, faults),
            Err(fault) => {
                faults.push(fault);
                None
            }
        }
    }

    /// Every fault of a policy held in a definition (already well-shaped): the same member
    /// checks, named `<variable>.<member>`.
    pub(crate) fn check(&self, variable: &str, faults: &mut Vec<ConfigError>) {
        if let Ok(value) = serde_json::to_value(self) {
            Self::from_value(variable, &value, faults);
        }
    }

    /// This policy's members over `base`'s: each member this one sets wins, whole.
    #[must_use]
    pub fn over(&self, base: &Self) -> Self {
        Self {
            mode: self.mode.or(base.mode),
            read: self.read.clone().or_else(|| base.read.clone()),
            write: self.write.clone().or_else(|| base.write.clone()),
            network: self.network.or(base.network),
            memory: self.memory.clone().or_else(|| base.memory.clone()),
            processes: self.processes.clone().or_else(|| base.processes.clone()),
            files: self.files.clone().or_else(|| base.files.clone()),
            cpu: self.cpu.clone().or_else(|| base.cpu.clone()),
        }
    }

    /// Whether it asks for no sandbox at all.
    pub fn is_off(&self) -> bool {
        self.mode == Some(SandboxMode::Off)
    }

    /// Each path expanded by `expand` (given the member's name and the path as written).
    ///
    /// # Errors
    ///
    /// The first path whose reference cannot be expanded, or that is not absolute once it is.
    pub fn expand(
        &self,
        variable: &str,
        expand: &dyn Fn(&str, &str) -> Result<String, ConfigError>,
    ) -> Result<Self, ConfigError> {
        let paths = |member: &str, paths: &Option<Vec<String>>| -> Result<_, ConfigError> {
            paths
                .as_ref()
                .map(|paths| {
                    paths
                        .iter()
                        .map(|path| {
                            let name = format!("{variable}.{member}");
                            let expanded = expand(&name, path)?;
                            if expanded.starts_with('/') {
                                Ok(expanded)
                            } else {
                                Err(ConfigError::InvalidSandbox {
                                    variable: name,
                                    problem: "names a path that is not absolute once expanded"
                                        .to_owned(),
                                    fix: "name each path from the root (/…)".to_owned(),
                                })
                            }
                        })
                        .collect::<Result<Vec<_>, _>>()
                })
                .transpose()
        };
        Ok(Self {
            read: paths("read", &self.read)?,
            write: paths("write", &self.write)?,
            ..self.clone()
        })
    }

    /// Every member decided: this policy's, else the built-in default's. Paths as they are
    /// (expand first). An amount that cannot be read (checked at admission) is the default.
    pub fn resolve(&self) -> Resolved {
        let amount = |measure: Measure, amount: &Option<SandboxAmount>, default: Option<u64>| {
            amount
                .as_ref()
                .map_or(Ok(default), |amount| measure.read(amount))
                .unwrap_or(default)
        };
        let paths = |paths: &Option<Vec<String>>| {
            paths
                .iter()
                .flatten()
                .map(PathBuf::from)
                .collect::<Vec<_>>()
        };
        Resolved {
            mode: self.mode.unwrap_or(SandboxMode::BestEffort),
            read: paths(&self.read),
            write: paths(&self.write),
            network: self.network.unwrap_or(SandboxNetwork::Any),
            memory: amount(Measure::Memory, &self.memory, Some(DEFAULT_MEMORY)),
            processes: amount(Measure::Processes, &self.processes, Some(DEFAULT_PROCESSES)),
            files: amount(Measure::Files, &self.files, Some(DEFAULT_FILES)),
            cpu: amount(Measure::Cpu, &self.cpu, None),
        }
    }
}

impl Resolved {
    /// `512 MiB`, `unlimited`.
    pub fn show_memory(&self) -> String {
        self.memory
            .map_or_else(|| "unlimited".to_owned(), |m| Measure::Memory.show(m))
    }

    /// `90 s`, `unlimited`.
    pub fn show_cpu(&self) -> String {
        self.cpu
            .map_or_else(|| "unlimited".to_owned(), |c| Measure::Cpu.show(c))
    }
}

fn check_paths(variable: &str, member: &str, value: &Value, faults: &mut Vec<ConfigError>) {
    let name = format!("{variable}.{member}");
    let Value::Array(items) = value else {
        faults.push(ConfigError::WrongJsonShape {
            variable: name,
            expected: json::STRING_ARRAY,
            found: format!("it is {}", json::kind(value)),
        });
        return;
    };
    for (i, item) in items.iter().enumerate() {
        let element = format!("{name} element {}", i + 1);
        let Some(path) = item.as_str() else {
            faults.push(ConfigError::WrongJsonShape {
                variable: element,
                expected: "a JSON string (an absolute path)",
                found: format!("it is {}", json::kind(item)),
            });
            continue;
        };
        if path.contains("${") {
            // Checked once expanded, when the process is started.
            continue;
        }
        if !path.starts_with('/') {
            faults.push(ConfigError::InvalidSandbox {
                variable: element,
                problem: "is not an absolute path".to_owned(),
                fix: "name the path from the root (/…), or from a ${NAME} that holds one"
                    .to_owned(),
            });
        } else if std::fs::symlink_metadata(path).is_err() {
            faults.push(ConfigError::InvalidSandbox {
                variable: element,
                problem: "names a path that does not exist".to_owned(),
                fix: "create it first, or name one that exists".to_owned(),
            });
        }
    }
}

fn check_amount(variable: &str, measure: Measure, value: &Value, faults: &mut Vec<ConfigError>) {
    let name = format!("{variable}.{}", measure.member());
    let amount = match value {
        Value::Number(number) => number.as_u64().map(SandboxAmount::Count),
        Value::String(text) => Some(SandboxAmount::Text(text.clone())),
        _ => None,
    };
    let read = amount.as_ref().map(|amount| measure.read(amount));
    match read {
        None | Some(Err(())) => faults.push(ConfigError::InvalidSandbox {
            variable: name,
            problem: "cannot be read as a limit".to_owned(),
            fix: format!("write {} or \"unlimited\"", measure.example()),
        }),
        Some(Ok(Some(amount))) if amount < measure.least() => {
            faults.push(ConfigError::InvalidSandbox {
                variable: name,
                problem: format!(
                    "is {}, below the {} any runtime needs",
                    measure.show(amount),
                    measure.show(measure.least())
                ),
                fix: format!("raise it to {} or more", measure.show(measure.least())),
            });
        }
        Some(Ok(_)) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(value: Value) -> Result<SandboxPolicy, Vec<ConfigError>> {
        let mut faults = Vec::new();
        SandboxPolicy::from_value("PLURNK_MCP_FILES_SANDBOX", &value, &mut faults).ok_or(faults)
    }

    #[test]
    fn a_policy_reads_and_resolves_over_the_defaults() {
        let policy = read(json!({
            "write": ["/tmp"], "network": "none", "memory": "512MiB", "processes": 64,
            "cpu": "2m", "mode": "require"
        }))
        .expect("valid");
        let resolved = policy.resolve();
        assert_eq!(resolved.mode, SandboxMode::Require);
        assert_eq!(resolved.write, [PathBuf::from("/tmp")]);
        assert_eq!(resolved.network, SandboxNetwork::None);
        assert_eq!(resolved.memory, Some(512 << 20));
        assert_eq!(resolved.processes, Some(64));
        assert_eq!(resolved.files, Some(DEFAULT_FILES));
        assert_eq!(resolved.cpu, Some(120));
        let default = SandboxPolicy::default().resolve();
        assert_eq!(default.mode, SandboxMode::BestEffort);
        assert_eq!(default.network, SandboxNetwork::Any);
        assert_eq!(default.memory, Some(DEFAULT_MEMORY));
        assert_eq!(default.cpu, None);
        let unlimited = read(json!({"memory": "unlimited"})).expect("valid");
        assert_eq!(unlimited.resolve().memory, None);
    }

    #[test]
    fn a_member_over_another_policy_wins_whole() {
        let host = read(json!({"network": "none", "read": ["/usr"]})).expect("valid");
        let own = read(json!({"read": ["/etc"]})).expect("valid");
        let merged = own.over(&host);
        assert_eq!(merged.network, Some(SandboxNetwork::None));
        assert_eq!(merged.read, Some(vec!["/etc".to_owned()]));
    }

    #[test]
    fn every_fault_of_a_policy_is_named_at_once() {
        let faults = read(json!({
            "mode": "strict", "network": "internet", "read": ["relative", "/no/such/path/x"],
            "write": "/tmp", "memory": "lots", "processes": 2, "files": "12", "cpu": -1,
            "colour": "blue"
        }))
        .expect_err("invalid");
        let text: Vec<String> = faults.iter().map(ToString::to_string).collect();
        for needle in [
            "PLURNK_MCP_FILES_SANDBOX.mode",
            "PLURNK_MCP_FILES_SANDBOX.network",
            "PLURNK_MCP_FILES_SANDBOX.read element 1",
            "PLURNK_MCP_FILES_SANDBOX.read element 2",
            "PLURNK_MCP_FILES_SANDBOX.write",
            "PLURNK_MCP_FILES_SANDBOX.memory",
            "PLURNK_MCP_FILES_SANDBOX.processes",
            "PLURNK_MCP_FILES_SANDBOX.files",
            "PLURNK_MCP_FILES_SANDBOX.cpu",
            "colour",
        ] {
            assert!(
                text.iter().any(|fault| fault.contains(needle)),
                "{needle} not in {text:#?}"
            );
        }
        assert_eq!(faults.len(), 10, "{text:#?}");
        assert!(
            text.iter()
                .any(|f| f.contains("is 2, below the 16 any runtime needs"))
        );
    }

    #[test]
    fn every_sandbox_fault_of_a_configuration_is_reported_at_once_naming_the_member() {
        let errors = crate::config::HostConfig::from_env([
            ("PLURNK_MCP_WEB", "https://example.com/mcp"),
            ("PLURNK_MCP_WEB_SANDBOX", r#"{"network": "none"}"#),
            ("PLURNK_MCP_FILES", "/bin/true"),
            (
                "PLURNK_MCP_FILES_SANDBOX",
                r#"{"memory": "1MiB", "write": ["/no/such/dir"]}"#,
            ),
            (
                "PLURNK_MCP_SANDBOX",
                r#"{"read": ["relative/path"], "cpu": "soon"}"#,
            ),
        ])
        .expect_err("faulty");
        let text = errors.to_string();
        for needle in [
            "PLURNK_MCP_WEB_SANDBOX applies only to stdio servers",
            "PLURNK_MCP_FILES_SANDBOX.memory is 1 MiB, below the 64 MiB any runtime needs",
            "PLURNK_MCP_FILES_SANDBOX.write element 1 names a path that does not exist",
            "PLURNK_MCP_SANDBOX.read element 1 is not an absolute path",
            "PLURNK_MCP_SANDBOX.cpu cannot be read as a limit",
        ] {
            assert!(text.contains(needle), "{needle} not in:\n{text}");
        }
        assert_eq!(errors.errors().len(), 5, "{text}");
    }

    #[test]
    fn bytes_are_shown_in_their_largest_whole_unit() {
        assert_eq!(show_bytes(512 << 20), "512 MiB");
        assert_eq!(show_bytes(1 << 30), "1 GiB");
        assert_eq!(show_bytes(1000), "1000 B");
    }
}
