//! The hermetic suite: `loopx drive` runs the real agent CLIs (Claude Code,
//! OpenCode; installed from npm at the versions the provider table
//! qualifies) for real turns against a scripted stand-in model API on
//! loopback (`agents/standin.rs`): no model, no network, no account.
//!
//! The CLIs are found in `LOOPX_AGENT_CLIS` (a `node_modules/.bin`, as
//! `.ci/run` installs it); without it every test here says it skipped, and
//! under `LOOPX_TESTS_REQUIRED=1` fails by name. Each drive runs with a
//! scratch HOME, the stand-in as the provider's endpoint (through loopx's
//! own `AAS_AUTOLOOP_<PROVIDER>_BASE_URL`) and a fake key.

mod common;
#[path = "agents/standin.rs"]
mod standin;

use common::{iteration_numbers, Fixture};
use serde_json::Value;
use standin::{Reply, StandIn, INPUT_TOKENS, OUTPUT_TOKENS};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// What the model runs to record its iteration (the driver puts this
/// loopx first on the turn's PATH and sets `LOOPX_DIR`).
const RECORD: &str =
    "loopx append-iteration --mode bounded-research --objective 'stand-in turn' --decision continue";

struct Agents {
    f: Fixture,
    root: PathBuf,
    home: PathBuf,
    clis: PathBuf,
    /// Set in every process of a drive, to find any that outlived it.
    mark: String,
}

impl Agents {
    /// A loop of `max_iterations`, or `None` (skipped) without every one
    /// of the CLIs `needs`.
    fn new(needs: &[&str], max_iterations: u64) -> Option<Agents> {
        let Some(clis) = std::env::var_os("LOOPX_AGENT_CLIS").map(PathBuf::from) else {
            common::skipped_without(
                "LOOPX_AGENT_CLIS is not set (a node_modules/.bin holding the pinned agent CLIs; see .ci/run)",
            );
            return None;
        };
        if let Some(cli) = needs.iter().find(|cli| !clis.join(cli).is_file()) {
            common::skipped_without(&format!("LOOPX_AGENT_CLIS has no {cli}"));
            return None;
        }
        let f = Fixture::new();
        f.init(max_iterations, &[]);
        let root = f.temp.path().join("project");
        let home = f.temp.path().join("home");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(home.join(".config/opencode")).unwrap();
        // OpenCode's model, in the user's own config (the endpoint comes
        // from loopx, merged over it).
        std::fs::write(
            home.join(".config/opencode/opencode.json"),
            r#"{"model":"anthropic/claude-sonnet-4-5","autoupdate":false}"#,
        )
        .unwrap();
        let mark = format!("agents-{}-{}", std::process::id(), f.temp.path().display());
        Some(Agents {
            f,
            root,
            home,
            clis,
            mark,
        })
    }

    /// The CLI `cli` run by hand (not by a drive) in the project, in the
    /// scratch environment only (its HOME, the CLIs first on PATH).
    fn by_hand(&self, cli: &str) -> Command {
        let mut command = Command::new(self.clis.join(cli));
        command
            .current_dir(&self.root)
            .env_clear()
            .env("PATH", self.path())
            .env("HOME", &self.home)
            .env("LOOPX_REGISTRY_DIR", &self.f.registry);
        command
    }

    /// `claude` run by hand, with `standin` as its model API.
    fn claude(&self, standin: &StandIn) -> Command {
        let mut claude = self.by_hand("claude");
        claude
            .env("ANTHROPIC_API_KEY", "sk-ant-standin-not-a-key")
            .env("ANTHROPIC_BASE_URL", &standin.url)
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
        claude
    }

    /// `codex exec` run by hand (its CODEX_HOME the scratch HOME's
    /// `.codex`), with `standin` as its Responses API.
    fn codex_exec(&self, standin: &StandIn) -> Command {
        let provider = format!(
            "model_providers.standin={{name=\"standin\",base_url=\"{}/v1\",wire_api=\"responses\",env_key=\"OPENAI_API_KEY\"}}",
            standin.url
        );
        let mut codex = self.by_hand("codex");
        codex
            .env("OPENAI_API_KEY", "sk-standin-not-a-key")
            .args(["exec", "-c", &provider, "-c", "model_provider=\"standin\""])
            .args(["--skip-git-repo-check", "--json"]);
        codex
    }

    /// Install loopx for `target` (`args` added) and arm the loop, as a
    /// person would in this project.
    fn install_and_arm(&self, target: &str, args: &[&str]) {
        for args in [
            [
                &["install", "--target", target, "--dir", self.f.d()][..],
                args,
            ]
            .concat(),
            vec![
                "arm",
                "--dir",
                self.f.d(),
                "--root",
                self.root.to_str().unwrap(),
            ],
        ] {
            self.f
                .loopx()
                .args(&args)
                .current_dir(&self.root)
                .env("HOME", &self.home)
                .env_remove("CODEX_HOME")
                .assert()
                .success();
        }
    }

    /// `drive --provider providers args` in the scratch environment, with    /// `drive --provider providers args` in the scratch environment, with
    /// `env` added (an empty value removes the variable), run to its end.
    fn drive(&self, providers: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
        self.drive_command(providers, args, env).output().unwrap()
    }

    /// The command [`Agents::drive`] runs, to start it and watch it run.
    fn drive_command(&self, providers: &str, args: &[&str], env: &[(&str, &str)]) -> Command {
        let mut command = Command::new(common::loopx_path());
        command
            .args(["drive", "--dir", self.f.d(), "--root"])
            .arg(&self.root)
            .args(["--provider", providers])
            .args(args)
            .env_clear()
            .env("PATH", self.path())
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("XDG_DATA_HOME", self.home.join(".local/share"))
            .env("XDG_CACHE_HOME", self.home.join(".cache"))
            .env("LOOPX_REGISTRY_DIR", &self.f.registry)
            .env("LOOPX_AGENTS_MARK", &self.mark)
            .env("ANTHROPIC_API_KEY", "sk-ant-standin-not-a-key")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("OPENCODE_DISABLE_AUTOUPDATE", "1");
        if is_root() {
            // Claude Code refuses --dangerously-skip-permissions as root
            // unless told the machine is a sandbox, which this test's is.
            command.env("IS_SANDBOX", "1");
        }
        for (name, value) in env {
            match value {
                // An empty value: the variable is not set at all.
                &"" => command.env_remove(name),
                value => command.env(name, value),
            };
        }
        command
    }

    /// The CLIs first, then the test's own PATH.
    fn path(&self) -> String {
        format!(
            "{}:{}",
            self.clis.display(),
            std::env::var("PATH").unwrap_or_default()
        )
    }

    fn status(&self) -> Value {
        self.f.json(&["status", "--dir", self.f.d()])
    }

    /// The settled outcomes of the driver's turns, in order, as drive
    /// prints them (`advanced`, `failed:auth`).
    fn outcomes(&self) -> Vec<String> {
        common::journal_events(&self.f.dir, "driver.settled")
            .iter()
            .map(|e| match &e["settlement"]["outcome"] {
                Value::Object(failed) => format!("failed:{}", failed["failed"].as_str().unwrap()),
                outcome => outcome.as_str().unwrap().to_owned(),
            })
            .collect()
    }

    /// `drive` exited `code` after turns that came to `outcomes` and left
    /// the ledger with iterations `recorded`; its stderr, for more checks.
    fn ended(&self, output: &Output, code: i32, outcomes: &[&str], recorded: &[u64]) -> String {
        let stderr = stderr(output);
        assert_eq!(output.status.code(), Some(code), "{stderr}");
        assert_eq!(self.outcomes(), outcomes, "{stderr}");
        assert_eq!(iteration_numbers(&self.f.dir), recorded, "{stderr}");
        stderr
    }

    /// Every turn log's agent output, concatenated.
    fn logs(&self) -> String {
        let mut text = String::new();
        for entry in std::fs::read_dir(self.f.dir.join("driver_logs")).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "log") {
                text.push_str(&std::fs::read_to_string(path).unwrap());
            }
        }
        text
    }

    /// Processes still running with this test's mark in their environment.
    fn survivors(&self) -> Vec<String> {
        let needle = format!("LOOPX_AGENTS_MARK={}", self.mark);
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
                continue;
            };
            if environ
                .split(|b| *b == 0)
                .any(|var| var == needle.as_bytes())
            {
                let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
                found.push(String::from_utf8_lossy(&cmdline).replace('\0', " "));
            }
        }
        found
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid(2) has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The USD Claude Code's `result` events in `logs` reported, summed (one
/// a turn).
fn claude_reported_usd(logs: &str) -> f64 {
    let results: Vec<f64> = logs
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "result")
        .map(|e| e["total_cost_usd"].as_f64().unwrap())
        .collect();
    assert!(!results.is_empty(), "no result event in {logs}");
    results.iter().sum()
}

fn claude_endpoint(standin: &StandIn) -> [(&'static str, String); 1] {
    [("AAS_AUTOLOOP_CLAUDE_BASE_URL", standin.url.clone())]
}

#[test]
fn claude_records_its_iteration_through_bash_and_is_charged_what_it_reported() {
    let Some(a) = Agents::new(&["claude"], 10) else {
        return;
    };
    let standin = StandIn::new(vec![Reply::shell(RECORD), Reply::Text("Recorded.")]);
    let [(name, url)] = claude_endpoint(&standin);
    let output = a.drive("claude", &["--max-iterations", "1"], &[(name, &url)]);
    a.ended(&output, 0, &["advanced"], &[1]);
    assert_eq!(standin.turns(), 2, "a tool call, then the closing text");
    // Charged once, from Claude Code's own result: its token sum of what
    // the stand-in reported, and its own price for them.
    let usd = claude_reported_usd(&a.logs());
    assert!(usd > 0.0);
    let spent = &a.status()["spent"];
    assert_eq!(
        spent["tokens"].as_u64(),
        Some(2 * (INPUT_TOKENS + OUTPUT_TOKENS)),
        "{spent}"
    );
    assert_eq!(spent["usd"].as_f64(), Some(usd), "{spent}");
    a.f.assert_valid();
}

#[test]
fn a_refused_key_is_auth_at_once_and_drive_goes_on_with_the_next_provider() {
    let Some(a) = Agents::new(&["claude", "opencode"], 10) else {
        return;
    };
    let refused = StandIn::new(vec![
        Reply::Error {
            status: 401,
            headers: vec![("request-id", "req_standin")],
            body: r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
        };
        3
    ]);
    let working = StandIn::new(vec![Reply::shell(RECORD), Reply::Text("Recorded.")]);
    // OpenCode's Anthropic provider takes the base URL with its /v1.
    let opencode_url = format!("{}/v1", working.url);
    let started = Instant::now();
    let output = a.drive(
        "claude,opencode",
        // Two turns: claude's refused one, then opencode's. Claude Code
        // would retry the 401 for minutes: the driver ends the turn at its
        // second retry.
        &["--max-iterations", "2", "--max-cli-retries", "1"],
        &[
            ("AAS_AUTOLOOP_CLAUDE_BASE_URL", &refused.url),
            ("AAS_AUTOLOOP_OPENCODE_BASE_URL", &opencode_url),
            ("CLAUDE_CODE_MAX_RETRIES", ""),
        ],
    );
    let stderr = a.ended(&output, 0, &["failed:auth", "advanced"], &[1]);
    assert_eq!(refused.turns(), 2, "the first call and one retry: {stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(90),
        "{:?}",
        started.elapsed()
    );
    assert!(
        stderr
            .contains("claude excluded for this run (auth_or_session_dead); switching to opencode"),
        "{stderr}"
    );
    assert_eq!(working.turns(), 2);
    // OpenCode's own usage (its --format json steps) is what was charged.
    let spent = &a.status()["spent"];
    assert!(spent["tokens"].as_u64().unwrap() > 0, "{spent}");
}

#[test]
fn codex_records_its_iteration_through_exec_command_outside_a_git_repository() {
    let Some(a) = Agents::new(&["codex"], 10) else {
        return;
    };
    let standin = StandIn::new(vec![Reply::shell(RECORD), Reply::Text("Recorded.")]);
    // The project root is no git repository: the launch line's
    // --skip-git-repo-check is what lets Codex 0.171 run there at all.
    assert!(!a.root.join(".git").exists());
    let url = format!("{}/v1", standin.url);
    let output = a.drive(
        "codex",
        &["--max-iterations", "1"],
        &[
            ("AAS_AUTOLOOP_CODEX_BASE_URL", &url),
            ("OPENAI_API_KEY", "sk-standin-not-a-key"),
        ],
    );
    let stderr = a.ended(&output, 0, &["advanced"], &[1]);
    assert_eq!(standin.turns(), 2, "an exec call, then the closing text");
    // Codex reports tokens (its turn.completed usage), never a price.
    let spent = &a.status()["spent"];
    assert_eq!(
        spent["tokens"].as_u64(),
        Some(2 * (INPUT_TOKENS + OUTPUT_TOKENS)),
        "{spent}"
    );
    assert_eq!(spent["usd"].as_f64(), Some(0.0), "{spent}");
    assert!(!stderr.contains("warning:"), "a qualified codex: {stderr}");
}

#[test]
fn codex_with_a_refused_key_is_auth_and_drive_goes_on_with_claude() {
    let Some(a) = Agents::new(&["codex", "claude"], 10) else {
        return;
    };
    let refused = StandIn::new(vec![
        Reply::Error {
            status: 401,
            headers: vec![],
            body: r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}"#,
        };
        // Codex would reconnect five times before it gave up.
        6
    ]);
    let working = StandIn::new(vec![Reply::shell(RECORD), Reply::Text("Recorded.")]);
    let codex_url = format!("{}/v1", refused.url);
    let output = a.drive(
        "codex,claude",
        &["--max-iterations", "2"],
        &[
            ("AAS_AUTOLOOP_CODEX_BASE_URL", &codex_url),
            ("AAS_AUTOLOOP_CLAUDE_BASE_URL", &working.url),
            ("OPENAI_API_KEY", "sk-standin-not-a-key"),
        ],
    );
    let stderr = a.ended(&output, 0, &["failed:auth", "advanced"], &[1]);
    assert!(
        stderr.contains("codex excluded for this run (auth_or_session_dead); switching to claude"),
        "{stderr}"
    );
    // Codex's reconnects were read as they came: its third went past the
    // default --max-cli-retries (2), and no fourth request was made.
    let attempts: Vec<u64> = common::journal_events(&a.f.dir, "driver.retrying")
        .iter()
        .map(|e| e["retry"]["attempt"].as_u64().unwrap())
        .collect();
    assert_eq!(attempts, [1, 2, 3], "{stderr}");
    assert_eq!(refused.turns(), 3, "{stderr}");
}

#[test]
fn a_usage_limit_is_quota_and_the_driver_backs_off_then_resumes_charging_once() {
    let Some(a) = Agents::new(&["claude"], 10) else {
        return;
    };
    let standin = StandIn::new(vec![
        Reply::Error {
            status: 429,
            headers: vec![
                ("retry-after", "1"),
                ("anthropic-ratelimit-requests-reset", "2030-01-01T00:00:00Z"),
            ],
            body: r#"{"type":"error","error":{"type":"rate_limit_error","message":"Number of requests has exceeded your rate limit"}}"#,
        },
        Reply::shell(RECORD),
        Reply::Text("Recorded."),
    ]);
    let [(name, url)] = claude_endpoint(&standin);
    let output = a.drive(
        "claude",
        &["--max-iterations", "2", "--quota-backoff", "1"],
        // One attempt per turn: the driver, not the CLI, waits (below).
        &[(name, &url), ("CLAUDE_CODE_MAX_RETRIES", "0")],
    );
    let stderr = a.ended(&output, 0, &["failed:quota", "advanced"], &[1]);
    assert!(
        stderr.contains("quota signal 1 from claude; backing off 1s"),
        "{stderr}"
    );
    // Charged what each turn reported, once: nothing for the refused one.
    let usd = claude_reported_usd(&a.logs());
    assert!(usd > 0.0);
    assert_eq!(a.status()["spent"]["usd"].as_f64(), Some(usd));
}

/// A usage limit Claude Code retries by itself (ten times, minutes in all):
/// the driver reads its `api_retry` events as they arrive, shows them in
/// `status` while the turn runs, and past `--max-cli-retries` ends the
/// turn as QUOTA; the quota path then backs off and the next turn records.
#[test]
fn a_cli_retrying_a_usage_limit_is_shown_then_cut_short_as_quota() {
    let Some(a) = Agents::new(&["claude"], 10) else {
        return;
    };
    let limited = Reply::Error {
        status: 429,
        headers: vec![
            ("retry-after", "1"),
            ("anthropic-ratelimit-requests-reset", "2030-01-01T00:00:00Z"),
        ],
        body: r#"{"type":"error","error":{"type":"rate_limit_error","message":"Number of requests has exceeded your rate limit"}}"#,
    };
    let mut script = vec![limited; 3];
    script.extend([Reply::shell(RECORD), Reply::Text("Recorded.")]);
    let standin = StandIn::new(script);
    let [(name, url)] = claude_endpoint(&standin);
    let started = Instant::now();
    let mut drive = a
        .drive_command(
            "claude",
            &[
                "--max-iterations",
                "2",
                "--quota-backoff",
                "1",
                "--max-cli-retries",
                "2",
            ],
            // Claude Code's own retries as it ships them (ten).
            &[(name, &url), ("CLAUDE_CODE_MAX_RETRIES", "")],
        )
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // While the turn runs, status shows the CLI's retry.
    let mut shown = None;
    while drive.try_wait().unwrap().is_none() && shown.is_none() {
        let status = a.status();
        if let Some(retry) = status["driver"].get("retrying") {
            let text = a.f.loopx().args(["status", "--dir", a.f.d()]).output();
            let text = String::from_utf8_lossy(&text.unwrap().stdout).into_owned();
            shown = Some((retry.clone(), text));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = drive.wait_with_output().unwrap();
    let (retry, text) = shown.expect("status never showed the CLI's retry");
    assert_eq!(retry["status"], 429, "{retry}");
    assert_eq!(retry["error"], "rate_limit", "{retry}");
    assert!(text.contains("its CLI on retry"), "{text}");
    let stderr = a.ended(&output, 0, &["failed:quota", "advanced"], &[1]);
    // Three retries seen, once each; the third went past the policy.
    let attempts: Vec<u64> = common::journal_events(&a.f.dir, "driver.retrying")
        .iter()
        .map(|e| e["retry"]["attempt"].as_u64().unwrap())
        .collect();
    assert_eq!(attempts, [1, 2, 3], "{stderr}");
    assert_eq!(
        standin.turns(),
        3 + 2,
        "no fourth 429 was asked for: {stderr}"
    );
    let settled = common::journal_events(&a.f.dir, "driver.settled");
    let note = settled[0]["settlement"]["note"].as_str().unwrap();
    assert!(note.contains("--max-cli-retries"), "{note}");
    assert!(stderr.contains("quota signal 1 from claude"), "{stderr}");
    // Within seconds, not the minutes of Claude Code's own retries.
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(a.survivors(), Vec::<String>::new());
}

#[test]
fn an_overload_mid_stream_is_retried_by_claude_code_within_the_turn() {
    let Some(a) = Agents::new(&["claude"], 10) else {
        return;
    };
    let standin = StandIn::new(vec![
        Reply::BrokenStream(
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        ),
        Reply::shell(RECORD),
        Reply::Text("Recorded."),
    ]);
    let [(name, url)] = claude_endpoint(&standin);
    let output = a.drive(
        "claude",
        &["--max-iterations", "1"],
        &[(name, &url), ("CLAUDE_CODE_MAX_RETRIES", "0")],
    );
    // Even with its retries off, Claude Code asks again after a broken
    // stream: the driver sees one turn that advanced, nothing to classify.
    a.ended(&output, 0, &["advanced"], &[1]);
    assert_eq!(
        standin.turns(),
        3,
        "the broken stream, the shell call, the text"
    );
}

#[test]
fn a_turn_that_ends_without_recording_is_a_no_advance_failure() {
    let Some(a) = Agents::new(&["claude"], 10) else {
        return;
    };
    let standin = StandIn::new(vec![Reply::Text("All done, nothing to record.")]);
    let [(name, url)] = claude_endpoint(&standin);
    let output = a.drive("claude", &["--max-failures", "1"], &[(name, &url)]);
    let stderr = a.ended(&output, 3, &["no_advance"], &[]);
    assert!(
        stderr.contains("the agent exited 0 without recording an iteration"),
        "{stderr}"
    );
    // What the turn cost is charged all the same.
    assert!(a.status()["spent"]["usd"].as_f64().unwrap() > 0.0);
}

#[test]
fn a_hanging_model_api_times_the_turn_out_and_kills_its_whole_process_group() {
    let Some(a) = Agents::new(&["claude"], 10) else {
        return;
    };
    let standin = StandIn::new(vec![Reply::Hang]);
    let [(name, url)] = claude_endpoint(&standin);
    let started = Instant::now();
    let output = a.drive(
        "claude",
        &["--iteration-timeout", "8", "--max-failures", "1"],
        &[(name, &url)],
    );
    let stderr = a.ended(&output, 3, &["timed_out"], &[]);
    assert!(started.elapsed() < Duration::from_secs(60));
    assert!(stderr.contains("ran past --iteration-timeout"), "{stderr}");
    assert_eq!(standin.turns(), 1, "the CLI reached the model API");
    assert_eq!(a.survivors(), Vec::<String>::new());
}

#[test]
fn claude_as_root_without_a_sandbox_is_a_configuration_error_saying_what_to_do() {
    if !is_root() {
        // Not root: Claude Code accepts its flags; nothing to refuse.
        return;
    }
    let Some(a) = Agents::new(&["claude"], 10) else {
        return;
    };
    let standin = StandIn::new(vec![]);
    let [(name, url)] = claude_endpoint(&standin);
    // No IS_SANDBOX: what a root machine that is not a sandbox has.
    let output = a.drive("claude", &[], &[(name, &url), ("IS_SANDBOX", "")]);
    let stderr = a.ended(&output, 2, &["failed:configuration"], &[]);
    assert!(
        stderr.contains("as root: run drive as another user, or set IS_SANDBOX=1"),
        "{stderr}"
    );
    let version = format!("claude {}", cli_version(&a.clis.join("claude")));
    assert!(stderr.contains(&version), "{version} in {stderr}");
    assert_eq!(standin.turns(), 0);
}

/// The version `binary --version` prints first (`2.1.197 (Claude Code)`).
fn cli_version(binary: &Path) -> String {
    let output = Command::new(binary).arg("--version").output().unwrap();
    String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .next()
        .unwrap_or("")
        .to_owned()
}

#[test]
fn an_endpoint_setting_no_cli_can_honour_stops_drive_before_any_turn() {
    // Needs no agent CLI: the setting is refused before one is looked for.
    let f = Fixture::new();
    f.init(3, &[]);
    let before = f.fingerprint();
    for (provider, variable, url, says) in [
        (
            "copilot",
            "AAS_AUTOLOOP_COPILOT_BASE_URL",
            "http://127.0.0.1:9",
            "knows no way to point copilot at another endpoint",
        ),
        (
            "claude",
            "AAS_AUTOLOOP_CLAUDE_BASE_URL",
            "127.0.0.1:9",
            "is not an http:// or https:// URL",
        ),
    ] {
        let output = f
            .loopx()
            .args(["drive", "--dir", f.d(), "--provider", provider])
            .env(variable, url)
            .output()
            .unwrap();
        let stderr = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains(variable) && stderr.contains(says),
            "{stderr}"
        );
    }
    // Refused before the driver registered: nothing changed.
    assert_eq!(f.fingerprint(), before);
}

#[test]
fn an_armed_loops_stop_hook_holds_a_claude_session_once_then_releases_it() {
    // Not a drive: an interactive-style `claude -p` in a project where
    // `loopx install` put the Stop hook, with the loop armed for it.
    let Some(a) = Agents::new(&["claude"], 10) else {
        return;
    };
    // The Stop hook in the project, and the loop armed for it.
    a.install_and_arm("claude", &[]);
    let standin = StandIn::new(vec![
        Reply::Text("I am finished."),
        Reply::Text("Understood, stopping now."),
    ]);
    let output = a
        .claude(&standin)
        .args([
            "-p",
            "Finish the task.",
            "--output-format",
            "stream-json",
            "--verbose",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}{}", stderr(&output));
    // Held once: the model was asked again, with loopx's reason; then
    // released (the second stop carries stop_hook_active), so no third turn.
    assert_eq!(standin.turns(), 2, "{stdout}");
    let asked = &standin.requests()[1]["messages"];
    let feedback = asked.as_array().unwrap().last().unwrap().to_string();
    for says in [
        "Stop hook feedback",
        "Autoloop is active and not finished",
        a.f.d(),
    ] {
        assert!(feedback.contains(says), "{says} in {feedback}");
    }
}

/// The Stop hook `loopx install --target codex` writes, through the real
/// Codex: untrusted, Codex never runs it (the trust step install and
/// doctor name is a person's); once trusted (the record Codex's hook
/// review writes), the armed loop holds the session once with loopx's
/// reason, then releases it on `stop_hook_active`.
#[test]
fn an_armed_loops_stop_hook_holds_a_codex_session_once_then_releases_it() {
    let Some(a) = Agents::new(&["codex"], 10) else {
        return;
    };
    // User scope: Codex reads $CODEX_HOME's hooks without project trust.
    a.install_and_arm("codex", &["--user"]);
    let hooks = a.home.join(".codex/hooks.json");
    assert!(
        std::fs::read_to_string(&hooks)
            .unwrap()
            .contains("hook-check"),
        "no Stop hook in {}",
        hooks.display()
    );
    // Untrusted: doctor says the step, and the session ends at once, the
    // hook never run.
    let untrusted = codex_user_install(&a);
    assert!(
        untrusted["warning"]
            .as_str()
            .is_some_and(|w| w.contains("only once you trust it")),
        "{untrusted}"
    );
    let standin = StandIn::new(vec![Reply::Text("I am finished.")]);
    let output = a
        .codex_exec(&standin)
        .arg("Finish the task.")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(standin.turns(), 1, "an untrusted hook ran");
    // Trusted as Codex's hook review trusts it: the hash Codex computes,
    // recorded under the key loopx reads (Codex's own app server lists
    // both).
    let (key, hash) = codex_listed_hook(&a);
    assert_eq!(key, format!("{}:stop:0:0", hooks.display()));
    let config = a.home.join(".codex/config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap_or_default();
    text.push_str(&format!(
        "\n[hooks.state.\"{key}\"]\ntrusted_hash = \"{hash}\"\n"
    ));
    std::fs::write(&config, text).unwrap();
    let trusted = codex_user_install(&a);
    assert!(trusted["warning"].is_null(), "{trusted}");
    // Held once, then released.
    let standin = StandIn::new(vec![
        Reply::Text("I am finished."),
        Reply::Text("Understood, stopping now."),
    ]);
    let output = a
        .codex_exec(&standin)
        .arg("Finish the task.")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}{}", stderr(&output));
    assert_eq!(standin.turns(), 2, "{stdout}");
    let asked = standin.requests()[1]["input"].to_string();
    for says in [
        "hook_prompt",
        "Autoloop is active and not finished",
        a.f.d(),
    ] {
        assert!(asked.contains(says), "{says} in {asked}");
    }
}

/// `loopx doctor`'s check of the Codex user install in the scratch HOME.
fn codex_user_install(a: &Agents) -> Value {
    let output =
        a.f.loopx()
            .args(["doctor", "--json", "--dir", a.f.d()])
            .current_dir(&a.root)
            .env("HOME", &a.home)
            .env_remove("CODEX_HOME")
            .output()
            .unwrap();
    let doctor: Value = serde_json::from_slice(&output.stdout).unwrap();
    doctor["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "install.codex.user")
        .unwrap_or_else(|| panic!("no install.codex.user in {doctor:#}"))
        .clone()
}

/// The key and current hash of the one Stop hook Codex's app server
/// lists for the scratch project (`hooks/list` over its stdio JSON-RPC).
fn codex_listed_hook(a: &Agents) -> (String, String) {
    use std::io::{BufRead as _, Write as _};
    let mut server = a
        .by_hand("codex")
        .arg("app-server")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut input = server.stdin.take().unwrap();
    let root = a.root.display().to_string();
    for message in [
        serde_json::json!({"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "loopx-tests", "version": "0"}}}),
        serde_json::json!({"method": "initialized"}),
        serde_json::json!({"id": 2, "method": "hooks/list", "params": {"cwds": [root]}}),
    ] {
        writeln!(input, "{message}").unwrap();
    }
    let mut lines = std::io::BufReader::new(server.stdout.take().unwrap()).lines();
    let listed = loop {
        let reply: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
        if reply["id"] == 2 {
            break reply;
        }
    };
    let _ = server.kill();
    let _ = server.wait();
    let hooks = &listed["result"]["data"][0]["hooks"];
    assert_eq!(hooks.as_array().map(Vec::len), Some(1), "{listed}");
    assert_eq!(hooks[0]["trustStatus"], "untrusted", "{listed}");
    (
        hooks[0]["key"].as_str().unwrap().to_owned(),
        hooks[0]["currentHash"].as_str().unwrap().to_owned(),
    )
}

#[test]
fn ci_and_the_fixture_script_install_the_versions_the_table_qualifies() {
    use loopx_core::driver::provider::{CLAUDE_QUALIFIED, CODEX_QUALIFIED, OPENCODE_QUALIFIED};
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let ci = std::fs::read_to_string(repo.join(".ci/run")).unwrap();
    for pin in [
        format!("@anthropic-ai/claude-code@{CLAUDE_QUALIFIED}"),
        format!("@openai/codex@{CODEX_QUALIFIED}"),
        format!("opencode-ai@{OPENCODE_QUALIFIED}"),
    ] {
        assert!(ci.contains(&pin), ".ci/run does not install {pin}");
    }
    let script = std::fs::read_to_string(repo.join("scripts/record-agent-fixtures")).unwrap();
    let pins =
        format!("CLAUDE={CLAUDE_QUALIFIED} CODEX={CODEX_QUALIFIED} OPENCODE={OPENCODE_QUALIFIED}");
    assert!(
        script.contains(&pins),
        "record-agent-fixtures does not pin {pins}"
    );
}

#[test]
fn agent_cmd_shows_the_endpoint_setting_as_a_turn_gets_it() {
    // Needs no agent CLI: printing a command runs nothing.
    let f = Fixture::new();
    f.init(3, &[]);
    let agent_cmd = |provider: &str, variable: &str, url: &str| {
        let output = f
            .loopx()
            .args(["agent-cmd", "--dir", f.d(), "--provider", provider])
            .args(["--print-prompt", "--json"])
            .env(variable, url)
            .output()
            .unwrap();
        let json: Value = serde_json::from_slice(&output.stdout).unwrap();
        (json, stderr(&output))
    };
    let (claude, _) = agent_cmd(
        "claude",
        "AAS_AUTOLOOP_CLAUDE_BASE_URL",
        "http://127.0.0.1:9",
    );
    assert_eq!(claude["env"]["ANTHROPIC_BASE_URL"], "http://127.0.0.1:9");
    let (codex, _) = agent_cmd(
        "codex",
        "AAS_AUTOLOOP_CODEX_BASE_URL",
        "http://127.0.0.1:9/v1",
    );
    let argv = codex["argv"].to_string();
    assert!(
        argv.contains("model_provider=\\\"loopx_endpoint\\\"") && !argv.contains("\\\"openai\\\""),
        "{argv}"
    );
    let (copilot, warned) = agent_cmd("copilot", "AAS_AUTOLOOP_COPILOT_BASE_URL", "http://x");
    assert!(copilot["endpoint_error"]
        .as_str()
        .unwrap()
        .contains("knows no way to point copilot"));
    assert!(warned.contains("would exit 2"), "{warned}");
}

/// Each pinned CLI's `--help` (for Codex, `exec --help`) names every
/// prompt-only flag trusted-local gives its reviewers: a CLI update that
/// drops one fails here, not in a reviewer that quietly keeps its tools.
#[test]
fn the_prompt_only_reviewer_flags_are_ones_each_pinned_cli_knows() {
    let Some(clis) = std::env::var_os("LOOPX_AGENT_CLIS").map(PathBuf::from) else {
        common::skipped_without("LOOPX_AGENT_CLIS is not set");
        return;
    };
    for (cli, help) in [
        ("claude", &["--help"][..]),
        ("codex", &["exec", "--help"][..]),
    ] {
        let out = Command::new(clis.join(cli)).args(help).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let flags = loopx_core::containment::prompt_only_flags(cli);
        assert!(!flags.is_empty(), "{cli} has no prompt-only flags");
        for flag in flags.iter().filter(|f| f.starts_with("--")) {
            assert!(
                text.contains(flag),
                "{cli} {} does not know {flag}",
                help.join(" ")
            );
        }
    }
}

/// A reviewer with the prompt-only flags, through the real Claude Code:
/// it answers, and the model is offered no tool at all (no shell, no
/// files, no MCP server).
#[test]
fn a_prompt_only_claude_reviewer_offers_the_model_no_tool() {
    let Some(a) = Agents::new(&["claude"], 10) else {
        return;
    };
    let standin = StandIn::new(vec![Reply::Text("Reviewed: pass.")]);
    let output = a
        .claude(&standin)
        .args([
            "-p",
            "Review this.",
            "--output-format",
            "stream-json",
            "--verbose",
        ])
        .args(loopx_core::containment::prompt_only_flags("claude"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}{}", stderr(&output));
    // Claude Code says what it loaded: no tool, no MCP server.
    let init: Value = stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|event| event["subtype"] == "init")
        .unwrap_or_else(|| panic!("no init event: {stdout}"));
    assert_eq!(init["tools"], serde_json::json!([]), "{init}");
    assert_eq!(init["mcp_servers"], serde_json::json!([]), "{init}");
    // The review went out offering no tool: the stand-in answered it as a
    // side call, and no request offered one.
    assert!(
        !standin.side_calls().is_empty(),
        "the model was never asked: {stdout}"
    );
    assert_eq!(standin.turns(), 0, "a request offered the model tools");
}
