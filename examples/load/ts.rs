//! The official TypeScript client, in a Node 22 process running bench/ts-client.cjs; this
//! side speaks its line protocol (one JSON command per line, one JSON answer per line).

use std::process::Stdio;

use anyhow::{Context as _, anyhow, bail};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

use crate::spec::TrialSpec;

pub struct TsDriver {
    child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
    /// "node v22… / @modelcontextprotocol/client 2.4.0".
    pub versions: String,
}

impl TsDriver {
    pub async fn start(spec: &TrialSpec) -> anyhow::Result<TsDriver> {
        if !spec.node.is_file() {
            bail!(
                "Node 22 not found at {} (run scripts/bench.sh, which installs it)",
                spec.node.display()
            );
        }
        if !spec
            .ts_dir
            .join("node_modules/@modelcontextprotocol/client/package.json")
            .is_file()
        {
            bail!(
                "@modelcontextprotocol/client not installed under {} (run scripts/bench.sh)",
                spec.ts_dir.display()
            );
        }
        let mut child = tokio::process::Command::new(&spec.node)
            .arg(&spec.ts_driver)
            .arg(&spec.ts_dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("spawn {}", spec.node.display()))?;
        let stdin = child.stdin.take().context("no stdin")?;
        let stdout = BufReader::new(child.stdout.take().context("no stdout")?).lines();
        let mut driver = TsDriver {
            child,
            stdin,
            stdout,
            versions: String::new(),
        };
        let hello = driver.command(json!({ "op": "hello" })).await?;
        driver.versions = format!(
            "node {} / @modelcontextprotocol/client {}",
            hello["node"].as_str().unwrap_or("?"),
            hello["client"].as_str().unwrap_or("?")
        );
        Ok(driver)
    }

    /// Sends one command and returns its answer (an error for `ok: false`).
    pub async fn command(&mut self, command: Value) -> anyhow::Result<Value> {
        let mut line = command.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).await?;
        self.stdin.flush().await?;
        let answer = self
            .stdout
            .next_line()
            .await?
            .ok_or_else(|| anyhow!("the Node driver exited"))?;
        let answer: Value = serde_json::from_str(&answer)
            .with_context(|| format!("bad answer from the Node driver: {answer}"))?;
        if answer["ok"] != Value::Bool(true) {
            bail!(
                "the Node driver failed: {}",
                answer["error"].as_str().unwrap_or("?")
            );
        }
        Ok(answer)
    }

    /// Closes every client, then the driver.
    pub async fn close(mut self) -> anyhow::Result<f64> {
        let answer = self.command(json!({ "op": "close" })).await?;
        let _ = self.child.wait().await;
        Ok(answer["ms"].as_f64().unwrap_or(0.0))
    }
}
