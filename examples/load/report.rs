//! Medians, ratios to raw rmcp, the side-by-side table, the growth of the in-process
//! hydration from one size to the next, the targets of issues 5, 10 and 34, and the JSON.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use serde_json::{Value, json};

use crate::spec::{Client, TrialResult, Workload};
use crate::stats::median;

/// One workload at one size and the clients that run it.
#[derive(Debug, Clone)]
pub struct Group {
    pub id: String,
    pub label: String,
    pub workload: Workload,
    pub clients: Vec<Client>,
    pub metrics: Vec<&'static str>,
}

impl Group {
    pub fn new(
        id: &str,
        label: String,
        workload: Workload,
        clients: Vec<Client>,
        metrics: &[&'static str],
    ) -> Group {
        Group {
            id: id.to_owned(),
            label,
            workload,
            clients,
            metrics: metrics.to_vec(),
        }
    }
}

/// The trials of one group, by client, in the order they ran.
pub struct Runs {
    group: Group,
    trials: BTreeMap<Client, Vec<TrialResult>>,
}

impl Runs {
    pub fn push(&mut self, client: Client, result: TrialResult) {
        self.trials.entry(client).or_default().push(result);
    }

    /// The median of `metric` over the client's successful trials.
    fn median(&self, client: Client, metric: &str) -> Option<f64> {
        let values: Vec<f64> = self
            .trials
            .get(&client)?
            .iter()
            .filter(|trial| trial.error.is_none())
            .filter_map(|trial| trial.metrics.get(metric).copied())
            .collect();
        median(&values)
    }

    /// The first error of the client's trials when none succeeded.
    fn error(&self, client: Client) -> Option<&str> {
        let trials = self.trials.get(&client)?;
        if trials.iter().any(|trial| trial.error.is_none()) {
            return None;
        }
        trials.iter().find_map(|trial| trial.error.as_deref())
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Better {
    Lower,
    Higher,
    Neither,
}

/// The group of the OpenTelemetry comparison (`--only seq-otel`).
pub const OTEL_GROUP: &str = "seq-otel";

fn metric_info(metric: &str) -> (&'static str, Better) {
    match metric {
        "p50_us" => ("p50 µs", Better::Lower),
        "p99_us" => ("p99 µs", Better::Lower),
        "calls_per_s" => ("calls/s", Better::Higher),
        "cpu_us_per_call" => ("client CPU µs/call", Better::Lower),
        "ready_ms" => ("wall ms until all ready", Better::Lower),
        "per_attachment_kib" => ("client KiB per attachment (RSS)", Better::Lower),
        "per_attachment_settled_kib" => {
            ("client KiB per attachment (RSS, 2 s later)", Better::Lower)
        }
        "anon_per_attachment_settled_kib" => (
            "client KiB per attachment (RSS without file pages, 2 s later)",
            Better::Lower,
        ),
        "heap_per_attachment_kib" => ("client KiB per attachment (heap)", Better::Lower),
        "switches_per_call" => ("client context switches/call", Better::Lower),
        "peak_kib" => ("client peak RSS KiB", Better::Lower),
        "ok" => ("calls ok", Better::Neither),
        "failed" => ("calls failed (typed error)", Better::Neither),
        "lost" => ("calls lost", Better::Lower),
        "commit_p50_ms" => ("disable/enable commit p50 ms", Better::Lower),
        "commit_p99_ms" => ("disable/enable commit p99 ms", Better::Lower),
        "cycles" => ("disable+enable cycles", Better::Neither),
        "cpu_ms" => ("client CPU ms until all ready", Better::Lower),
        "commits" => ("snapshot commits", Better::Neither),
        "disable_p50_ms" => ("disable commit p50 ms", Better::Lower),
        "enable_p50_ms" => ("enable commit p50 ms", Better::Lower),
        "spans_dropped" => (
            "spans dropped (never reached the collector)",
            Better::Neither,
        ),
        _ => ("?", Better::Neither),
    }
}

fn number(value: f64) -> String {
    let digits = if value.abs() >= 100.0 || value == value.trunc() {
        0
    } else if value.abs() >= 10.0 {
        1
    } else {
        2
    };
    let text = format!("{value:.digits$}");
    // Thousands separators for the integer part.
    let (int, frac) = text
        .split_once('.')
        .map_or((text.as_str(), None), |(i, f)| (i, Some(f)));
    let (sign, int) = int.strip_prefix('-').map_or(("", int), |rest| ("-", rest));
    let mut grouped = String::new();
    for (i, ch) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(ch);
    }
    match frac {
        Some(frac) => format!("{sign}{grouped}.{frac}"),
        None => format!("{sign}{grouped}"),
    }
}

/// One line of progress for a trial.
pub fn summary(group: &Group, result: &TrialResult) -> String {
    if let Some(error) = &result.error {
        return format!("error: {error}");
    }
    let mut line = group
        .metrics
        .iter()
        .filter_map(|m| {
            result
                .metrics
                .get(*m)
                .map(|v| format!("{m}={}", number(*v)))
        })
        .collect::<Vec<_>>()
        .join(" ");
    if !result.revisions.is_empty() {
        let _ = write!(line, " [{}]", result.revisions.join(","));
    }
    for note in &result.notes {
        let _ = write!(line, "; {note}");
    }
    line
}

/// A target of issue 5 and whether this run met it (`None`: not measured in this run).
struct Target {
    id: &'static str,
    text: String,
    figure: String,
    met: Option<bool>,
}

pub struct Report {
    quick: bool,
    reps: usize,
    skipped: Vec<String>,
    runs: Vec<Runs>,
}

impl Report {
    pub fn new(quick: bool, reps: usize, skipped: Vec<String>) -> Report {
        Report {
            quick,
            reps,
            skipped,
            runs: Vec::new(),
        }
    }

    pub fn begin(&self, group: &Group) -> Runs {
        Runs {
            group: group.clone(),
            trials: BTreeMap::new(),
        }
    }

    pub fn finish(&mut self, runs: Runs) {
        self.runs.push(runs);
    }

    fn runs(&self, id: &str) -> Option<&Runs> {
        self.runs.iter().find(|runs| runs.group.id == id)
    }

    /// The revisions every client negotiated, over the whole run.
    fn revisions(&self) -> BTreeMap<Client, Vec<String>> {
        let mut all: BTreeMap<Client, Vec<String>> = BTreeMap::new();
        for runs in &self.runs {
            for (client, trials) in &runs.trials {
                for trial in trials {
                    let seen = all.entry(*client).or_default();
                    for revision in &trial.revisions {
                        if !seen.contains(revision) {
                            seen.push(revision.clone());
                        }
                    }
                }
            }
        }
        all
    }

    fn ts_versions(&self) -> Option<String> {
        self.runs
            .iter()
            .flat_map(|runs| runs.trials.get(&Client::Ts))
            .flatten()
            .flat_map(|trial| &trial.notes)
            .find(|note| note.starts_with("node "))
            .cloned()
    }

    fn cell(&self, runs: &Runs, client: Client, metric: &str) -> String {
        if !runs.group.clients.contains(&client) {
            return String::new();
        }
        if let Some(error) = runs.error(client) {
            return if error.starts_with("pending") {
                "pending".into()
            } else {
                "error".into()
            };
        }
        let Some(value) = runs.median(client, metric) else {
            return "–".into();
        };
        let mut cell = number(value);
        let (_, better) = metric_info(metric);
        if client != Client::Rmcp
            && better != Better::Neither
            && let Some(base) = runs.median(Client::Rmcp, metric)
            && base > 0.0
        {
            let _ = write!(cell, " ({:.2}×)", value / base);
        }
        cell
    }

    /// The markdown table, the targets and the notes.
    pub fn table(&self, elapsed: Duration) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "\n## plurnk-mcp load benchmark ({} sizes, median of {} alternated run{}, {:.0} s)\n",
            if self.quick { "quick" } else { "default" },
            self.reps,
            if self.reps == 1 { "" } else { "s" },
            elapsed.as_secs_f64()
        );
        let _ = writeln!(
            out,
            "Each figure is followed by its ratio to raw rmcp (figure ÷ rmcp). Memory is the client \
             process's own (VmRSS delta after all ready ÷ servers; heap = glibc in-use bytes \
             delta ÷ servers; peak = VmHWM).\n"
        );
        if cfg!(debug_assertions) {
            let _ = writeln!(
                out,
                "**Debug build: these figures say nothing about speed; run with --release.**\n"
            );
        }
        if self.quick {
            let _ = writeln!(
                out,
                "Quick sizes: a smoke run. The targets below are only meaningful at the default \
                 sizes.\n"
            );
        }
        let _ = writeln!(out, "| workload | metric | host | rmcp | ts | bare |");
        let _ = writeln!(out, "|---|---|---:|---:|---:|---:|");
        // The OpenTelemetry comparison is the host beside itself: a table of its own.
        for runs in self.runs.iter().filter(|runs| runs.group.id != OTEL_GROUP) {
            for (i, metric) in runs.group.metrics.iter().enumerate() {
                let label = if i == 0 {
                    runs.group.label.as_str()
                } else {
                    ""
                };
                let (name, _) = metric_info(metric);
                let cells: Vec<String> = Client::ALL
                    .iter()
                    .map(|client| self.cell(runs, *client, metric))
                    .collect();
                let _ = writeln!(out, "| {label} | {name} | {} |", cells.join(" | "));
            }
        }
        let _ = writeln!(out, "\nNegotiated revisions:");
        for (client, revisions) in self.revisions() {
            let _ = writeln!(out, "- {}: {}", client.name(), revisions.join(", "));
        }
        if let Some(versions) = self.ts_versions() {
            let _ = writeln!(out, "- ts peer: {versions}");
        }
        let _ = writeln!(out, "\nTargets of issue 5 (this run):");
        for target in self.targets() {
            let mark = match target.met {
                Some(true) => "met",
                Some(false) => "NOT met",
                None => "not measured",
            };
            let _ = writeln!(out, "- [{mark}] {}: {}", target.text, target.figure);
        }
        let _ = writeln!(out, "\nTargets of issue 10 (this run):");
        for target in self.call_path_targets() {
            let mark = match target.met {
                Some(true) => "met",
                Some(false) => "NOT met",
                None => "not measured",
            };
            let _ = writeln!(out, "- [{mark}] {}: {}", target.text, target.figure);
        }
        out.push_str(&self.growth_table());
        let _ = writeln!(out, "\nTargets of issue 34 (this run):");
        for target in self.scale_targets() {
            let mark = match target.met {
                Some(true) => "met",
                Some(false) => "NOT met",
                None => "not measured",
            };
            let _ = writeln!(out, "- [{mark}] {}: {}", target.text, target.figure);
        }
        out.push_str(&self.otel_table());
        let mut notes = Vec::new();
        for runs in &self.runs {
            for (client, trials) in &runs.trials {
                // Failure counts are summed over the repetitions, by kind.
                let mut failures: BTreeMap<&str, u64> = BTreeMap::new();
                for trial in trials {
                    if let Some(error) = &trial.error {
                        notes.push(format!("{} {}: {error}", runs.group.id, client.name()));
                    }
                    for note in &trial.notes {
                        if let Some((count, kind)) = note
                            .split_once(" call(s) failed: ")
                            .and_then(|(count, kind)| Some((count.parse::<u64>().ok()?, kind)))
                        {
                            *failures.entry(kind).or_default() += count;
                        } else if !note.starts_with("node ")
                            && note != "pending"
                            && !note.starts_with("per-attachment memory includes")
                        {
                            notes.push(format!("{} {}: {note}", runs.group.id, client.name()));
                        }
                    }
                }
                if !failures.is_empty() {
                    let kinds: Vec<String> = failures
                        .iter()
                        .map(|(kind, count)| format!("{} {kind}", number(*count as f64)))
                        .collect();
                    notes.push(format!(
                        "{} {}: failed calls over {} run(s) by kind: {}",
                        runs.group.id,
                        client.name(),
                        trials.len(),
                        kinds.join(", ")
                    ));
                }
            }
        }
        notes.extend(self.skipped.iter().cloned());
        notes.dedup();
        if !notes.is_empty() {
            let _ = writeln!(out, "\nNotes:");
            for note in notes {
                let _ = writeln!(out, "- {note}");
            }
        }
        out
    }

    /// The host with OpenTelemetry export off, on to a live receiver and on to a collector
    /// that is down, side by side in one run, with the target of the export's cost.
    fn otel_table(&self) -> String {
        use Client::{Host, HostOtel, HostOtelDown};
        let Some(runs) = self.runs(OTEL_GROUP) else {
            return String::new();
        };
        let mut out = String::new();
        let _ = writeln!(
            out,
            "\n{}: the host with OpenTelemetry export off, on to a live OTLP receiver, and on \
             to a collector that is down (ratios to export off)\n",
            runs.group.label
        );
        let _ = writeln!(
            out,
            "| metric | export off | export on (live receiver) | export on (collector down) |"
        );
        let _ = writeln!(out, "|---|---:|---:|---:|");
        for metric in &runs.group.metrics {
            let off = runs.median(Host, metric);
            let cell = |client: Client| match (runs.median(client, metric), off) {
                (Some(value), Some(base)) if client != Host && base > 0.0 => {
                    format!("{} ({:.2}×)", number(value), value / base)
                }
                (Some(value), _) => number(value),
                (None, _) => runs.error(client).map_or("–".into(), |_| "error".into()),
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} |",
                metric_info(metric).0,
                cell(Host),
                cell(HostOtel),
                cell(HostOtelDown)
            );
        }
        let _ = writeln!(out, "\nTargets of the OpenTelemetry export (this run):");
        let checks = [
            (
                "p50_us",
                HostOtel,
                "export on (live): sequential p50 ≤ 1.10× export off",
            ),
            (
                "cpu_us_per_call",
                HostOtel,
                "export on (live): client CPU per call ≤ 1.10× export off",
            ),
            (
                "p50_us",
                HostOtelDown,
                "collector down: sequential p50 ≤ 1.10× export off",
            ),
        ];
        for (metric, client, text) in checks {
            let ratio = self.ratio(OTEL_GROUP, metric, client, Host);
            let mark = match ratio.map(|ratio| ratio <= 1.10) {
                Some(true) => "met",
                Some(false) => "NOT met",
                None => "not measured",
            };
            let figure = ratio.map_or("–".into(), |ratio| format!("{ratio:.2}×"));
            let _ = writeln!(out, "- [{mark}] {text}: {figure}");
        }
        out
    }

    fn ratio(&self, id: &str, metric: &str, top: Client, bottom: Client) -> Option<f64> {
        let runs = self.runs(id)?;
        let top = runs.median(top, metric)?;
        let bottom = runs.median(bottom, metric)?;
        (bottom > 0.0).then(|| top / bottom)
    }

    fn targets(&self) -> Vec<Target> {
        let mut targets = Vec::new();
        let mut ratio_target =
            |id, text: &str, group: &str, metric: &str, top, bottom, ok: &dyn Fn(f64) -> bool| {
                let ratio = self.ratio(group, metric, top, bottom);
                targets.push(Target {
                    id,
                    text: text.to_owned(),
                    figure: ratio.map_or("–".into(), |r| format!("{r:.2}×")),
                    met: ratio.map(ok),
                });
            };
        use Client::{Bare, Host, Rmcp, Ts};
        ratio_target(
            "seq-p50",
            "sequential p50 ≤ 1.15× raw rmcp",
            "seq",
            "p50_us",
            Host,
            Rmcp,
            &|r| r <= 1.15,
        );
        ratio_target(
            "seq-p99",
            "sequential p99 ≤ 1.5× raw rmcp",
            "seq",
            "p99_us",
            Host,
            Rmcp,
            &|r| r <= 1.5,
        );
        ratio_target(
            "conc-rmcp",
            "64 in flight on one server ≥ 1.0× raw rmcp (calls/s)",
            "conc",
            "calls_per_s",
            Host,
            Rmcp,
            &|r| r >= 1.0,
        );
        ratio_target(
            "conc-bare",
            "aim: 64 in flight ≥ 0.9× the bare loop (calls/s)",
            "conc",
            "calls_per_s",
            Host,
            Bare,
            &|r| r >= 0.9,
        );
        let mid = self
            .runs
            .iter()
            .filter(|runs| {
                runs.group.id.starts_with("hydrate-") && !runs.group.id.ends_with("inplace")
            })
            .map(|runs| runs.group.id.clone())
            .find(|id| id == "hydrate-200")
            .or_else(|| {
                self.runs
                    .iter()
                    .map(|runs| runs.group.id.clone())
                    .find(|id| id.starts_with("hydrate-"))
            })
            .unwrap_or_default();
        let size = mid.strip_prefix("hydrate-").unwrap_or("200").to_owned();
        let issue = if size == "200" {
            ""
        } else {
            " (issue: at 200)"
        };
        ratio_target(
            "hydrate-rmcp",
            &format!("{size} stdio servers ready ≤ 1.25× raw rmcp{issue}"),
            &mid,
            "ready_ms",
            Host,
            Rmcp,
            &|r| r <= 1.25,
        );
        ratio_target(
            "hydrate-ts",
            &format!("{size} stdio servers ready ≥ 3× faster than the TS client{issue}"),
            &mid,
            "ready_ms",
            Ts,
            Host,
            &|r| r >= 3.0,
        );
        let largest = self
            .runs
            .iter()
            .filter_map(|runs| match runs.group.workload {
                Workload::Hydrate {
                    servers,
                    ts_mode: None,
                } => Some((servers, runs)),
                _ => None,
            })
            .max_by_key(|(servers, _)| *servers);
        if let Some((servers, runs)) = largest {
            let ready = runs.median(Host, "ready");
            targets.push(Target {
                id: "hydrate-1000",
                text: "1,000 stdio servers hydrate on this machine".into(),
                figure: format!(
                    "{} of {servers} ready in {} ms",
                    ready.map_or("–".into(), number),
                    runs.median(Host, "ready_ms").map_or("–".into(), number)
                ),
                met: ready
                    .filter(|_| servers >= 1_000)
                    .map(|ready| ready as usize == servers),
            });
        }
        if let Some(runs) = self.runs(&mid) {
            let kib = runs.median(Host, "per_attachment_kib");
            targets.push(Target {
                id: "memory",
                text: format!("≤ 64 KiB host memory per idle attachment (at {size} servers)"),
                figure: kib.map_or("–".into(), |k| format!("{} KiB", number(k))),
                met: kib.map(|k| k <= 64.0),
            });
        }
        if let Some(runs) = self.runs("inproc-10000") {
            let ready = runs.median(Host, "ready");
            let servers = match runs.group.workload {
                Workload::InProcess { servers } => servers,
                _ => 0,
            };
            targets.push(Target {
                id: "inproc",
                text: "10,000 in-process attachments in one host".into(),
                figure: match ready {
                    Some(ready) => format!("{} of {servers} ready", number(ready)),
                    None => "pending: the host has no in-process attachment yet".into(),
                },
                met: ready
                    .filter(|_| servers >= 10_000)
                    .map(|ready| ready as usize == servers),
            });
        }
        if let Some(runs) = self.runs("churn") {
            let trials: Vec<&TrialResult> = runs
                .trials
                .get(&Host)
                .map(|t| t.iter().filter(|t| t.error.is_none()).collect())
                .unwrap_or_default();
            let n = match runs.group.workload {
                Workload::Churn { n, .. } => n as f64,
                _ => 0.0,
            };
            let lost: f64 = trials.iter().filter_map(|t| t.metrics.get("lost")).sum();
            let settled = trials.iter().all(|t| {
                t.metrics.get("ok").unwrap_or(&0.0) + t.metrics.get("failed").unwrap_or(&0.0) == n
            });
            targets.push(Target {
                id: "churn",
                text: "churn: 0 lost calls (every call settles with a result or a typed error)"
                    .into(),
                figure: format!("{} lost over {} run(s)", number(lost), trials.len()),
                met: (!trials.is_empty()).then_some(lost == 0.0 && settled),
            });
        }
        targets
    }

    /// Issue 10's targets: the call path against raw rmcp, and the host's own heap per
    /// attachment over raw rmcp's.
    fn call_path_targets(&self) -> Vec<Target> {
        use Client::{Host, Rmcp};
        let mut targets = Vec::new();
        for (id, text, group, metric, limit, at_most) in [
            (
                "seq-p50",
                "sequential p50 ≤ 1.10× raw rmcp",
                "seq",
                "p50_us",
                1.10,
                true,
            ),
            (
                "seq-p99",
                "sequential p99 ≤ 1.25× raw rmcp",
                "seq",
                "p99_us",
                1.25,
                true,
            ),
            (
                "seq-cpu",
                "client CPU per call ≤ 1.2× raw rmcp",
                "seq",
                "cpu_us_per_call",
                1.2,
                true,
            ),
            (
                "conc",
                "64 in flight on one server ≥ 1.0× raw rmcp (calls/s)",
                "conc",
                "calls_per_s",
                1.0,
                false,
            ),
            (
                "spread",
                "64 in flight over 8 servers ≥ 0.95× raw rmcp (calls/s)",
                "spread",
                "calls_per_s",
                0.95,
                false,
            ),
        ] {
            let ratio = self.ratio(group, metric, Host, Rmcp);
            targets.push(Target {
                id,
                text: text.to_owned(),
                figure: ratio.map_or("–".into(), |r| format!("{r:.2}×")),
                met: ratio.map(|r| if at_most { r <= limit } else { r >= limit }),
            });
        }
        for (id, servers) in [("heap-200", 200), ("heap-1000", 1_000)] {
            let over = self.runs(&format!("hydrate-{servers}")).and_then(|runs| {
                Some(
                    runs.median(Host, "heap_per_attachment_kib")?
                        - runs.median(Rmcp, "heap_per_attachment_kib")?,
                )
            });
            targets.push(Target {
                id,
                text: format!(
                    "host heap per attachment ≤ 16 KiB over raw rmcp's, at {servers} stdio servers"
                ),
                figure: over.map_or("–".into(), |kib| format!("{kib:.1} KiB over")),
                met: over.map(|kib| kib <= 16.0),
            });
        }
        targets
    }

    /// The in-process hydrations by size, smallest first.
    fn in_process_runs(&self) -> Vec<(usize, &Runs)> {
        let mut runs: Vec<(usize, &Runs)> = self
            .runs
            .iter()
            .filter_map(|runs| match runs.group.workload {
                Workload::InProcess { servers } => Some((servers, runs)),
                _ => None,
            })
            .collect();
        runs.sort_by_key(|(servers, _)| *servers);
        runs
    }

    /// Per client and in-process size: the time until all ready, its growth over the size
    /// before (linear growth is the ratio of the sizes), and memory per attachment.
    fn growth(&self) -> Vec<Value> {
        let sizes = self.in_process_runs();
        let mut rows = Vec::new();
        for client in [Client::Host, Client::Rmcp, Client::Bare] {
            let mut previous: Option<(usize, f64)> = None;
            for (servers, runs) in &sizes {
                let Some(ready_ms) = runs.median(client, "ready_ms") else {
                    continue;
                };
                rows.push(json!({
                    "client": client.name(),
                    "servers": servers,
                    "ready_ms": ready_ms,
                    "cpu_ms": runs.median(client, "cpu_ms"),
                    "growth": previous.map(|(_, before)| ready_ms / before),
                    "size_growth": previous.map(|(size, _)| *servers as f64 / size as f64),
                    "per_attachment_kib": runs.median(client, "per_attachment_kib"),
                    "heap_per_attachment_kib": runs.median(client, "heap_per_attachment_kib"),
                }));
                previous = Some((*servers, ready_ms));
            }
        }
        rows
    }

    /// The growth rows as a table (none when no in-process size ran twice).
    fn growth_table(&self) -> String {
        let rows = self.growth();
        if rows.len() < 2 {
            return String::new();
        }
        let mut out = String::from(
            "\nIn-process hydration, from one size to the next (linear: the time grows as the size):\n\n\
             | client | servers | ms until all ready | × the size before (size ×) | CPU ms | KiB per attachment (RSS) | KiB per attachment (heap) |\n\
             |---|---:|---:|---:|---:|---:|---:|\n",
        );
        let cell = |value: &Value| value.as_f64().map_or("–".to_owned(), number);
        for row in rows {
            let growth = match (row["growth"].as_f64(), row["size_growth"].as_f64()) {
                (Some(growth), Some(size)) => format!("{growth:.2}× ({size:.0}×)"),
                _ => "–".to_owned(),
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {growth} | {} | {} | {} |",
                row["client"].as_str().unwrap_or_default(),
                cell(&row["servers"]),
                cell(&row["ready_ms"]),
                cell(&row["cpu_ms"]),
                cell(&row["per_attachment_kib"]),
                cell(&row["heap_per_attachment_kib"]),
            );
        }
        out
    }

    /// Issue 34's targets: the in-process hydration at every size against raw rmcp and
    /// against its own smallest size, memory per attachment over raw rmcp's, and a toggle in
    /// a large workspace against one in a small workspace.
    fn scale_targets(&self) -> Vec<Target> {
        use Client::{Host, Rmcp};
        let mut targets = Vec::new();
        let sizes = self.in_process_runs();
        for (servers, runs) in &sizes {
            let ratio = runs
                .median(Host, "ready_ms")
                .zip(runs.median(Rmcp, "ready_ms"))
                .map(|(host, rmcp)| host / rmcp);
            targets.push(Target {
                id: "inproc-ratio",
                text: format!("{servers} in-process servers ready ≤ 1.25× raw rmcp"),
                figure: ratio.map_or("–".into(), |r| format!("{r:.2}×")),
                met: ratio.map(|r| r <= 1.25),
            });
        }
        let at = |size: usize| {
            sizes
                .iter()
                .find(|(servers, _)| *servers == size)
                .and_then(|(_, runs)| runs.median(Host, "ready_ms"))
        };
        let growth = at(100_000)
            .zip(at(10_000))
            .map(|(large, small)| large / small);
        targets.push(Target {
            id: "inproc-growth",
            text: "100,000 in-process servers ready in ≤ 12× the time of 10,000 (--large)".into(),
            figure: growth.map_or("–".into(), |g| format!("{g:.2}×")),
            met: growth.map(|g| g <= 12.0),
        });
        // RSS as top shows it once the burst is over (the host gives back what its
        // attempts freed; raw rmcp keeps it), beside the figure at 200 ms in the table.
        let over = |id: &str| {
            let runs = self.runs(id)?;
            Some(
                runs.median(Host, "per_attachment_settled_kib")?
                    - runs.median(Rmcp, "per_attachment_settled_kib")?,
            )
        };
        let largest = sizes.last().map(|(servers, _)| format!("inproc-{servers}"));
        for id in largest
            .into_iter()
            .chain(["hydrate-200".to_owned(), "hydrate-1000".to_owned()])
        {
            let kib = over(&id);
            targets.push(Target {
                id: "rss-over-rmcp",
                text: format!(
                    "host RSS per attachment ≤ raw rmcp's + 16 KiB, 2 s after all ready ({id})"
                ),
                figure: kib.map_or("–".into(), |k| format!("{k:+.1} KiB")),
                met: kib.map(|k| k <= 16.0),
            });
        }
        let mut toggles: Vec<(usize, f64)> = self
            .runs
            .iter()
            .filter_map(|runs| match runs.group.workload {
                Workload::Toggle { servers, .. } => {
                    Some((servers, runs.median(Host, "commit_p50_ms")?))
                }
                _ => None,
            })
            .collect();
        toggles.sort_by_key(|(servers, _)| *servers);
        if let (Some((small, small_ms)), Some((large, large_ms))) =
            (toggles.first().copied(), toggles.last().copied())
            && large > small
        {
            let ratio = large_ms / small_ms;
            targets.push(Target {
                id: "toggle",
                text: format!(
                    "a toggle in a {large}-server workspace commits within 2× one in a \
                     {small}-server workspace (p50)"
                ),
                figure: format!(
                    "{ratio:.2}× ({} ms against {} ms)",
                    number(large_ms),
                    number(small_ms)
                ),
                met: Some(ratio <= 2.0),
            });
        }
        targets
    }

    pub fn json(&self, elapsed: Duration) -> Value {
        let workloads: Vec<Value> = self
            .runs
            .iter()
            .map(|runs| {
                let clients: serde_json::Map<String, Value> = runs
                    .trials
                    .iter()
                    .map(|(client, trials)| {
                        let mut medians = serde_json::Map::new();
                        let mut ratios = serde_json::Map::new();
                        let names: std::collections::BTreeSet<&String> =
                            trials.iter().flat_map(|t| t.metrics.keys()).collect();
                        for name in names {
                            if let Some(value) = runs.median(*client, name) {
                                medians.insert(name.clone(), json!(value));
                                if let Some(base) = runs.median(Client::Rmcp, name)
                                    && base > 0.0
                                {
                                    ratios.insert(name.clone(), json!(value / base));
                                }
                            }
                        }
                        (
                            client.name().to_owned(),
                            json!({
                                "median": medians,
                                "ratio_to_rmcp": ratios,
                                "error": runs.error(*client),
                                "runs": trials,
                            }),
                        )
                    })
                    .collect();
                json!({
                    "id": runs.group.id,
                    "label": runs.group.label,
                    "workload": runs.group.workload,
                    "metrics": runs.group.metrics,
                    "clients": clients,
                })
            })
            .collect();
        let targets: Vec<Value> = self
            .targets()
            .into_iter()
            .map(|t| json!({ "id": t.id, "target": t.text, "figure": t.figure, "met": t.met }))
            .collect();
        let call_path_targets: Vec<Value> = self
            .call_path_targets()
            .into_iter()
            .map(|t| json!({ "id": t.id, "target": t.text, "figure": t.figure, "met": t.met }))
            .collect();
        let scale_targets: Vec<Value> = self
            .scale_targets()
            .into_iter()
            .map(|t| json!({ "id": t.id, "target": t.text, "figure": t.figure, "met": t.met }))
            .collect();
        let revisions: serde_json::Map<String, Value> = self
            .revisions()
            .into_iter()
            .map(|(client, revisions)| (client.name().to_owned(), json!(revisions)))
            .collect();
        json!({
            "benchmark": "plurnk-mcp examples/load",
            "mode": if self.quick { "quick" } else { "default" },
            "build": if cfg!(debug_assertions) { "debug" } else { "release" },
            "reps": self.reps,
            "elapsed_s": elapsed.as_secs_f64(),
            "unix_time": std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            "machine": machine(),
            "commit": commit(),
            "ts_peer": self.ts_versions(),
            "revisions": revisions,
            "skipped": self.skipped,
            "workloads": workloads,
            "targets": targets,
            "targets_issue_10": call_path_targets,
            "targets_issue_34": scale_targets,
            "growth": self.growth(),
        })
    }
}

/// The repository's HEAD commit, when git can tell (read-only).
fn commit() -> Option<String> {
    let output = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(crate::ROOT)
        .output()
        .ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// CPU count and model, memory and kernel of this machine.
fn machine() -> Value {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|line| line.strip_prefix("model name"))
        .and_then(|rest| rest.split_once(':'))
        .map(|(_, model)| model.trim().to_owned());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_kib = meminfo
        .lines()
        .find_map(|line| line.strip_prefix("MemTotal:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse::<u64>().ok());
    json!({
        "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "cpu_model": model,
        "mem_kib": mem_kib,
        "kernel": std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_owned())
            .ok(),
    })
}
