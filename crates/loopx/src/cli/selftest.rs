//! `loopx selftest`: exercise the whole ledger offline, in a temporary
//! directory, through the same command parser and handlers users run.

use super::{dispatch, Cli, Reply};
use anyhow::{Context as _, Result};
use clap::Parser as _;
use serde_json::{json, Value};

struct Run {
    dir: String,
    registry: String,
    results: Vec<(String, Result<(), String>)>,
}

impl Run {
    /// Run `loopx <words>`; `Ok` is the reply, `Err` the refusal text.
    fn loopx(&self, words: &[&str]) -> Result<Reply, String> {
        let mut argv = vec!["loopx"];
        argv.extend_from_slice(words);
        let cli = Cli::try_parse_from(argv).map_err(|e| e.to_string())?;
        dispatch(cli.command, cli.json, cli.store.as_deref()).map_err(|e| super::describe(&e))
    }

    fn check(&mut self, name: &str, outcome: Result<(), String>) {
        self.results.push((name.to_owned(), outcome));
    }

    fn expect_ok(&mut self, name: &str, words: &[&str], test: impl Fn(&Value) -> bool) {
        let outcome = match self.loopx(words) {
            Ok(reply) if reply.code == 0 && test(&reply.json) => Ok(()),
            Ok(reply) => Err(format!("unexpected reply {}", reply.json)),
            Err(error) => Err(error),
        };
        self.check(name, outcome);
    }

    fn expect_refused(&mut self, name: &str, words: &[&str], needle: &str) {
        let outcome = match self.loopx(words) {
            Err(error) if error.contains(needle) => Ok(()),
            Err(error) => Err(format!("refused for the wrong reason: {error}")),
            Ok(reply) => Err(format!("accepted: {}", reply.json)),
        };
        self.check(name, outcome);
    }
}

pub fn run() -> Result<Reply> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_nanos();
    let base =
        std::env::temp_dir().join(format!("loopx-selftest-{}-{nanos:x}", std::process::id()));
    std::fs::create_dir_all(&base).context("cannot create the selftest directory")?;
    let mut run = Run {
        dir: base.join("loop").display().to_string(),
        registry: base.join("registry").display().to_string(),
        results: Vec::new(),
    };
    let outcome = exercise(&mut run);
    let _ = std::fs::remove_dir_all(&base);
    outcome?;
    let failed: Vec<_> = run.results.iter().filter(|(_, r)| r.is_err()).collect();
    let mut text = String::new();
    for (name, result) in &run.results {
        match result {
            Ok(()) => text.push_str(&format!("ok    {name}\n")),
            Err(why) => text.push_str(&format!("FAIL  {name}: {why}\n")),
        }
    }
    let passed = run.results.len() - failed.len();
    text.push_str(&format!(
        "selftest: {passed} passed, {} failed\n",
        failed.len()
    ));
    let json = json!({
        "status": if failed.is_empty() { "ok" } else { "failed" },
        "action": "selftest",
        "smoke_mode": "offline",
        "network_required": false,
        "provider_cli_attempted": false,
        "checks": run.results.iter().map(|(name, r)| json!({"name": name, "ok": r.is_ok(), "error": r.as_ref().err()})).collect::<Vec<_>>(),
        "passed": passed,
        "failed": failed.len(),
    });
    Ok(Reply {
        json,
        text,
        code: if failed.is_empty() { 0 } else { 1 },
        report: false,
    })
}

fn exercise(run: &mut Run) -> Result<()> {
    let dir = run.dir.clone();
    let registry = run.registry.clone();
    let d = dir.as_str();
    run.expect_ok(
        "init creates a loop",
        &[
            "init",
            "--dir",
            d,
            "--goal",
            "offline smoke test",
            "--success-criteria",
            "ledger validates",
            "--max-iterations",
            "3",
            "--operation-id",
            "selftest-init",
        ],
        |j| {
            j["run_id"]
                .as_str()
                .is_some_and(|id| id.starts_with("run-"))
        },
    );
    run.expect_refused(
        "a second init is refused",
        &[
            "init",
            "--dir",
            d,
            "--goal",
            "other",
            "--success-criteria",
            "x",
        ],
        "never overwrites a ledger",
    );
    let append = [
        "append-iteration",
        "--dir",
        d,
        "--mode",
        "bounded-research",
        "--objective",
        "check the ledger",
        "--decision",
        "continue",
        "--operation-id",
        "selftest-1",
    ];
    run.expect_ok("append-iteration records iteration 1", &append, |j| {
        j["iteration"] == 1 && j["replayed"] == false
    });
    run.expect_ok("an exact replay writes nothing", &append, |j| {
        j["iteration"] == 1 && j["replayed"] == true
    });
    run.expect_refused(
        "a conflicting reuse of an operation id is refused",
        &[
            "append-iteration",
            "--dir",
            d,
            "--mode",
            "monitor",
            "--objective",
            "different",
            "--decision",
            "continue",
            "--operation-id",
            "selftest-1",
        ],
        "already used for a different request",
    );
    run.expect_refused(
        "an early stop without proof is refused",
        &[
            "append-iteration",
            "--dir",
            d,
            "--mode",
            "bounded-research",
            "--objective",
            "claim success",
            "--decision",
            "stop",
            "--stop-reason",
            "success",
        ],
        "requires at least one proof artifact",
    );
    run.expect_refused(
        "an early blocked is refused",
        &[
            "append-iteration",
            "--dir",
            d,
            "--mode",
            "bounded-research",
            "--objective",
            "give up",
            "--decision",
            "blocked",
        ],
        "early blocked",
    );
    std::fs::create_dir_all(format!("{d}/proofs"))?;
    std::fs::write(format!("{d}/proofs/offline_smoke.proof"), "checked\n")?;
    let artifact = json!({
        "schema_version": "1.0", "id": "offline-smoke-evidence", "artifact_type": "python-verifier",
        "machine_checkable": true, "target": "offline smoke test", "proof_path": "proofs/offline_smoke.proof",
        "checker": {"name": "offline-smoke", "status": "passed"}
    });
    std::fs::write(
        format!("{d}/proof_artifacts/offline-smoke-evidence.json"),
        artifact.to_string(),
    )?;
    run.expect_ok(
        "an early stop with a passing proof artifact is banked",
        &[
            "append-iteration",
            "--dir",
            d,
            "--mode",
            "bounded-research",
            "--objective",
            "bank the proof",
            "--decision",
            "stop",
            "--stop-reason",
            "success",
            "--evidence-id",
            "offline-smoke-evidence",
        ],
        |j| j["status"] == "ok" && j["iteration"] == 2,
    );
    run.expect_refused(
        "nothing is appended after a terminal decision",
        &[
            "append-iteration",
            "--dir",
            d,
            "--mode",
            "bounded-research",
            "--objective",
            "more",
            "--decision",
            "continue",
        ],
        "after loop status is stopped",
    );
    run.expect_ok("validate passes", &["validate", "--dir", d], |j| {
        j["status"] == "ok" && j["checked"]["iterations"] == 2
    });
    run.expect_ok("status reads the snapshot", &["status", "--dir", d], |j| {
        j["state_status"] == "stopped" && j["iterations"] == 2
    });
    run.expect_ok(
        "done reports the terminal status",
        &["done", "--dir", d],
        |j| j["done"] == true && j["reason"] == "terminal_status:stopped",
    );
    let root = format!("{d}/..");
    run.expect_ok(
        "arm registers the loop",
        &[
            "arm",
            "--dir",
            d,
            "--root",
            &root,
            "--registry-dir",
            &registry,
        ],
        |j| j["status"] == "ok",
    );
    run.expect_ok(
        "the Stop hook lets a finished loop's session stop",
        &["hook-check", "--root", &root, "--registry-dir", &registry],
        |j| j["block"] == false && j["reason"] == "terminal_status:stopped",
    );
    run.expect_ok(
        "disarm removes it",
        &["disarm", "--dir", d, "--registry-dir", &registry],
        |j| j["removed"].as_array().is_some_and(|r| r.len() == 1),
    );
    Ok(())
}
