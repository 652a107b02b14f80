//! The driver with real child processes: fake agents (shell scripts) for
//! each outcome, and SIGKILL of the real driver at every durable boundary.

mod common;

use common::{git, iteration_numbers, Fixture};
use predicates::prelude::PredicateBooleanExt as _;
use predicates::str::contains;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Append one iteration through the CLI, as a real agent would.
const APPEND: &str = r#"loopx append-iteration --mode bounded-research --objective "fake turn" --decision continue >/dev/null"#;

struct Drive {
    f: Fixture,
    root: PathBuf,
    bin: PathBuf,
}

impl Drive {
    fn new(max_iterations: u64) -> Self {
        Self::with_init(max_iterations, &[])
    }

    fn with_init(max_iterations: u64, extra: &[&str]) -> Self {
        let f = Fixture::new();
        f.init(max_iterations, extra);
        let root = f.temp.path().join("project");
        let bin = f.temp.path().join("bin");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&bin).unwrap();
        Drive { f, root, bin }
    }

    /// Write an executable script `name` whose body is `body`.
    fn script(&self, name: &str, body: &str) -> String {
        let path = self.bin.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path.display().to_string()
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(common::loopx_path());
        let path = format!("{}:{}", self.bin.display(), std::env::var("PATH").unwrap());
        command
            .args([
                "drive",
                "--dir",
                self.f.d(),
                "--root",
                self.root.to_str().unwrap(),
            ])
            .args(args)
            .env("PATH", path)
            .env("LOOPX_REGISTRY_DIR", &self.f.registry)
            .env_remove("LOOPX_DIR")
            .env_remove("AUTOLOOP_DRIVER");
        command
    }

    /// Run drive to the end; (exit code, stderr).
    fn run(&self, args: &[&str]) -> (i32, String) {
        let output = self.command(args).output().unwrap();
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }

    fn iterations(&self) -> usize {
        iteration_numbers(&self.f.dir).len()
    }

    fn status(&self) -> Value {
        self.f.json(&["status", "--dir", self.f.d()])
    }

    /// Every driver journal event, as (kind, dispatch id).
    fn journal(&self) -> Vec<(String, String)> {
        let conn = rusqlite::Connection::open_with_flags(
            self.f.dir.join("loopx.sqlite"),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .unwrap();
        let mut statement = conn
            .prepare("SELECT kind, event FROM journal WHERE stream = 'driver' ORDER BY revision")
            .unwrap();
        let rows = statement
            .query_map([], |row| {
                Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
            })
            .unwrap();
        rows.map(|row| {
            let (kind, event) = row.unwrap();
            let event: Value = serde_json::from_str(&event).unwrap();
            let id = [
                "/intent/dispatch_id",
                "/settlement/dispatch_id",
                "/dispatch_id",
            ]
            .iter()
            .find_map(|p| event.pointer(p))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
            (kind, id)
        })
        .collect()
    }

    /// Each dispatch has exactly one intent and exactly one terminal event.
    fn assert_one_result_per_dispatch(&self) {
        let journal = self.journal();
        let intents: Vec<_> = journal
            .iter()
            .filter(|(k, _)| k == "driver.intended")
            .map(|(_, id)| id.clone())
            .collect();
        for id in &intents {
            let ends = journal
                .iter()
                .filter(|(k, d)| d == id && (k == "driver.settled" || k == "driver.cancelled"))
                .count();
            assert_eq!(
                ends, 1,
                "dispatch {id} has {ends} terminal results: {journal:?}"
            );
        }
    }
}

#[test]
fn a_working_agent_runs_until_the_loop_is_done() {
    let d = Drive::new(3);
    let check_env = r#"[ "$AUTOLOOP_DRIVER" = 1 ] && [ -n "$LOOPX_DIR" ] && [ "$LOOPX_AGENT_ID" = agent ] && [ -n "$LOOPX_DISPATCH_ID" ] || { echo "bad env"; exit 9; }
env | grep -q 'END HOST PROMPT' && { echo "prompt leaked into the environment"; exit 9; }
[ "$(pwd -P)" = "$ROOT" ] || { echo "wrong cwd $(pwd)"; exit 9; }
grep -q 'one-iteration contract' || { echo "no prompt on stdin"; exit 9; }"#;
    let decision = r#"if [ "$(loopx status --json | grep -c '"remaining_iterations": 1')" = 1 ]; then D=stop; else D=continue; fi"#;
    let agent = d.script("agent", &format!("{check_env}\n{decision}\nloopx append-iteration --mode bounded-research --objective turn --decision $D >/dev/null"));
    let root = d.root.canonicalize().unwrap();
    let (code, stderr) = d.run_with_env(&["--cmd", &agent], "ROOT", root.to_str().unwrap());
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(d.iterations(), 3);
    assert!(stderr.contains("iteration 3 [cmd] advanced"), "{stderr}");
    let logs: Vec<_> = std::fs::read_dir(d.f.dir.join("driver_logs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(logs.len(), 3);
    let log = std::fs::read_to_string(&logs[0]).unwrap();
    assert!(
        log.contains("# loopx: one bounded turn") && log.contains("\n# --- END HOST PROMPT ---\n"),
        "{log}"
    );
    d.assert_one_result_per_dispatch();
    assert_eq!(d.status()["driver"]["running"], false);
}

#[test]
fn an_agent_following_the_prompt_finishes_cleanly_at_the_iteration_cap() {
    let d = Drive::new(2);
    // The agent records `continue` unless its prompt tells it to stop.
    let agent = d.script(
        "agent",
        r#"if grep -q -- '--decision stop' ; then D=stop; else D=continue; fi
loopx append-iteration --mode bounded-research --objective turn --decision $D --stop-reason loops_reached >/dev/null"#,
    );
    let (code, stderr) = d.run(&["--cmd", &agent]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(d.iterations(), 2);
    assert_eq!(d.status()["state_status"], "stopped");
    assert!(!stderr.contains("failed"), "{stderr}");
}

#[test]
fn request_stop_ends_a_driven_loop_after_the_current_turn() {
    let d = Drive::new(5);
    let agent = d.script(
        "agent",
        &format!("loopx request-stop --reason 'seen enough' >/dev/null\n{APPEND}"),
    );
    let (code, stderr) = d.run(&["--cmd", &agent]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(d.iterations(), 1, "{stderr}");
    let done = d.f.json(&["done", "--dir", d.f.d()]);
    assert_eq!(done["reason"], "user_stop_requested", "{done}");
}

#[test]
fn a_failed_turns_log_is_named_so_it_opens_from_where_drive_ran() {
    let d = Drive::new(3);
    let agent = d.script("agent", "echo broken; exit 1");
    let (code, stderr) = d.run(&["--cmd", &agent, "--max-failures", "1"]);
    assert_eq!(code, 3, "{stderr}");
    let logs: Vec<&str> = stderr
        .split("see ")
        .skip(1)
        .map(|rest| rest.split([';', ' ', '\n', ')']).next().unwrap())
        .collect();
    assert!(!logs.is_empty(), "{stderr}");
    for log in logs {
        assert!(
            Path::new(log).is_file(),
            "{log} does not open from here: {stderr}"
        );
    }
}

impl Drive {
    fn run_with_env(&self, args: &[&str], key: &str, value: &str) -> (i32, String) {
        let output = self.command(args).env(key, value).output().unwrap();
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }
}

#[test]
fn auth_failure_exits_7_at_once_and_changes_no_ledger() {
    let d = Drive::new(5);
    let agent = d.script(
        "agent",
        "echo 'Error: 401 Unauthorized. Please sign in again.'; exit 1",
    );
    let (code, stderr) = d.run(&["--cmd", &agent]);
    assert_eq!(code, 7, "{stderr}");
    assert_eq!(d.iterations(), 0);
    d.assert_one_result_per_dispatch();
}

#[test]
fn quota_signals_wait_and_exit_5_after_the_cap() {
    let d = Drive::new(5);
    let agent = d.script("agent", "echo 'You have hit your usage limit.' >&2; exit 1");
    let started = Instant::now();
    let (code, stderr) = d.run(&[
        "--cmd",
        &agent,
        "--max-quota-waits",
        "2",
        "--quota-backoff",
        "1",
    ]);
    assert_eq!(code, 5, "{stderr}");
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "no wait between quota signals"
    );
    assert_eq!(
        d.journal()
            .iter()
            .filter(|(k, _)| k == "driver.intended")
            .count(),
        2
    );
}

#[test]
fn a_reported_reset_is_waited_for_and_shown_then_the_loop_resumes() {
    let d = Drive::new(5);
    let flag = d.f.temp.path().join("limited-once");
    let agent = d.script("agent", &format!(
        "if [ ! -e {f} ]; then touch {f}; echo 'usage limit reached; resets in 2 seconds'; exit 1; fi\nloopx append-iteration --mode monitor --objective resumed --decision continue >/dev/null",
        f = flag.display()
    ));
    let mut child = d
        .command(&["--cmd", &agent, "--max-iterations", "2"])
        .stderr(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = String::new();
    while Instant::now() < deadline && !seen.contains("waiting for quota reset until") {
        seen = d.status()["driver"]["waiting"]["reason"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        seen.contains("waiting for quota reset until"),
        "status never showed the wait: {seen:?}"
    );
    assert_eq!(child.wait().unwrap().code(), Some(0));
    assert_eq!(d.iterations(), 1);
    let audit = std::fs::read_to_string(d.f.dir.join("notify_audit.jsonl")).unwrap();
    assert_eq!(
        notified(&d),
        ["iteration_failed", "quota_wait", "iteration_ok", "stop"],
        "{audit}"
    );
    assert!(
        audit.contains("waiting until"),
        "the wait names its reset time: {audit}"
    );
}

#[test]
fn hard_failures_no_advance_and_timeouts_stop_after_max_failures() {
    for (name, body, extra, sentence) in [
        (
            "hard",
            "echo boom; exit 1",
            vec![],
            "the agent failed without recording an iteration",
        ),
        (
            "no-advance",
            "echo 'all done!'; exit 0",
            vec![],
            "the agent exited 0 without recording an iteration",
        ),
        (
            "timeout",
            "sleep 30 & echo $! > \"$PIDFILE\"; sleep 30",
            vec!["--iteration-timeout", "1"],
            "the turn ran past --iteration-timeout",
        ),
    ] {
        let d = Drive::new(5);
        let pidfile = d.f.temp.path().join("background.pid");
        let agent = d.script("agent", body);
        let mut args = vec!["--cmd", agent.as_str(), "--max-failures", "3"];
        args.extend(extra);
        let started = Instant::now();
        let (code, stderr) = d.run_with_env(&args, "PIDFILE", pidfile.to_str().unwrap());
        assert_eq!(code, 3, "{name}: {stderr}");
        // The summary speaks to a person: what happened and where to look.
        let summary = stderr.lines().last().unwrap_or("");
        assert!(
            summary.contains(sentence)
                && summary.contains(&format!("; see {}/driver_logs/d1-", d.f.d())),
            "{name}: {summary}"
        );
        assert!(!stderr.contains("NoAdvance"), "{stderr}");
        assert_eq!(d.iterations(), 0, "{name}");
        d.assert_one_result_per_dispatch();
        // Once the driver is gone, every view says it gave up, and how.
        let status = d.status();
        assert_eq!(status["ending"]["kind"], "failed", "{name}: {status}");
        assert_eq!(status["ending"]["tone"], "bad", "{name}");
        assert_eq!(status["ending"]["run"]["exit"], "max_failures", "{name}");
        assert_eq!(status["driver"]["last_run"]["turns"], 3, "{name}");
        let text =
            d.f.loopx()
                .args(["status", "--dir", d.f.d()])
                .output()
                .unwrap();
        let text = String::from_utf8_lossy(&text.stdout);
        assert!(
            text.contains("status      failed: the driver gave up after 3 turns (exit 3): 3 consecutive failed turns")
                && text.contains("driver      not running; its last run ended with exit 3 (max_failures) after 3 turns"),
            "{name}: {text}"
        );
        let done =
            d.f.loopx()
                .args(["done", "--dir", d.f.d()])
                .output()
                .unwrap();
        assert!(
            String::from_utf8_lossy(&done.stdout)
                .starts_with("failed: the driver gave up after 3 turns"),
            "{name}: {}",
            String::from_utf8_lossy(&done.stdout)
        );
        if name == "timeout" {
            assert!(
                started.elapsed() < Duration::from_secs(15),
                "timeouts did not kill the turn"
            );
            let pid: i32 = std::fs::read_to_string(&pidfile)
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            // A killed orphan may linger as a zombie until init reaps it.
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let running = state
                .rsplit(')')
                .next()
                .is_some_and(|rest| !rest.trim_start().starts_with('Z'));
            assert!(
                !running || state.is_empty(),
                "the agent's background child outlived the timeout: {state}"
            );
        }
    }
}

/// A fake `claude` on PATH that reports cost in stream-json and appends.
fn fake_claude(d: &Drive, append: bool) {
    let work = if append { APPEND } else { "true" };
    d.script("claude", &format!(
        r#"case "$1" in -p) ;; *) echo "the prompt must follow -p directly"; exit 9;; esac
{work}
echo '{{"type":"result","subtype":"success","is_error":false,"total_cost_usd":0.25,"usage":{{"input_tokens":1000,"output_tokens":200}}}}'"#
    ));
}

#[test]
fn a_cli_newer_than_the_table_runs_on_its_newest_row_with_one_warning_per_run() {
    let d = Drive::new(10);
    d.script(
        "claude",
        &format!(
            r#"if [ "$1" = --version ]; then echo '9.0.0 (Claude Code)'; exit 0; fi
{APPEND}"#
        ),
    );
    let (code, stderr) = d.run(&["--provider", "claude", "--max-iterations", "2"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(d.iterations(), 2);
    let warning = "warning: claude 9.0.0 is newer than the newest version loopx was qualified against (2.1.197)";
    assert_eq!(stderr.matches(warning).count(), 1, "{stderr}");
}

#[test]
fn structured_cost_is_charged_once_per_dispatch_and_budgets_stop_the_next_one() {
    let d = Drive::new(10);
    fake_claude(&d, true);
    let (code, stderr) = d.run(&["--provider", "claude", "--max-iterations", "2"]);
    assert_eq!(code, 0, "{stderr}");
    let spent = &d.status()["spent"];
    assert_eq!(
        (
            spent["iterations"].as_u64(),
            spent["tokens"].as_u64(),
            spent["usd"].as_f64()
        ),
        (Some(2), Some(2400), Some(0.5))
    );
    // A USD budget that the next charge exhausts stops the loop before another dispatch.
    let d2 = Drive::with_init(10, &["--max-usd", "0.4"]);
    fake_claude(&d2, true);
    let (code, stderr) = d2.run(&["--provider", "claude"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        d2.iterations(),
        2,
        "the second charge crosses 0.4 and the arbiter stops the third"
    );
    assert_eq!(
        d2.f.json(&["done", "--dir", d2.f.d()])["reason"],
        "credit_exhausted:usd"
    );
}

#[test]
fn an_api_error_with_exit_zero_is_a_failure() {
    let d = Drive::new(5);
    d.script("claude", r#"echo '{"type":"result","subtype":"error_during_execution","is_error":true,"total_cost_usd":0.01}'"#);
    let (code, stderr) = d.run(&["--provider", "claude", "--max-failures", "2"]);
    assert_eq!(code, 3, "{stderr}");
    assert_eq!(d.iterations(), 0);
}

#[test]
fn missing_binaries_fail_over_and_exit_6_when_none_is_left() {
    let d = Drive::new(3);
    // Only claude exists: codex is skipped for the rest of the run.
    fake_claude(&d, true);
    let (code, stderr) = d.run(&["--provider", "codex,claude", "--max-iterations", "1"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("codex is not installed; switching to claude"),
        "{stderr}"
    );
    let (code, _) = d.run(&["--provider", "opencode"]);
    assert_eq!(code, 6);
    // agent-cmd probes offline and executes nothing.
    let path = format!("{}:/usr/bin:/bin", d.bin.display());
    d.f.loopx()
        .args(["agent-cmd", "--provider", "opencode", "--dir", d.f.d()])
        .env("PATH", &path)
        .assert()
        .code(6);
    d.f.loopx()
        .args(["agent-cmd", "--provider", "claude", "--dir", d.f.d()])
        .env("PATH", &path)
        .assert()
        .success()
        .stdout(contains(
            "claude -p '<prompt>' --dangerously-skip-permissions",
        ));
    d.f.loopx()
        .args([
            "drive",
            "--dir",
            d.f.d(),
            "--provider",
            "claude",
            "--cmd",
            "x",
        ])
        .assert()
        .code(2);
    d.f.loopx()
        .args(["drive", "--dir", d.f.d(), "--provider", "nope"])
        .assert()
        .code(2);
}

#[test]
fn one_driver_per_loop_and_a_dead_one_is_reclaimed() {
    let d = Drive::new(5);
    let started = d.f.temp.path().join("agent-started");
    let agent = d.script(
        "agent",
        &format!("touch '{}'\nsleep 2\n{APPEND}", started.display()),
    );
    let mut first = d
        .command(&["--cmd", &agent])
        .stderr(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while d.status()["driver"]["running"] != true && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(d.status()["driver"]["pid"], first.id());
    // Its open dispatch is its current turn, and recover says so (once
    // the agent runs: between the intent and the agent's start, the
    // dispatch is one nothing has started yet).
    while !started.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    d.f.loopx()
        .args(["recover", "--dir", d.f.d()])
        .assert()
        .stderr(contains(format!(
            "a driver (pid {}) is running this loop",
            first.id()
        )));
    let (code, stderr) = d.run(&["--cmd", &agent]);
    assert_eq!(code, 4);
    assert!(
        stderr.contains("another driver") && stderr.contains(&first.id().to_string()),
        "{stderr}"
    );
    first.kill().unwrap();
    first.wait().unwrap();
    // The dead driver's lock is gone with it; its open dispatch is recovered.
    let (code, stderr) = d.run(&["--cmd", &agent, "--max-iterations", "1"]);
    assert_eq!(code, 0, "{stderr}");
    d.assert_one_result_per_dispatch();
    let numbers = iteration_numbers(&d.f.dir);
    assert_eq!(numbers, (1..=numbers.len() as u64).collect::<Vec<_>>());
}

#[test]
fn a_planted_symlink_for_the_logs_is_refused() {
    let d = Drive::new(3);
    std::os::unix::fs::symlink(d.f.temp.path(), d.f.dir.join("driver_logs")).unwrap();
    let agent = d.script("agent", APPEND);
    let (code, stderr) = d.run(&["--cmd", &agent]);
    assert_eq!(code, 4, "{stderr}");
    assert_eq!(d.iterations(), 0);
}

/// Start drive paused at `failpoint`, then SIGKILL it there.
fn kill_driver_at(d: &Drive, args: &[&str], failpoint: &str) {
    common::require_failpoints();
    let mut child = d
        .command(args)
        .env("LOOPX_FAILPOINTS", failpoint)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let mut reached = false;
    for line in stderr.lines() {
        if line.unwrap().contains(&format!("failpoint: {failpoint}")) {
            reached = true;
            break;
        }
    }
    assert!(reached, "drive never reached {failpoint}");
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn killing_the_driver_at_any_boundary_never_duplicates_an_iteration_or_a_charge() {
    for failpoint in [
        "drive.before_intent",
        "drive.after_intent",
        "drive.agent_held",
        "drive.after_agent",
        // Inside the one transaction that charges the turn and settles it.
        "sqlite.commit_all.between",
        "drive.after_settle",
    ] {
        let d = Drive::new(10);
        git(&d.root, &["init", "-q"]);
        git(&d.root, &["commit", "-q", "--allow-empty", "-m", "start"]);
        fake_claude(&d, true);
        d.f.loopx()
            .args(["todo", "add", "--dir", d.f.d(), "--title", "first"])
            .assert()
            .success();
        let selected =
            d.f.json(&["quota", "should-run", "--dir", d.f.d()])["selected_todo"].clone();
        kill_driver_at(&d, &["--provider", "claude"], failpoint);
        let before = d.iterations();
        // Stage A: a fresh process reconstructs the same frontier from the store.
        assert_eq!(
            d.f.json(&["quota", "should-run", "--dir", d.f.d()])["selected_todo"],
            selected,
            "{failpoint}"
        );
        let (code, stderr) = d.run(&["--provider", "claude", "--max-iterations", "1"]);
        assert_eq!(code, 0, "{failpoint}: {stderr}");
        let after = d.iterations();
        assert_eq!(
            after,
            before + 1,
            "{failpoint}: the restart ran exactly one new turn"
        );
        d.assert_one_result_per_dispatch();
        let spent = &d.status()["spent"];
        assert_eq!(
            spent["tokens"].as_u64(),
            Some(1200 * after as u64),
            "{failpoint}: a charge was lost or doubled"
        );
        d.f.assert_valid();
    }
}

#[test]
fn killing_the_driver_mid_turn_lets_the_agent_finish_and_settles_it_without_rerunning() {
    let d = Drive::new(10);
    git(&d.root, &["init", "-q"]);
    git(&d.root, &["commit", "-q", "--allow-empty", "-m", "start"]);
    let runs = d.f.temp.path().join("runs");
    let agent = d.script(
        "agent",
        &format!("echo run >> {}\nsleep 1\n{APPEND}", runs.display()),
    );
    let mut driver = d
        .command(&["--cmd", &agent])
        .stderr(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !runs.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    driver.kill().unwrap();
    driver.wait().unwrap();
    // Stage D: the restarted driver waits for the orphaned agent, sees its
    // iteration, settles it, and does not run that turn again.
    let (code, stderr) = d.run(&["--cmd", &agent, "--max-iterations", "1"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("recovered an open dispatch") && stderr.contains("settle_advanced"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(&runs).unwrap().lines().count(),
        2,
        "one orphaned run plus one new turn"
    );
    assert_eq!(d.iterations(), 2);
    d.assert_one_result_per_dispatch();
}

#[test]
fn a_turn_that_changed_the_workspace_without_recording_fails_closed() {
    let d = Drive::new(10);
    git(&d.root, &["init", "-q"]);
    git(&d.root, &["commit", "-q", "--allow-empty", "-m", "start"]);
    let agent = d.script("agent", "echo half-done > work.txt; sleep 30");
    let mut driver = d
        .command(&["--cmd", &agent])
        .stderr(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !d.root.join("work.txt").exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    driver.kill().unwrap();
    driver.wait().unwrap();
    // Kill the orphan too: the agent is gone, its effect is not.
    let pid_files: Vec<_> = std::fs::read_dir(d.f.dir.join("driver_logs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "pid"))
        .collect();
    let pgid = recorded_pgid(&pid_files[0]);
    // SAFETY: kill(2) on the orphaned agent's process group.
    unsafe { libc::kill(-pgid, libc::SIGKILL) };
    std::thread::sleep(Duration::from_millis(200));
    let before = d.f.fingerprint();
    let (code, stderr) = d.run(&["--cmd", &agent]);
    assert_eq!(code, 4, "{stderr}");
    d.f.loopx()
        .args(["recover", "--dir", d.f.d()])
        .assert()
        .code(4)
        .stderr(contains("changed the workspace but recorded no iteration"));
    let open = d.f.json(&["recover", "--dir", d.f.d()])["open"]["dispatch_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(d.iterations(), 0);
    let _ = before;
    d.f.loopx()
        .args([
            "recover",
            "--dir",
            d.f.d(),
            "--cancel",
            "--dispatch-id",
            "d-wrong",
        ])
        .assert()
        .failure()
        .stderr(contains("no open dispatch d-wrong"));
    d.f.loopx()
        .args([
            "recover",
            "--dir",
            d.f.d(),
            "--cancel",
            "--dispatch-id",
            &open,
        ])
        .assert()
        .success();
    d.assert_one_result_per_dispatch();
    // Stage B: the workspace identity is the recorded one; another root is refused.
    let elsewhere = d.f.temp.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let before = d.f.fingerprint();
    let output = Command::new(common::loopx_path())
        .args([
            "drive",
            "--dir",
            d.f.d(),
            "--root",
            elsewhere.to_str().unwrap(),
            "--cmd",
            "true",
        ])
        .output()
        .unwrap();
    // The caller named the wrong root: a usage error, and nothing written.
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(d.f.fingerprint(), before);
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("was driven in workspace"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn an_agents_success_claim_is_banked_only_when_the_host_check_passes() {
    let d = Drive::with_init(5, &["--success-check", "test -f verified.txt"]);
    // The agent claims success every turn, with a valid proof artifact;
    // only from its second turn on is the check's file there.
    let turns = d.f.temp.path().join("turns");
    let agent = d.script("agent", &common::claiming_agent(&turns, "verified.txt"));
    let (code, stderr) = d.run(&["--cmd", &agent]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("success claim refused") && stderr.contains("success claim verified"),
        "{stderr}"
    );
    let status = d.status();
    assert_eq!(
        (
            status["state_status"].as_str(),
            status["iterations"].as_u64()
        ),
        (Some("stopped"), Some(2))
    );
    assert_eq!(status["last_iteration"]["claim"], "verified");
    d.f.assert_valid();
    // A manual claim waits for `loopx verify`, and nothing else is recorded meanwhile.
    let m = Fixture::new();
    m.init(5, &["--success-check", "false"]);
    m.write_proof("q");
    m.append("stop", &["--stop-reason", "success", "--evidence-id", "q"])
        .success();
    assert_eq!(
        m.json(&["quota", "should-run", "--dir", m.d()])["scheduler_hint"]["reason_code"],
        "success_claim_pending"
    );
    m.append("continue", &[])
        .failure()
        .stderr(contains("awaits its success_check"));
    m.loopx()
        .args(["verify", "--dir", m.d()])
        .assert()
        .code(1)
        .stderr(contains("refused"));
    assert_eq!(
        m.json(&["status", "--dir", m.d()])["state_status"],
        "running"
    );
    m.append("continue", &[]).success();
    m.assert_valid();
}

/// The driver's agent records (`driver_logs/*.pid`).
fn agent_records(d: &Drive) -> Vec<PathBuf> {
    std::fs::read_dir(d.f.dir.join("driver_logs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "pid"))
        .collect()
}

/// The process group an agent record names ("<pgid> [<start time>]").
fn recorded_pgid(record: &Path) -> i32 {
    std::fs::read_to_string(record)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn a_recycled_pid_is_not_mistaken_for_the_agent() {
    let d = Drive::new(10);
    fake_claude(&d, true);
    kill_driver_at(&d, &["--provider", "claude"], "drive.after_intent");
    // An unrelated live process group now holds the recorded number.
    let mut stranger = {
        use std::os::unix::process::CommandExt;
        Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap()
    };
    let record = &agent_records(&d)[0];
    let plan = |content: String| {
        std::fs::write(record, content).unwrap();
        d.f.json(&["recover", "--dir", d.f.d()])["plan"]["action"].clone()
    };
    let start: u64 = std::fs::read_to_string(format!("/proc/{}/stat", stranger.id()))
        .unwrap()
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .nth(19)
        .unwrap()
        .parse()
        .unwrap();
    // The same process: alive, so a person must look.
    assert_eq!(plan(format!("{} {start}", stranger.id())), "fail_closed");
    // Same number, other start time: not our agent, which is gone.
    assert_eq!(
        plan(format!("{} {}", stranger.id(), start + 1)),
        "cancel_unstarted"
    );
    stranger.kill().unwrap();
    stranger.wait().unwrap();
}

#[test]
fn a_missing_agent_record_fails_closed_and_the_turn_is_not_rerun() {
    let d = Drive::new(10);
    git(&d.root, &["init", "-q"]);
    git(&d.root, &["commit", "-q", "--allow-empty", "-m", "start"]);
    let runs = d.f.temp.path().join("runs");
    let agent = d.script(
        "agent",
        &format!("echo run >> {}\nsleep 2\n{APPEND}", runs.display()),
    );
    let mut driver = d
        .command(&["--cmd", &agent])
        .stderr(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !runs.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    // SIGKILL the driver mid-turn; the agent lives on. Then lose its record.
    driver.kill().unwrap();
    driver.wait().unwrap();
    let records = agent_records(&d);
    assert_eq!(records.len(), 1, "the running agent had no record");
    let pgid = recorded_pgid(&records[0]);
    std::fs::remove_file(&records[0]).unwrap();

    let before = d.f.fingerprint();
    d.f.loopx()
        .args(["recover", "--dir", d.f.d()])
        .assert()
        .code(4)
        .stderr(contains("missing or unreadable"));
    assert_eq!(d.f.fingerprint(), before, "recover only shows");

    let (code, stderr) = d.run(&["--cmd", &agent, "--max-iterations", "1"]);
    assert_eq!(code, 4, "{stderr}");
    // The command to run next is exact, with this loop's directory.
    let cancel = format!(
        "loopx recover --dir {} --cancel --dispatch-id d1-",
        d.f.dir.canonicalize().unwrap().display()
    );
    assert!(
        stderr.contains("missing or unreadable") && stderr.contains(&cancel),
        "{stderr}"
    );
    // Let the orphan finish: it ran once, and the restart dispatched nothing.
    let deadline = Instant::now() + Duration::from_secs(10);
    // SAFETY: kill(2) with signal 0 only probes the orphan's group.
    while unsafe { libc::kill(-pgid, 0) } == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(std::fs::read_to_string(&runs).unwrap().lines().count(), 1);
    assert_eq!(
        d.journal()
            .iter()
            .filter(|(k, _)| k == "driver.intended")
            .count(),
        1,
        "the restart must not dispatch while the first agent may live"
    );
}

#[test]
fn an_agent_is_held_until_its_record_is_on_disk() {
    let d = Drive::new(10);
    git(&d.root, &["init", "-q"]);
    git(&d.root, &["commit", "-q", "--allow-empty", "-m", "start"]);
    let runs = d.f.temp.path().join("runs");
    let agent = d.script(
        "agent",
        &format!("echo run >> {}\n{APPEND}", runs.display()),
    );
    // Killed after the agent process exists but before its pid is recorded:
    // the agent must never run.
    kill_driver_at(&d, &["--cmd", &agent], "drive.agent_held");
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !runs.exists(),
        "the agent ran before its record was written"
    );
    let records = agent_records(&d);
    assert_eq!(records.len(), 1);
    assert_eq!(
        std::fs::read_to_string(&records[0]).unwrap().trim(),
        "not-started"
    );
    let (code, stderr) = d.run(&["--cmd", &agent, "--max-iterations", "1"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("cancel_unstarted"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&runs).unwrap().lines().count(), 1);
    assert_eq!(d.iterations(), 1);
    d.assert_one_result_per_dispatch();
    assert!(
        agent_records(&d).is_empty(),
        "records outlived their dispatch"
    );
}

#[test]
fn recover_shows_the_plan_and_writes_nothing_until_apply() {
    for (failpoint, action, event) in [
        ("drive.after_intent", "cancel_unstarted", "driver.cancelled"),
        ("drive.after_agent", "settle_advanced", "driver.settled"),
    ] {
        let d = Drive::new(10);
        git(&d.root, &["init", "-q"]);
        git(&d.root, &["commit", "-q", "--allow-empty", "-m", "start"]);
        fake_claude(&d, true);
        kill_driver_at(&d, &["--provider", "claude"], failpoint);
        let before = d.f.fingerprint();
        let shown = d.f.json(&["recover", "--dir", d.f.d()]);
        assert_eq!(shown["plan"]["action"], action, "{failpoint}: {shown}");
        assert_eq!(shown["applied"], false);
        d.f.loopx()
            .args(["recover", "--dir", d.f.d()])
            .assert()
            .success()
            .stdout(contains("--apply"));
        assert_eq!(d.f.fingerprint(), before, "{failpoint}: recover wrote");
        assert!(!d.journal().iter().any(|(k, _)| k == event));

        let applied = d.f.json(&["recover", "--dir", d.f.d(), "--apply"]);
        assert_eq!(applied["applied"], true, "{failpoint}: {applied}");
        assert!(d.journal().iter().any(|(k, _)| k == event), "{failpoint}");
        d.assert_one_result_per_dispatch();
        assert_eq!(
            d.f.json(&["recover", "--dir", d.f.d()])["plan"]["action"],
            "clear"
        );
    }
}

/// Live processes whose command line holds `marker`.
fn processes_with(marker: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                String::from_utf8_lossy(&c)
                    .replace('\0', " ")
                    .contains(marker)
            })
        })
        .collect()
}

/// An agent that leaves three detached sleepers (`setsid`, a double fork,
/// both) and reports which it saw running.
fn detaching_agent(d: &Drive, tag: &str, then: &str) -> (String, PathBuf) {
    let started = d.f.temp.path().join("started");
    let body = format!(
        r#"setsid sleep 1000.{tag}1 &
(sleep 1000.{tag}2 &) &
(setsid sleep 1000.{tag}3 &) &
sleep 0.5
for m in 1 2 3; do grep -qas "1000.{tag}$m" /proc/[0-9]*/cmdline && echo $m >> {started}; done
{then}"#,
        started = started.display()
    );
    (d.script("agent", &body), started)
}

fn assert_no_sleepers(tag: &str, started: &Path) {
    let seen = std::fs::read_to_string(started).unwrap_or_default();
    let mut leaked = Vec::new();
    for m in 1..=3 {
        for pid in processes_with(&format!("sleep 1000.{tag}{m}")) {
            leaked.push(pid);
            // SAFETY: clean up a leaked test sleeper.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
    assert_eq!(
        seen.lines().count(),
        3,
        "not every sleeper started: {seen:?}"
    );
    assert!(leaked.is_empty(), "sleepers outlived the turn: {leaked:?}");
}

#[test]
fn detached_children_do_not_outlive_the_turn() {
    let d = Drive::new(5);
    let (agent, started) = detaching_agent(&d, "71", APPEND);
    let (code, stderr) = d.run(&["--cmd", &agent, "--max-iterations", "1"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(d.iterations(), 1);
    assert_no_sleepers("71", &started);
}

#[test]
fn detached_children_do_not_outlive_a_timed_out_turn() {
    let d = Drive::new(5);
    let (agent, started) = detaching_agent(&d, "72", "sleep 30");
    let began = Instant::now();
    let (code, stderr) = d.run(&[
        "--cmd",
        &agent,
        "--iteration-timeout",
        "2",
        "--max-failures",
        "1",
    ]);
    assert_eq!(code, 3, "{stderr}");
    assert!(began.elapsed() < Duration::from_secs(20));
    assert_no_sleepers("72", &started);
}

const PLANTED: &[&str] = &[
    "sk-ant-api03-PLANTEDaaaaaaaaaaaaaaaaaaaaaaaaaa0123456789",
    "ghp_PLANTED0123456789abcdefghijklmnopqrstu",
    "AKIAPLANTED012345678",
    "Bearer PLANTEDtoken.0123456789",
    "-----BEGIN RSA PRIVATE KEY-----\nPLANTEDKEYBODY0123\n-----END RSA PRIVATE KEY-----",
    "password=PLANTEDpw99",
    // Keys glued to a name by `-` or `_` are keys too.
    "evt-sk-ant-api03-PLANTEDgluedbbbbbbbbbbbbbbbbbbbb0123456789",
    "key_sk-ant-api03-PLANTEDgluedcccccccccccccccccccc0123456789",
];

#[test]
fn planted_secrets_never_leave_the_driver_logs() {
    let d = Drive::new(5);
    // An older loop's logs directory, readable by everyone.
    std::fs::create_dir(d.f.dir.join("driver_logs")).unwrap();
    std::fs::set_permissions(
        d.f.dir.join("driver_logs"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let one_line = PLANTED.join(" ; ");
    let error = serde_json::json!({"type": "result", "is_error": true, "result": format!("API Error: 500 upstream echoed {one_line}")});
    let secrets_file = d.f.temp.path().join("secrets.txt");
    std::fs::write(&secrets_file, PLANTED.join("\n")).unwrap();
    let single_line = PLANTED[..4].join(" ");
    std::fs::write(d.f.temp.path().join("line.txt"), &single_line).unwrap();
    let line_file = d.f.temp.path().join("line.txt");
    d.script(
        "claude",
        &format!(
            r#"S="$(cat {secrets})"; L="$(cat {line})"
loopx append-iteration --mode bounded-research --decision continue --objective "try $L" \
  --output "$S" --action-taken "used $L" --remaining-gap "$L" --completed-summary "$S" \
  --current-summary "$S" --next-action "rotate $L" >/dev/null || exit 9
printf '%s\n' '{error}'"#,
            secrets = secrets_file.display(),
            line = line_file.display(),
        ),
    );
    let (code, stderr) = d.run(&["--provider", "claude", "--max-iterations", "1"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(d.iterations(), 1, "{stderr}");

    // The log keeps everything, for its owner only.
    let logs = d.f.dir.join("driver_logs");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&logs), 0o700);
    let files: Vec<_> = std::fs::read_dir(&logs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(!files.is_empty());
    for file in &files {
        assert_eq!(mode(file), 0o600, "{}", file.display());
    }
    let log = files
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect::<String>();
    assert!(
        log.contains("PLANTEDKEYBODY0123"),
        "the secrets were not planted"
    );

    // Nothing else does: journal and snapshots, status, validate.
    let conn = rusqlite::Connection::open_with_flags(
        d.f.dir.join("loopx.sqlite"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let mut rows = String::new();
    for table in ["journal", "snapshots"] {
        let mut statement = conn.prepare(&format!("SELECT * FROM {table}")).unwrap();
        let columns = statement.column_count();
        let mut query = statement.query([]).unwrap();
        while let Some(row) = query.next().unwrap() {
            for i in 0..columns {
                let value: rusqlite::types::Value = row.get(i).unwrap();
                rows.push_str(&format!("{value:?}\n"));
            }
        }
    }
    assert!(rows.contains("[REDACTED"), "nothing was redacted");
    let status =
        d.f.loopx()
            .args(["status", "--dir", d.f.d(), "--json"])
            .output()
            .unwrap();
    let status_text =
        d.f.loopx()
            .args(["status", "--dir", d.f.d()])
            .output()
            .unwrap();
    let validate =
        d.f.loopx()
            .args(["validate", "--dir", d.f.d(), "--json"])
            .output()
            .unwrap();
    assert!(validate.status.success());
    let mut outside = rows;
    for output in [status, status_text, validate] {
        outside.push_str(&String::from_utf8_lossy(&output.stdout));
        outside.push_str(&String::from_utf8_lossy(&output.stderr));
    }
    for file in ["status.json", "recovery.md"] {
        outside.push_str(&std::fs::read_to_string(d.f.dir.join(file)).unwrap_or_default());
    }
    assert!(
        d.status()["driver"]["last"]["note"]
            .as_str()
            .is_some_and(|n| n.contains("API Error: 500") && n.contains("[REDACTED")),
        "{}",
        d.status()
    );
    assert!(
        !outside.contains("PLANTED"),
        "a planted secret escaped: {outside}"
    );
}

#[test]
fn usage_errors_exit_2_and_the_help_warns_about_autonomy() {
    let d = Drive::new(3);
    let missing = d.f.temp.path().join("no-such-loop");
    let output = Command::new(common::loopx_path())
        .args(["drive", "--dir", missing.to_str().unwrap(), "--cmd", "true"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(!missing.exists());
    // An agent id outside the identifier grammar is a usage error too.
    let before = d.f.fingerprint();
    let output = Command::new(common::loopx_path())
        .args([
            "drive",
            "--dir",
            d.f.d(),
            "--cmd",
            "true",
            "--agent-id",
            "../x y",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert_eq!(d.f.fingerprint(), before);
    let help = Command::new(common::loopx_path())
        .args(["drive", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for needle in [
        "full tool autonomy",
        "--dangerously-skip-permissions",
        "--dangerously-bypass-approvals-and-sandbox",
        "--allow-all-tools",
        "--yolo",
        "one-hour wall-time budget",
    ] {
        assert!(help.contains(needle), "{needle} missing from drive --help");
    }
    // Printing a command and a prompt needs no agent binary.
    let path = format!("{}:/usr/bin:/bin", d.bin.display());
    d.f.loopx()
        .args([
            "agent-cmd",
            "--provider",
            "opencode",
            "--dir",
            d.f.d(),
            "--print-prompt",
        ])
        .env("PATH", &path)
        .assert()
        .success()
        .stdout(
            contains("opencode run --format json --auto '<prompt>'")
                .and(contains("one bounded turn")),
        )
        .stderr(contains("warning: provider opencode unavailable"));
}

/// The kinds of the notification events in the loop's audit log, in order.
fn notified(d: &Drive) -> Vec<String> {
    std::fs::read_to_string(d.f.dir.join("notify_audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|line| {
            let line: Value = serde_json::from_str(line).unwrap();
            line["event"]["event"].as_str().unwrap().to_owned()
        })
        .collect()
}

#[test]
fn the_driver_notifies_each_iteration_and_its_stop_and_a_broken_hook_changes_nothing() {
    let d = Drive::new(10);
    fake_claude(&d, true);
    // A hook that always fails: the loop runs as if it were not there.
    std::fs::write(
        d.f.dir.join("notify.json"),
        r#"{"command": ["sh", "-c", "cat >/dev/null; exit 3"], "attempts": 1}"#,
    )
    .unwrap();
    let (code, stderr) = d.run(&["--provider", "claude", "--max-iterations", "2"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(d.iterations(), 2);
    assert_eq!(notified(&d), ["iteration_ok", "iteration_ok", "stop"]);
    let audit = std::fs::read_to_string(d.f.dir.join("notify_audit.jsonl")).unwrap();
    assert!(audit.contains(r#""outcome":"failed""#), "{audit}");
    assert!(!d.f.dir.join("notify_delivered.jsonl").exists());

    let dead = Drive::new(5);
    let agent = dead.script(
        "agent",
        "echo 'Error: 401 Unauthorized. Please sign in again.'; exit 1",
    );
    let (code, stderr) = dead.run(&["--cmd", &agent]);
    assert_eq!(code, 7, "{stderr}");
    assert_eq!(notified(&dead), ["iteration_failed", "auth_dead"]);
}

#[test]
fn cost_reports_each_turns_reported_usage_by_turn_day_and_provider() {
    let d = Drive::with_init(10, &["--max-usd", "5", "--max-tokens", "24000"]);
    fake_claude(&d, true);
    let (code, stderr) = d.run(&["--provider", "claude", "--max-iterations", "2"]);
    assert_eq!(code, 0, "{stderr}");
    let by_turn = d.f.json(&["cost", "--dir", d.f.d(), "--by", "turn"]);
    let rows: Vec<(String, u64, f64, String)> = by_turn["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["key"].as_str().unwrap().to_owned(),
                r["tokens"].as_u64().unwrap(),
                r["usd"].as_f64().unwrap(),
                r["provider"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("1".to_owned(), 1200, 0.25, "claude".to_owned()),
            ("2".to_owned(), 1200, 0.25, "claude".to_owned())
        ]
    );
    assert_eq!(
        (by_turn["tokens"].as_u64(), by_turn["usd"].as_f64()),
        (Some(2400), Some(0.5))
    );
    let usd = by_turn["budgets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == "usd")
        .unwrap();
    assert_eq!(usd["remaining"].as_f64(), Some(4.5));
    // Two turns in a second are no history to forecast from.
    assert!(
        usd["per_hour"].is_null()
            && usd["exhausts_at"].is_null()
            && usd["no_forecast"] == "too_little_history",
        "{usd}"
    );
    // A page of one: the newest turn, and where the one before it is.
    let newest =
        d.f.json(&["cost", "--dir", d.f.d(), "--by", "turn", "--limit", "1"]);
    assert_eq!(
        (
            &newest["rows"][0]["key"],
            &newest["rows_total"],
            &newest["older"]
        ),
        (&json!("2"), &json!(2), &json!(1)),
        "{newest}"
    );
    let before =
        d.f.json(&["cost", "--dir", d.f.d(), "--by", "turn", "--before", "1"]);
    assert_eq!(before["rows"].as_array().unwrap().len(), 1, "{before}");
    assert_eq!(
        (&before["rows"][0]["key"], &before["older"]),
        (&json!("1"), &Value::Null)
    );
    // By provider unless asked otherwise: a few rows, however long the loop.
    let by_provider = d.f.json(&["cost", "--dir", d.f.d()]);
    assert_eq!(by_provider["by"], "provider");
    assert_eq!(by_provider["rows"][0]["key"], "claude");
    assert_eq!(by_provider["rows"][0]["turns"], 2);
    let by_day = d.f.json(&["cost", "--dir", d.f.d(), "--by", "day"]);
    assert_eq!(by_day["rows"].as_array().unwrap().len(), 1);
    assert_eq!(by_day["rows"][0]["tokens"], 2400);
}

/// Start `drive --cmd agent` with a loop of `max_iterations`, and return
/// once the agent has written `started` (it must).
fn drive_until_started(d: &Drive, agent: &str, started: &Path) -> std::process::Child {
    let driver = d
        .command(&["--cmd", agent])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !started.exists() {
        assert!(Instant::now() < deadline, "the agent never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    driver
}

fn signal(child: &std::process::Child, signal: i32) {
    // SAFETY: kill(2) on the driver this test started and still holds.
    unsafe { libc::kill(child.id() as i32, signal) };
}

/// Wait for the driver to exit: (exit code, stderr).
fn finished(mut driver: std::process::Child) -> (i32, String) {
    let mut stderr = String::new();
    std::io::Read::read_to_string(driver.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    let status = driver.wait().unwrap();
    (status.code().unwrap_or(-1), stderr)
}

/// The outcome each settled dispatch was settled with, in journal order.
fn settled_outcomes(d: &Drive) -> Vec<Value> {
    common::journal_events(&d.f.dir, "driver.settled")
        .into_iter()
        .map(|event| event["settlement"]["outcome"].clone())
        .collect()
}

/// An agent with a process tree: a child in its group and one that left
/// it with `setsid`, both sleeping, then waiting (as `sh -c agent.sh`
/// would). `leader_ignores_term`: the agent itself shrugs off SIGTERM.
fn long_agent(d: &Drive, tag: &str, leader_ignores_term: bool) -> (String, PathBuf) {
    let started = d.f.temp.path().join("started");
    let trap = if leader_ignores_term {
        "trap '' TERM"
    } else {
        ""
    };
    let body = format!(
        "{trap}\nsleep 1000.{tag}1 &\nsetsid sleep 1000.{tag}2 &\necho up > {started}\nwhile :; do sleep 0.2; done",
        started = started.display()
    );
    (d.script("agent", &body), started)
}

fn assert_turn_reaped(tag: &str) {
    let survivors: Vec<i32> = (1..=2)
        .flat_map(|m| processes_with(&format!("sleep 1000.{tag}{m}")))
        .chain(processes_with(&format!("1000.{tag}")))
        .collect();
    for pid in &survivors {
        // SAFETY: clean up what the driver leaked, so the failure is the
        // only harm.
        unsafe { libc::kill(*pid, libc::SIGKILL) };
    }
    assert!(
        survivors.is_empty(),
        "processes of the turn outlived the driver: {survivors:?}"
    );
}

#[test]
fn sigterm_ends_the_turns_whole_process_tree_settles_it_once_and_exits_143() {
    let d = Drive::new(10);
    let (agent, started) = long_agent(&d, "81", false);
    let driver = drive_until_started(&d, &agent, &started);
    signal(&driver, libc::SIGTERM);
    let (code, stderr) = finished(driver);
    assert_eq!(code, 143, "{stderr}");
    assert!(stderr.contains("stopped by SIGTERM"), "{stderr}");
    assert_turn_reaped("81");
    // Settled as interrupted, once, charged nothing; no dispatch left open.
    assert_eq!(settled_outcomes(&d), vec![Value::from("interrupted")]);
    d.assert_one_result_per_dispatch();
    assert_eq!(d.iterations(), 0);
    assert_eq!(
        d.f.json(&["recover", "--dir", d.f.d()])["plan"]["action"],
        "clear"
    );
    // The next start has nothing to recover and runs the next turn.
    let appending = d.script("appending", APPEND);
    let (code, stderr) = d.run(&["--cmd", &appending, "--max-iterations", "1"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("recovered an open dispatch"), "{stderr}");
    assert_eq!(d.iterations(), 1);
    d.assert_one_result_per_dispatch();
    d.f.assert_valid();
}

#[test]
fn ctrl_c_stops_the_driver_and_a_second_ctrl_c_kills_a_stubborn_turn_at_once() {
    let d = Drive::new(10);
    // The agent ignores SIGTERM: a first Ctrl-C would wait out the grace.
    let (agent, started) = long_agent(&d, "82", true);
    // `exec`: the agent itself leads the group, not a shell that SIGTERM ends.
    let driver = drive_until_started(&d, &format!("exec {agent}"), &started);
    signal(&driver, libc::SIGINT);
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !processes_with("sleep 1000.821").is_empty(),
        "the stubborn turn should still be in its grace period"
    );
    let second = Instant::now();
    signal(&driver, libc::SIGINT);
    let (code, stderr) = finished(driver);
    // Well inside the five-second grace the first signal gave.
    assert!(
        second.elapsed() < Duration::from_secs(4),
        "a second Ctrl-C took {:?}",
        second.elapsed()
    );
    assert_eq!(code, 130, "{stderr}");
    assert!(stderr.contains("stopped by SIGINT"), "{stderr}");
    assert_turn_reaped("82");
    assert_eq!(settled_outcomes(&d), vec![Value::from("interrupted")]);
    d.assert_one_result_per_dispatch();
}

#[test]
fn a_stop_signal_between_turns_ends_a_paused_driver_at_once() {
    let d = Drive::new(10);
    std::fs::write(d.f.dir.join("PAUSE"), "").unwrap();
    let agent = d.script("agent", APPEND);
    let mut driver = d
        .command(&["--cmd", &agent])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Paused: the driver records its wait and runs no turn.
    let deadline = Instant::now() + Duration::from_secs(20);
    while d.status()["driver"]["waiting"].is_null() {
        assert!(Instant::now() < deadline, "the driver never paused");
        assert!(driver.try_wait().unwrap().is_none(), "the driver exited");
        std::thread::sleep(Duration::from_millis(50));
    }
    signal(&driver, libc::SIGTERM);
    let (code, stderr) = finished(driver);
    assert_eq!(code, 143, "{stderr}");
    assert_eq!(d.iterations(), 0);
    assert!(settled_outcomes(&d).is_empty());
}

/// The turn logs in driver_logs/ (not the success checks'), with their
/// contents.
fn turn_logs(d: &Drive) -> Vec<(PathBuf, Vec<u8>)> {
    std::fs::read_dir(d.f.dir.join("driver_logs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect()
}

/// An agent that prints a marked head, `bytes` of filler and a marked
/// tail, then records its iteration.
fn flooding_agent(d: &Drive, bytes: u64) -> String {
    d.script(
        "flood",
        &format!(
            "printf 'FLOOD-HEAD\\n'; head -c {bytes} /dev/zero | tr '\\0' x; printf '\\nFLOOD-TAIL\\n' >&2\n{APPEND}"
        ),
    )
}

#[test]
fn a_flooding_agent_s_log_keeps_its_head_and_tail_within_the_cap_and_the_turn_says_so() {
    let d = Drive::new(5);
    let agent = flooding_agent(&d, 3_000_000);
    let (code, stderr) = d.run(&[
        "--cmd",
        &agent,
        "--max-iterations",
        "1",
        "--max-turn-output",
        "256K",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(d.iterations(), 1, "{stderr}");
    let logs = turn_logs(&d);
    assert_eq!(logs.len(), 1);
    let (path, log) = &logs[0];
    let text = String::from_utf8_lossy(log);
    let output = &text[text.find("# --- END HOST PROMPT ---").unwrap()..];
    // The cap, plus the prompt's end line and the line saying what was dropped.
    assert!(output.len() < 256 * 1024 + 400, "{} bytes", output.len());
    assert!(output.contains("FLOOD-HEAD"), "the head is kept");
    assert!(
        output.trim_end().ends_with("FLOOD-TAIL"),
        "the tail (stderr too) is kept"
    );
    // "FLOOD-HEAD\n", the filler, "\nFLOOD-TAIL\n".
    let dropped = 11 + 3_000_000 + 12 - 256 * 1024;
    assert!(
        output.contains(&format!(
            "# --- loopx: {dropped} bytes of output dropped here"
        )),
        "{}",
        &output[..300]
    );
    let note = d.status()["driver"]["last"]["note"]
        .as_str()
        .unwrap()
        .to_owned();
    let name = path.file_name().unwrap().to_string_lossy();
    assert!(
        note.contains(&format!("{dropped} bytes dropped from the middle")) && note.contains(&*name),
        "{note}"
    );
    assert!(stderr.contains("bytes dropped from the middle"), "{stderr}");
}

#[test]
fn the_default_cap_bounds_a_50_mb_flood_to_16_mib() {
    let d = Drive::new(5);
    let agent = flooding_agent(&d, 50_000_000);
    let (code, stderr) = d.run(&["--cmd", &agent, "--max-iterations", "1"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(d.iterations(), 1, "{stderr}");
    let logs = turn_logs(&d);
    let (_, log) = &logs[0];
    let text = String::from_utf8_lossy(log);
    let output = &text[text.find("# --- END HOST PROMPT ---").unwrap()..];
    assert!(output.len() < 16 * 1024 * 1024 + 400, "{}", output.len());
    assert!(output.contains("FLOOD-HEAD") && output.trim_end().ends_with("FLOOD-TAIL"));
}

/// `drive --cmd agent` with each of `cases` (the flag's value, the
/// variable's, what stderr must say) given as `setting` (flag, variable)
/// says so, exits 2 and changes nothing.
fn refused_settings(
    d: &Drive,
    agent: &str,
    (flag_name, variable): (&str, &str),
    cases: &[(Option<&str>, Option<&str>, &str)],
) {
    let before = d.f.fingerprint();
    for (flag, env, expected) in cases {
        let mut args = vec!["--cmd", agent];
        args.extend(flag.map(|f| [flag_name, f]).into_iter().flatten());
        let mut command = d.command(&args);
        if let Some(env) = env {
            command.env(variable, env);
        }
        let output = command.output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(expected), "{stderr}");
        assert_eq!(d.f.fingerprint(), before);
    }
}

#[test]
fn a_bad_cli_retry_policy_is_a_usage_error_that_changes_nothing() {
    let d = Drive::new(5);
    let agent = d.script("agent", APPEND);
    let cases = [
        (
            None,
            Some("many"),
            "LOOPX_MAX_CLI_RETRIES=\"many\" is not a whole number",
        ),
        (Some("-1"), None, "--max-cli-retries"),
        (Some("two"), Some("2"), "--max-cli-retries"),
    ];
    refused_settings(
        &d,
        &agent,
        ("--max-cli-retries", "LOOPX_MAX_CLI_RETRIES"),
        &cases,
    );
}

#[test]
fn a_bad_output_cap_is_a_usage_error_that_changes_nothing() {
    let d = Drive::new(5);
    let agent = d.script("agent", APPEND);
    let cases = [
        (
            Some("lots"),
            None,
            "--max-turn-output \"lots\" is not a size",
        ),
        (Some("1000"), None, "is out of range"),
        (
            None,
            Some("16MB"),
            "LOOPX_MAX_TURN_OUTPUT=\"16MB\" is not a size",
        ),
    ];
    refused_settings(
        &d,
        &agent,
        ("--max-turn-output", "LOOPX_MAX_TURN_OUTPUT"),
        &cases,
    );
    // The flag wins over a bad environment.
    let (code, stderr) = {
        let output = d
            .command(&[
                "--cmd",
                &agent,
                "--max-iterations",
                "1",
                "--max-turn-output",
                "1M",
            ])
            .env("LOOPX_MAX_TURN_OUTPUT", "junk")
            .output()
            .unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn old_driver_logs_beyond_the_retention_are_removed_after_a_turn_oldest_first() {
    let d = Drive::new(5);
    let logs = d.f.dir.join("driver_logs");
    std::fs::create_dir(&logs).unwrap();
    let age = |path: &Path, seconds_ago: u64| {
        let when = std::time::SystemTime::now() - Duration::from_secs(seconds_ago);
        std::fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(when)
            .unwrap();
    };
    for i in 0..205u64 {
        let path = logs.join(format!("old-{i:03}.log"));
        std::fs::write(&path, "old turn\n").unwrap();
        age(&path, 100_000 - i);
    }
    let agent = d.script("agent", APPEND);
    let (code, stderr) = d.run(&["--cmd", &agent, "--max-iterations", "1"]);
    assert_eq!(code, 0, "{stderr}");
    let mut left: Vec<String> = std::fs::read_dir(&logs)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".log"))
        .collect();
    left.sort();
    // The turn's own log and the 199 newest old ones. (That a log of a
    // process still running is never removed is proved beside the sweep.)
    assert_eq!(left.len(), 200, "{left:?}");
    for gone in 0..6 {
        assert!(!left.contains(&format!("old-{gone:03}.log")), "{gone}");
    }
    assert!(left.contains(&"old-006.log".to_owned()));
    assert!(left.iter().any(|n| n.starts_with("d1-")), "{left:?}");
}
