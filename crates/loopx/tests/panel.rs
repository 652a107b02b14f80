//! The review panel through the real binary, with fake reviewers: shell
//! scripts named like providers (`codex` of the openai family, `codewhale`
//! of deepseek, `claude` of anthropic) on a test PATH. The executor of
//! every staged candidate is claude, so claude never reviews.

mod common;
#[path = "../../loopx-store/tests/support/pg_server.rs"]
mod pg_server;

use common::{journal_events, require_failpoints, Fixture};
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

const CONSENT: &str = "AAS_AUTOLOOP_EXTERNAL_PANEL_EGRESS";

/// The flags that make [`common::STAGE_BY_HAND`] claude's iteration that
/// claims c1 on notes/b.md and moves o1.
const CLAIMING_C1: [&str; 6] = [
    "--obligation-id",
    "o1",
    "--claim-id",
    "c1",
    "--claim-evidence",
    "c1=notes/b.md",
];

/// A review answering with `verdict` for the fingerprint the brief leads
/// with, as `provider`.
fn answer(provider: &str, verdict: &str) -> String {
    let (claim, obligation) = match verdict {
        "pass" => ("supported", "met"),
        _ => ("unsupported", "unmet"),
    };
    format!(
        r#"fp=$(printf '%s' "$*" | grep -o 'sha256:[0-9a-f]\{{64\}}' | head -n1)
echo "Reviewed. My answer:"
echo '```json'
echo "{{\"schema\":\"result_review.v1\",\"candidate_fingerprint\":\"$fp\",\"reviewer\":{{\"provider\":\"{provider}\"}},\"verdict\":\"{verdict}\",\"claims\":[{{\"claim_id\":\"c1\",\"status\":\"{claim}\",\"evidence_paths\":[\"notes/b.md\"]}}],\"obligations\":[{{\"obligation_id\":\"o1\",\"status\":\"{obligation}\",\"evidence_paths\":[\"notes/b.md\"]}}],\"inspected_paths\":[\"notes/b.md\"],\"summary\":\"checked\"}}"
echo '```'"#
    )
}

struct Panel {
    f: Fixture,
    bin: PathBuf,
    project: PathBuf,
}

impl Panel {
    /// An enforce-mode loop with one evidence file and an empty test PATH.
    fn new() -> Panel {
        let f = Fixture::new();
        f.init(5, &["--goal-focus-mode", "enforce"]);
        Panel::around(f)
    }

    /// [`Panel::new`] with a reviewed, active direction: what the driver
    /// needs before it dispatches a turn in enforce mode.
    fn directed() -> Panel {
        let p = Panel::new();
        p.f.reviewed_direction();
        p
    }

    /// [`Panel::new`] around a fixture whose loop is initialized.
    fn around(f: Fixture) -> Panel {
        std::fs::create_dir_all(f.dir.join("notes")).unwrap();
        std::fs::write(f.dir.join("notes/b.md"), "lemma B holds for n <= 4\n").unwrap();
        let bin = f.temp.path().join("bin");
        let project = f.temp.path().join("project");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&project).unwrap();
        Panel { f, bin, project }
    }

    /// A fake reviewer `name` that notes each launch in `<name>.launched`,
    /// then runs `body`.
    fn reviewer(&self, name: &str, body: &str) {
        let marker = self.marker(name);
        self.script(
            name,
            &format!("echo launched >> '{}'\n{body}", marker.display()),
        );
    }

    /// A stand-in CLI answers `--version` as the real ones do (the driver
    /// asks it once per run, before the first turn), without running
    /// `body`.
    fn script(&self, name: &str, body: &str) {
        let path = self.bin.join(name);
        let version = "[ \"$1\" = --version ] && { echo '0.0.0 (stand-in)'; exit 0; }";
        std::fs::write(&path, format!("#!/bin/sh\n{version}\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn marker(&self, name: &str) -> PathBuf {
        self.f.temp.path().join(format!("{name}.launched"))
    }

    /// How many times reviewer `name` was launched.
    fn launches(&self, name: &str) -> usize {
        std::fs::read_to_string(self.marker(name))
            .map(|t| t.lines().count())
            .unwrap_or(0)
    }

    fn panel_json(&self, json: &str) {
        std::fs::write(self.f.dir.join("panel.json"), json).unwrap();
    }

    /// Stage claude's iteration claiming c1 on notes/b.md, moving o1.
    fn stage(&self) -> String {
        let staged = self.f.json(
            &[
                &common::STAGE_BY_HAND[..],
                &CLAIMING_C1,
                &["--dir", self.f.d()],
            ]
            .concat(),
        );
        assert_eq!(staged["state"], "pending_review", "{staged}");
        staged["candidate_fingerprint"].as_str().unwrap().to_owned()
    }

    /// `loopx` with only the fake reviewers and the system on PATH, and
    /// consent given.
    fn loopx(&self, args: &[&str]) -> Command {
        let mut command = Command::new(common::loopx_path());
        command
            .args(args)
            .env("PATH", format!("{}:/usr/bin:/bin", self.bin.display()))
            .env("LOOPX_REGISTRY_DIR", &self.f.registry)
            .env(CONSENT, "allow")
            // Fake provider scripts stand in for real ones (a test build only).
            .env("LOOPX_INJECTED_PROVIDERS", "1")
            .env_remove("LOOPX_DIR")
            .env_remove("AUTOLOOP_DRIVER")
            .env_remove("AAS_AUTOLOOP_PANEL")
            .env_remove("AAS_AUTOLOOP_PANEL_PROVIDERS");
        command
    }

    /// `loopx panel --phase result_review --json` with `extra` flags:
    /// (exit code, JSON, stderr).
    fn panel(&self, extra: &[&str], env: &[(&str, Option<&str>)]) -> (i32, Value, String) {
        let mut command = self.loopx(&[
            "panel",
            "--dir",
            self.f.d(),
            "--phase",
            "result_review",
            "--json",
        ]);
        command.args(extra);
        for (name, value) in env {
            match value {
                Some(value) => command.env(name, value),
                None => command.env_remove(name),
            };
        }
        let output = command.output().unwrap();
        (
            output.status.code().unwrap_or(-1),
            serde_json::from_slice(&output.stdout).unwrap_or(Value::Null),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }

    /// The panel run must be refused and leave the loop directory
    /// byte-for-byte unchanged; its error.
    fn refused(&self, env: &[(&str, Option<&str>)]) -> String {
        let before = self.f.fingerprint();
        let (code, json, stderr) = self.panel(&[], env);
        assert_eq!(code, 1, "{json} {stderr}");
        assert_eq!(json["status"], "failed", "{json}");
        assert_eq!(
            self.f.fingerprint(),
            before,
            "a refusal changed the loop ({stderr})"
        );
        stderr
    }

    fn status(&self) -> Value {
        self.f.json(&["status", "--dir", self.f.d()])
    }

    fn pending(&self) -> Value {
        self.f.json(&["goal-focus", "status", "--dir", self.f.d()])["candidate"]["pending"].clone()
    }
}

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn a_passing_review_banks_the_candidate_and_keeps_private_artifacts() {
    let p = Panel::new();
    p.reviewer("codex", &answer("codex", "pass"));
    p.reviewer("claude", &answer("claude", "pass"));
    let fingerprint = p.stage();
    let (code, view, stderr) = p.panel(&[], &[]);
    assert_eq!(code, 0, "{view} {stderr}");
    assert_eq!(view["state"], "banked_accepted", "{view}");
    assert_eq!(view["finalized"]["reviewer_provider"], "codex");
    assert_eq!(view["finalized"]["reviewer_family"], "openai");
    // Claude ran the iteration: it is never invited to review it.
    assert_eq!(p.launches("claude"), 0);
    let skipped = view["skipped"].to_string();
    assert!(skipped.contains("the executor's own family"), "{skipped}");
    let row = &p.status()["last_iteration"];
    assert_eq!(row["bank"]["status"], "accepted", "{row}");
    assert_eq!(row["bank"]["candidate_fingerprint"], fingerprint.as_str());
    let folder =
        p.f.dir
            .join("panel")
            .join(&fingerprint[7..19])
            .join("result_review");
    assert_eq!(mode(&p.f.dir.join("panel")), 0o700);
    for ext in ["prompt", "out", "json"] {
        let file = folder.join(format!("1-codex.{ext}"));
        assert_eq!(mode(&file), 0o600, "{}", file.display());
    }
    let prompt = std::fs::read_to_string(folder.join("1-codex.prompt")).unwrap();
    assert!(prompt.starts_with(&format!("Candidate fingerprint: {fingerprint}")));
    assert!(
        prompt.contains("lemma B holds for n <= 4"),
        "evidence embedded"
    );
    assert_eq!(p.pending(), Value::Null);
    p.f.assert_valid();
}

#[test]
fn a_failing_review_banks_the_candidate_as_rejected() {
    let p = Panel::new();
    p.reviewer("codex", &answer("codex", "fail"));
    p.stage();
    // The reference's command line (with --root) works as it is.
    let (code, view, stderr) = p.panel(&["--root", p.project.to_str().unwrap()], &[]);
    assert_eq!(code, 0, "{view} {stderr}");
    assert_eq!(view["state"], "banked_rejected", "{view}");
    assert_eq!(p.status()["last_iteration"]["bank"]["status"], "rejected");
    p.f.assert_valid();
}

#[test]
fn a_wrong_fingerprint_is_refused_by_the_judge_and_the_candidate_stays_pending() {
    let p = Panel::new();
    let wrong =
        answer("codex", "pass").replace("fp=$(", &format!("fp=sha256:{}; true $(", "0".repeat(64)));
    p.reviewer("codex", &wrong);
    let fingerprint = p.stage();
    let (code, view, _) = p.panel(&[], &[]);
    assert_eq!(code, 1, "{view}");
    assert_eq!(view["state"], "pending");
    assert_eq!(view["attempts"][0]["outcome"], "refused");
    let detail = view["attempts"][0]["detail"].as_str().unwrap();
    assert!(
        detail.contains("a review decides only the exact candidate"),
        "{detail}"
    );
    assert_eq!(p.status()["iterations"], 0);
    assert_eq!(p.status()["spent"]["iterations"], 0);
    assert_eq!(p.pending()["fingerprint"], fingerprint.as_str());
    p.f.assert_valid();
}

#[test]
fn malformed_output_is_refused_and_the_next_reviewer_is_tried() {
    let p = Panel::new();
    p.panel_json(r#"{"providers": ["codewhale", "codex"]}"#);
    p.reviewer("codewhale", "echo 'I think it is fine {verdict: pass}'");
    p.reviewer("codex", &answer("codex", "pass"));
    p.stage();
    let (code, view, stderr) = p.panel(&[], &[]);
    assert_eq!(code, 0, "{view} {stderr}");
    assert_eq!(view["attempts"][0]["provider"], "codewhale");
    assert_eq!(view["attempts"][0]["outcome"], "malformed");
    assert_eq!(view["attempts"][1]["provider"], "codex");
    assert_eq!(view["attempts"][1]["outcome"], "banked_accepted");
    assert_eq!(view["attempts_used"], 2);
    assert_eq!(p.launches("codewhale"), 1);
    p.f.assert_valid();
}

#[test]
fn a_reviewer_claiming_another_name_is_refused() {
    let p = Panel::new();
    // codex answers as if it were codewhale.
    p.reviewer("codex", &answer("codewhale", "pass"));
    p.stage();
    let (code, view, _) = p.panel(&[], &[]);
    assert_eq!(code, 1, "{view}");
    assert_eq!(view["attempts"][0]["outcome"], "refused");
    assert_eq!(p.status()["iterations"], 0);
}

fn alive(pid: u32) -> bool {
    // A zombie is dead for our purpose: it runs nothing.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.split(") ").nth(1).unwrap_or("").starts_with('Z'))
        .unwrap_or(false)
}

#[test]
fn a_reviewer_past_its_timeout_is_killed_with_its_children() {
    let p = Panel::new();
    p.panel_json(r#"{"timeout_mode": "fixed"}"#);
    let pids = p.f.temp.path().join("pids");
    p.reviewer(
        "codex",
        &format!(
            "sleep 300 &\necho $! >> '{0}'\necho $$ >> '{0}'\nsleep 300",
            pids.display()
        ),
    );
    p.stage();
    let started = Instant::now();
    let (code, view, stderr) = p.panel(&["--timeout", "2"], &[]);
    assert!(started.elapsed() < Duration::from_secs(60), "{stderr}");
    assert_eq!(code, 1, "{view}");
    assert_eq!(view["attempts"][0]["outcome"], "timed_out", "{view}");
    assert_eq!(view["attempts"][0]["timeout_s"], 2);
    let pids: Vec<u32> = std::fs::read_to_string(&pids)
        .unwrap()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 2);
    for pid in pids {
        assert!(!alive(pid), "process {pid} outlived its reviewer's timeout");
    }
    assert_eq!(p.status()["iterations"], 0);
    assert!(p.pending().is_object(), "the candidate stays pending");
}

#[test]
fn without_consent_nothing_is_spawned_and_nothing_changes() {
    let p = Panel::new();
    p.reviewer("codex", &answer("codex", "pass"));
    p.stage();
    let error = p.refused(&[(CONSENT, None)]);
    assert!(
        error.contains("AAS_AUTOLOOP_EXTERNAL_PANEL_EGRESS=allow"),
        "{error}"
    );
    let error = p.refused(&[(CONSENT, Some("yes"))]);
    assert!(error.contains("consent"), "{error}");
    assert_eq!(p.launches("codex"), 0);
    assert!(!p.f.dir.join("panel").exists());
}

#[test]
fn only_the_executors_family_on_the_list_invites_nobody() {
    let p = Panel::new();
    p.reviewer("claude", &answer("claude", "pass"));
    p.stage();
    let error = p.refused(&[("AAS_AUTOLOOP_PANEL_PROVIDERS", Some("claude"))]);
    assert!(error.contains("no reviewer can be invited"), "{error}");
    assert!(
        error.contains("the executor's own family (anthropic)"),
        "{error}"
    );
    assert_eq!(p.launches("claude"), 0);
    // An endpoint override makes every family unverified: fail closed.
    p.reviewer("codex", &answer("codex", "pass"));
    let error = p.refused(&[("OPENAI_BASE_URL", Some("https://proxy.example"))]);
    assert!(error.contains("no verified family"), "{error}");
    assert_eq!(p.launches("codex"), 0);
    // A typo in panel.json is refused, not defaulted.
    p.panel_json(r#"{"max_atempts": 1}"#);
    let error = p.refused(&[]);
    assert!(error.contains("max_atempts"), "{error}");
}

#[test]
fn the_attempt_cap_holds_across_runs() {
    let p = Panel::new();
    p.panel_json(r#"{"max_attempts": 2}"#);
    p.reviewer("codex", "echo 'no review today'");
    p.stage();
    for run in 1..=2 {
        let (code, view, _) = p.panel(&[], &[]);
        assert_eq!(code, 1, "{view}");
        assert_eq!(view["attempts"][0]["attempt"], run);
        assert_eq!(view["attempts_used"], run);
    }
    let error = p.refused(&[]);
    assert!(error.contains("already used its 2 attempts"), "{error}");
    assert_eq!(p.launches("codex"), 2);
    assert_eq!(journal_events(&p.f.dir, "panel.attempt_started").len(), 2);
    assert!(p.pending().is_object());
    p.f.assert_valid();
}

impl Panel {
    /// A fake `claude` agent that writes its evidence and stages its
    /// iteration, as a real agent would through the CLI.
    fn staging_agent(&self) {
        self.staging_agent_then("");
    }

    /// [`Panel::staging_agent`] that runs `after` once it has staged.
    fn staging_agent_then(&self, after: &str) {
        self.staging_agent_as("claude", "", after);
    }

    /// The staging agent as provider `provider`, its append given `flags`
    /// too, running `after` once it has staged.
    fn staging_agent_as(&self, provider: &str, flags: &str, after: &str) {
        let marker = self.marker("agent");
        self.script(
            provider,
            &format!(
                r#"echo turn >> '{}'
mkdir -p "$LOOPX_DIR/notes"
echo 'lemma B holds for n <= 4' > "$LOOPX_DIR/notes/b.md"
loopx append-iteration --mode bounded-research --objective "check lemma B" --decision continue --executor-provider {provider} --obligation-id o1 --claim-id c1 --claim-evidence c1=notes/b.md {flags} >/dev/null
{after}"#,
                marker.display()
            ),
        );
    }

    /// `loopx drive` on this loop with `provider` as the agent.
    fn drive_command(&self, provider: &str) -> Command {
        let mut command = self.loopx(&["drive", "--dir", self.f.d(), "--root"]);
        command.arg(&self.project).args(["--provider", provider]);
        command
    }

    fn drive(&self, extra: &[&str]) -> (i32, String) {
        let output = self.drive_command("claude").args(extra).output().unwrap();
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }
}

#[test]
fn drive_with_the_panel_on_reviews_each_staged_candidate_before_the_next_turn() {
    let p = Panel::directed();
    p.staging_agent();
    p.reviewer("codex", &answer("codex", "pass"));
    let (code, stderr) = p.drive(&["--panel", "on", "--max-iterations", "2"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(p.launches("agent"), 2, "{stderr}");
    assert_eq!(p.launches("codex"), 2, "{stderr}");
    let status = p.status();
    assert_eq!(status["iterations"], 2, "{status}");
    assert_eq!(status["last_iteration"]["bank"]["status"], "accepted");
    // The reviewer of each banked iteration is on record.
    let finished = journal_events(&p.f.dir, "panel.attempt_finished");
    assert_eq!(finished.len(), 2);
    assert!(finished.iter().all(|e| e["outcome"] == "banked_accepted"));
    let started = journal_events(&p.f.dir, "panel.attempt_started");
    assert!(
        started.iter().all(|e| e["provider"] == "codex"),
        "{started:?}"
    );
    p.f.assert_valid();
}

#[test]
fn a_turn_that_runs_out_of_time_after_staging_has_its_candidate_quarantined() {
    let p = Panel::directed();
    // The agent stages its iteration, then hangs past the turn's time.
    p.staging_agent_then("sleep 30");
    p.reviewer("codex", &answer("codex", "pass"));
    let (code, stderr) = p.drive(&["--panel", "on", "--iteration-timeout", "2"]);
    assert_eq!(code, 4, "{stderr}");
    assert!(stderr.contains("quarantined"), "{stderr}");
    assert_eq!(p.launches("agent"), 1);
    assert_eq!(
        p.launches("codex"),
        0,
        "a quarantined candidate is never reviewed"
    );
    assert_eq!(p.status()["iterations"], 0, "nothing banked");
    let held =
        p.f.json(&["goal-focus", "recover-quarantine", "--dir", p.f.d()]);
    let reason = held["quarantined"]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("ran out of time"), "{held}");
    // Across a restart: no review, no new turn.
    let (code, stderr) = p.drive(&["--panel", "on", "--iteration-timeout", "2"]);
    assert_eq!(code, 4, "{stderr}");
    assert_eq!(p.launches("agent"), 1);
    assert_eq!(p.launches("codex"), 0);
    p.f.assert_valid();
}

#[test]
fn a_turn_whose_output_held_a_credential_or_passed_its_cap_has_its_candidate_quarantined() {
    for (after, extra, says) in [
        (
            "echo 'debug: using ANTHROPIC_API_KEY=sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA'",
            &[][..],
            "its output held a credential",
        ),
        (
            "head -c 300000 /dev/zero | tr '\\0' x",
            &["--max-turn-output", "64K"][..],
            "its output passed the cap",
        ),
    ] {
        let p = Panel::directed();
        p.staging_agent_then(after);
        p.reviewer("codex", &answer("codex", "pass"));
        let mut args = vec!["--panel", "on"];
        args.extend(extra);
        let (code, stderr) = p.drive(&args);
        assert_eq!(code, 4, "{says}: {stderr}");
        assert!(stderr.contains("completion gate failed"), "{says}: {stderr}");
        assert_eq!(p.launches("codex"), 0, "{says}: a quarantined candidate is never reviewed");
        assert_eq!(p.status()["iterations"], 0, "{says}: nothing banked");
        let held = p.f.json(&["goal-focus", "recover-quarantine", "--dir", p.f.d()]);
        let reason = held["quarantined"]["reason"].as_str().unwrap_or_default();
        assert!(reason.contains(says), "{says}: {held}");
        assert!(!reason.contains("sk-ant-api03"), "the reason repeats the credential");
    }
}

#[test]
fn an_enforce_loop_dispatches_nothing_without_a_reviewed_direction() {
    let p = Panel::new();
    p.staging_agent();
    let (code, stderr) = p.drive(&["--panel", "off"]);
    assert_eq!(code, 4, "{stderr}");
    assert!(
        stderr.contains("pre-dispatch gate is closed (missing_plan)"),
        "{stderr}"
    );
    assert_eq!(p.launches("agent"), 0, "no turn without a direction");
    // A proposal nobody reviewed keeps it closed as well.
    let registry = p.f.json_file(
        "proposal.json",
        &serde_json::json!({"campaigns": [{"campaign_id": "direct", "approaches": [
            {"approach_id": "induction", "estimate": {"low": 0.6, "high": 0.9}}
        ]}]}),
    );
    p.f.focus_ok(&["revise", "--registry", &registry]);
    p.f.focus_ok(&["replan"]);
    let (code, stderr) = p.drive(&["--panel", "off"]);
    assert_eq!(code, 4, "{stderr}");
    assert!(stderr.contains("plan_not_active"), "{stderr}");
    assert_eq!(p.launches("agent"), 0);
    // Reviewed, it opens: one turn runs (and its candidate awaits review).
    p.f.reviewed_direction();
    let (code, stderr) = p.drive(&["--panel", "off"]);
    assert_eq!(code, 4, "{stderr}");
    assert!(stderr.contains("awaits its result review"), "{stderr}");
    assert_eq!(p.launches("agent"), 1);
}

#[test]
fn a_provider_of_another_family_than_the_reviewed_one_runs_no_turn() {
    // The direction was reviewed for claude's turns; codex is a failover
    // to another family, which needs a replan and its review.
    let p = Panel::directed();
    p.reviewer("codex", "echo 'a turn'");
    let output = p
        .drive_command("codex")
        .args(["--panel", "off"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains("needs a replan"), "{stderr}");
    assert_eq!(p.launches("codex"), 0, "no turn of the other family ran");
}

#[test]
fn drive_stops_with_exit_4_when_the_panel_finds_no_usable_review() {
    let p = Panel::directed();
    p.panel_json(r#"{"enabled": true, "max_attempts": 1}"#);
    p.staging_agent();
    p.reviewer("codex", "echo 'cannot decide'");
    // `auto` follows panel.json's "enabled".
    let (code, stderr) = p.drive(&["--max-iterations", "3"]);
    assert_eq!(code, 4, "{stderr}");
    assert!(
        stderr.contains("no usable review after the panel's 1 attempts"),
        "{stderr}"
    );
    assert_eq!(
        p.launches("agent"),
        1,
        "no new work after the panel gave up"
    );
    assert_eq!(p.launches("codex"), 1);
    assert_eq!(p.status()["iterations"], 0);
    assert!(p.pending().is_object());
    // Without consent the driver starts no reviewer and says why.
    let p = Panel::directed();
    p.staging_agent();
    p.reviewer("codex", &answer("codex", "pass"));
    let output = p
        .drive_command("claude")
        .args(["--panel", "on"])
        .env_remove(CONSENT)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains(CONSENT), "{stderr}");
    assert_eq!(p.launches("codex"), 0);
}

#[test]
fn a_panel_killed_while_its_reviewer_runs_has_spent_that_attempt() {
    let p = Panel::new();
    let pid_file = p.f.temp.path().join("reviewer.pid");
    p.reviewer(
        "codex",
        &format!(
            "echo $$ > '{}.tmp'\nmv '{0}.tmp' '{0}'\nsleep 300",
            pid_file.display()
        ),
    );
    p.stage();
    let mut panel = p
        .loopx(&["panel", "--dir", p.f.d(), "--phase", "result_review"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !pid_file.exists() {
        assert!(Instant::now() < deadline, "the reviewer never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    panel.kill().unwrap();
    panel.wait().unwrap();
    let orphan: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    kill_left_behind(orphan);
    // The killed run's attempt counts; the next run starts attempt 2.
    p.reviewer("codex", &answer("codex", "pass"));
    let (code, view, stderr) = p.panel(&[], &[]);
    assert_eq!(code, 0, "{view} {stderr}");
    assert_eq!(view["attempts"][0]["attempt"], 2);
    assert_eq!(journal_events(&p.f.dir, "panel.attempt_started").len(), 2);
    assert_eq!(journal_events(&p.f.dir, "panel.attempt_finished").len(), 1);
    assert_eq!(p.status()["iterations"], 1);
    p.f.assert_valid();
}

/// SIGKILL a process the test left behind.
fn kill_left_behind(pid: i32) {
    let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
}

#[test]
fn a_flooding_reviewer_is_captured_up_to_one_mebibyte() {
    let p = Panel::new();
    p.reviewer(
        "codex",
        &format!(
            "head -c 3145728 /dev/zero | tr '\\0' x\n{}",
            answer("codex", "pass")
        ),
    );
    let fingerprint = p.stage();
    let (code, view, stderr) = p.panel(&[], &[]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(view["attempts"][0]["outcome"], "malformed", "{view}");
    let out =
        p.f.dir
            .join("panel")
            .join(&fingerprint[7..19])
            .join("result_review/1-codex.out");
    let stored = std::fs::read_to_string(out).unwrap();
    assert!(
        stored.len() < (1 << 20) + 200,
        "{} bytes stored",
        stored.len()
    );
    assert!(stored.contains("output cut at 1048576 bytes"));
    assert_eq!(p.status()["iterations"], 0);
}

#[test]
fn a_brief_too_long_for_argv_launches_nobody_and_spends_no_attempt() {
    let p = Panel::new();
    p.reviewer("codex", &answer("codex", "pass"));
    let big = "lemma B holds for n <= 4\n".repeat(200 * 1024 / 25);
    std::fs::write(p.f.dir.join("notes/b.md"), big).unwrap();
    p.stage();
    let (code, view, _) = p.panel(&[], &[]);
    assert_eq!(code, 1, "{view}");
    assert_eq!(view["attempts_used"], 0);
    assert!(view["skipped"].to_string().contains("argv word"), "{view}");
    assert_eq!(p.launches("codex"), 0);
    assert!(journal_events(&p.f.dir, "panel.attempt_started").is_empty());
}

impl Panel {
    /// A replan proposed a direction that awaits a strategy review (an
    /// experiment between two overlapping approaches).
    fn proposed(&self) {
        let approach = |id: &str, low: f64, high: f64| serde_json::json!({"approach_id": id, "estimate": {"low": low, "high": high}});
        let registry = serde_json::json!({"campaigns": [
            {"campaign_id": "direct", "approaches": [approach("induction", 0.4, 0.9)]},
            {"campaign_id": "search", "approaches": [approach("counterexample", 0.3, 0.6)]}
        ]});
        let file = self.f.json_file("registry.json", &registry);
        self.f.focus_ok(&["revise", "--registry", &file]);
        let plan = self.f.focus_ok(&["replan"]);
        assert_eq!(plan["plan"]["review"], "strategy_review_required");
    }

    /// A fake reviewer `name` whose answer is an advice with `verdict`
    /// (bound to the plan awaiting review, as `strategy-brief` shows it),
    /// followed by `more`.
    fn strategy_reviewer(&self, name: &str, verdict: &str, more: &str) {
        let brief = self.f.focus_ok(&["strategy-brief", "--executor", "claude"]);
        let advice = serde_json::json!({
            "schema": "strategy_advice.v1",
            "reviewer": {"provider": name},
            "reviewed": brief["brief"]["bind"],
            "verdict": verdict,
            "rationale": "two overlapping leaders: one iteration each tells them apart"
        });
        let file = self.f.json_file(&format!("{name}-advice.json"), &advice);
        self.reviewer(name, &format!("echo 'My advice:'\ncat '{file}'\n{more}"));
    }
}

#[test]
fn a_strategy_review_by_the_panel_commits_the_reviewed_direction() {
    let p = Panel::new();
    p.proposed();
    p.strategy_reviewer("codex", "endorse", "");
    // Without a driver, the executor must be named: fail closed.
    let before = p.f.fingerprint();
    let output = p
        .loopx(&["panel", "--dir", p.f.d(), "--phase", "strategy_review"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--executor"));
    assert_eq!(p.f.fingerprint(), before);
    assert_eq!(p.launches("codex"), 0);
    let output = p
        .loopx(&[
            "panel",
            "--dir",
            p.f.d(),
            "--phase",
            "strategy_review",
            "--executor",
            "claude",
            "--json",
        ])
        .output()
        .unwrap();
    let view: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(output.status.code(), Some(0), "{view}");
    assert_eq!(view["state"], "committed", "{view}");
    assert_eq!(view["attempts"][0]["outcome"], "committed");
    let plan = &view["committed"]["plan"];
    assert_eq!(plan["state"], "active");
    assert_eq!(plan["review"], "reviewed");
    assert_eq!(plan["strategy_review"]["reviewer"]["provider"], "codex");
    assert_eq!(plan["strategy_review"]["executor"]["family"], "anthropic");
    assert_eq!(p.f.focus_ok(&["validate"])["status"], "ok");
    p.f.assert_valid();
}

#[test]
fn drive_with_the_panel_on_reviews_the_direction_before_the_first_turn() {
    let p = Panel::new();
    p.proposed();
    // One script answers both reviews: each phase reads its own schema.
    p.strategy_reviewer("codex", "endorse", &answer("codex", "pass"));
    p.staging_agent();
    let (code, stderr) = p.drive(&["--panel", "on", "--max-iterations", "1"]);
    assert_eq!(code, 0, "{stderr}");
    let strategy = stderr.find("strategy review").unwrap_or(usize::MAX);
    let turn = stderr.find("iteration 1 [claude] started").unwrap();
    assert!(strategy < turn, "the turn ran before the review: {stderr}");
    let status = p.f.focus_ok(&["status"]);
    assert_eq!(status["current_plan"]["state"], "active", "{status}");
    assert_eq!(status["current_plan"]["review"], "reviewed");
    assert_eq!(p.launches("agent"), 1);
    assert_eq!(p.launches("codex"), 2, "one strategy and one result review");
    assert_eq!(p.status()["last_iteration"]["bank"]["status"], "accepted");
    p.f.assert_valid();
}

#[test]
fn the_panel_works_the_same_on_postgresql_and_never_hands_a_reviewer_the_store() {
    let Some(url) = pg_server::database() else {
        return;
    };
    let f = Fixture::new();
    f.loopx()
        .args(["--store", url.as_str()])
        .args(f.init_words())
        .args(["--max-iterations", "5", "--goal-focus-mode", "enforce"])
        .assert()
        .success();
    let p = Panel::around(f);
    let seen = p.f.temp.path().join("reviewer.env");
    p.reviewer(
        "codex",
        &format!("env > '{}'\n{}", seen.display(), answer("codex", "pass")),
    );
    let run = |args: &[&str]| {
        let output = p
            .loopx(
                &[
                    &["--store", url.as_str()],
                    args,
                    &["--dir", p.f.d(), "--json"],
                ]
                .concat(),
            )
            .env("LOOPX_DIR", p.f.d())
            .output()
            .unwrap();
        let json: Value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
        assert!(
            output.status.success(),
            "{args:?}: {json} {}",
            String::from_utf8_lossy(&output.stderr)
        );
        json
    };
    run(&[&common::STAGE_BY_HAND[..], &CLAIMING_C1].concat());
    let view = run(&["panel", "--phase", "result_review"]);
    assert_eq!(view["state"], "banked_accepted", "{view}");
    assert_eq!(run(&["status"])["iterations"], 1);
    assert_eq!(run(&["validate"])["status"], "ok");
    let env = std::fs::read_to_string(&seen).unwrap();
    for withheld in ["LOOPX_STORE", "LOOPX_DIR", CONSENT, pg_server::PASSWORD] {
        assert!(!env.contains(withheld), "the reviewer saw {withheld}");
    }
}

#[test]
fn panel_and_drive_explain_the_panel_in_their_help() {
    let p = Panel::new();
    let help = |args: &[&str]| {
        let output = p.loopx(args).output().unwrap();
        assert!(output.status.success(), "{args:?}");
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let panel = help(&["panel", "--help"]);
    for needle in [
        "--phase",
        "--timeout",
        "--executor",
        "panel.json",
        CONSENT,
        "AAS_AUTOLOOP_PANEL_PROVIDERS",
    ] {
        assert!(panel.contains(needle), "{needle} missing: {panel}");
    }
    let drive = help(&["drive", "--help"]);
    assert!(drive.contains("--panel"), "{drive}");
    assert!(drive.contains("AAS_AUTOLOOP_PANEL=on"), "{drive}");
}

#[test]
fn a_requested_obligation_target_is_in_the_brief_and_a_review_stating_it_banks() {
    let p = Panel::new();
    p.f.with_obligations();
    let met = r#"\"status\":\"met\""#;
    let stated = answer("codex", "pass")
        .replace(met, r#"\"status\":\"met\",\"target_status\":\"satisfied\""#);
    assert_ne!(stated, answer("codex", "pass"));
    p.reviewer("codex", &stated);
    let staged = p.f.json(
        &[
            &common::STAGE_BY_HAND[..],
            &CLAIMING_C1,
            &["--obligation-target", "o1=satisfied", "--dir", p.f.d()],
        ]
        .concat(),
    );
    let fingerprint = staged["candidate_fingerprint"].as_str().unwrap().to_owned();
    let (code, view, stderr) = p.panel(&[], &[]);
    assert_eq!(code, 0, "{view} {stderr}");
    assert_eq!(view["state"], "banked_accepted");
    let prompt =
        p.f.dir
            .join("panel")
            .join(&fingerprint[7..19])
            .join("result_review/1-codex.prompt");
    let prompt = std::fs::read_to_string(prompt).unwrap();
    assert!(
        prompt.contains("o1 (requested target status: satisfied"),
        "{prompt}"
    );
    assert!(
        prompt.contains(r#""target_status": "satisfied""#),
        "{prompt}"
    );
}

/// Adaptive mode learns from the attempt ledger: a reviewer whose decisive
/// review took 1.2 s gets at least twice that on its next subject, though
/// the configured base is 2 s; the time is on record in the journal.
#[test]
fn a_reviewer_that_was_slow_gets_twice_its_time_on_the_next_subject() {
    let p = Panel::new();
    p.panel_json(
        r#"{"timeouts": {"result_review": 2}, "timeout_calc": {"min_s": 1, "max_s": 60}}"#,
    );
    p.reviewer("codex", &format!("sleep 1.2\n{}", answer("codex", "pass")));
    p.stage();
    let (code, first, stderr) = p.panel(&[], &[]);
    assert_eq!(code, 0, "{first} {stderr}");
    assert_eq!(first["state"], "banked_accepted", "{first}");
    assert_eq!(first["attempts"][0]["timeout_s"], 2, "{first}");
    let finished = journal_events(&p.f.dir, "panel.attempt_finished");
    let elapsed_ms = finished[0]["elapsed_ms"]
        .as_u64()
        .expect("elapsed on record");
    assert!(elapsed_ms >= 1200, "{finished:?}");
    p.stage();
    let (code, second, stderr) = p.panel(&[], &[]);
    assert_eq!(code, 0, "{second} {stderr}");
    let expected = (2 * elapsed_ms).div_ceil(1000);
    assert_eq!(second["attempts"][0]["timeout_s"], expected, "{second}");
    p.f.assert_valid();
}

/// `panel --smoke` sends each reviewer the panel would invite a fixed
/// prompt holding nothing of the loop, needs no consent, reports each
/// one's fate, honours panel.json, and leaves the loop untouched.
#[test]
fn the_smoke_test_reports_each_reviewer_and_leaves_the_loop_alone() {
    let p = Panel::new();
    p.panel_json(r#"{"exclude_until_credit": ["kimi"], "providers": ["codex", "claude", "codewhale", "kimi"]}"#);
    let said = p.f.temp.path().join("codex.args");
    p.reviewer(
        "codex",
        &format!("printf '%s\\n' \"$@\" > '{}'\necho 'PONG'", said.display()),
    );
    p.reviewer("claude", "echo 'usage limit reached'\nexit 3");
    p.reviewer("codewhale", "sleep 30");
    let before = p.f.fingerprint();
    let smoke = |extra: &[&str]| {
        let output = p
            .loopx(&[&["panel", "--smoke", "--dir", p.f.d(), "--json"][..], extra].concat())
            .env_remove(CONSENT)
            .output()
            .unwrap();
        (
            output.status.code().unwrap_or(-1),
            serde_json::from_slice::<Value>(&output.stdout).unwrap_or(Value::Null),
        )
    };
    let (code, view) = smoke(&["--timeout", "2"]);
    assert_eq!(code, 0, "{view}");
    let outcome = |provider: &str| {
        view["reviewers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["provider"] == provider)
            .map(|r| r["outcome"].clone())
    };
    assert_eq!(outcome("codex").unwrap(), "answered", "{view}");
    assert_eq!(outcome("claude").unwrap(), "failed", "{view}");
    assert_eq!(outcome("codewhale").unwrap(), "timed_out", "{view}");
    assert_eq!(outcome("kimi"), None, "excluded: {view}");
    assert!(view["skipped"].to_string().contains("exclude_until_credit"));
    assert!(view["reviewers"]
        .to_string()
        .contains("usage limit reached"));
    // Nothing of the loop was sent, and nothing of it changed.
    let args = std::fs::read_to_string(&said).unwrap();
    assert!(args.contains("Reply with the single word PONG"), "{args}");
    assert!(!args.contains(p.f.d()), "{args}");
    assert_eq!(p.f.fingerprint(), before);
    // No reviewer answered: exit 1.
    p.reviewer("codex", "echo 'I would rather not'");
    let (code, again) = smoke(&["--timeout", "2"]);
    assert_eq!(code, 1, "{again}");
    assert_eq!(again["reviewers"][0]["provider"], "codex", "{again}");
    assert_eq!(
        again["reviewers"][0]["outcome"], "unexpected_answer",
        "{again}"
    );
    assert_eq!(p.f.fingerprint(), before);
}

/// `AAS_AUTOLOOP_<PROVIDER>_BASE_URL` points a reviewer at its endpoint
/// the way it points a turn of that provider (one rule: Claude Code's
/// `ANTHROPIC_BASE_URL`, Codex's own `-c` provider), and a setting no CLI
/// can honour fails that reviewer, naming the variable.
#[test]
fn a_reviewer_is_pointed_at_its_providers_endpoint_setting() {
    let p = Panel::new();
    p.panel_json(r#"{"providers": ["codex", "claude"]}"#);
    let codex_args = p.f.temp.path().join("codex.args");
    let claude_env = p.f.temp.path().join("claude.env");
    p.reviewer(
        "codex",
        &format!(
            "printf '%s\\n' \"$@\" > '{}'\necho 'PONG'",
            codex_args.display()
        ),
    );
    p.reviewer(
        "claude",
        &format!(
            "echo \"$ANTHROPIC_BASE_URL\" > '{}'\necho 'PONG'",
            claude_env.display()
        ),
    );
    let smoke = |claude_url: &str| {
        let output = p
            .loopx(&["panel", "--smoke", "--dir", p.f.d(), "--json"])
            .env("AAS_AUTOLOOP_CODEX_BASE_URL", "http://127.0.0.1:9/v1")
            .env("AAS_AUTOLOOP_CLAUDE_BASE_URL", claude_url)
            .output()
            .unwrap();
        serde_json::from_slice::<Value>(&output.stdout).unwrap()
    };
    let view = smoke("http://127.0.0.1:8");
    assert!(
        view["reviewers"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["outcome"] == "answered"),
        "{view}"
    );
    let args = std::fs::read_to_string(&codex_args).unwrap();
    assert!(
        args.contains("base_url=\"http://127.0.0.1:9/v1\"")
            && args.contains("model_provider=\"loopx_endpoint\"")
            && !args.contains("model_provider=\"openai\""),
        "{args}"
    );
    assert_eq!(
        std::fs::read_to_string(&claude_env).unwrap().trim(),
        "http://127.0.0.1:8"
    );
    // Not a URL: claude's reviewer fails without starting, naming it.
    std::fs::remove_file(&claude_env).unwrap();
    let view = smoke("127.0.0.1:8");
    let claude = view["reviewers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["provider"] == "claude")
        .unwrap()
        .clone();
    assert_eq!(claude["outcome"], "failed", "{view}");
    assert!(
        claude["detail"]
            .as_str()
            .unwrap()
            .contains("AAS_AUTOLOOP_CLAUDE_BASE_URL"),
        "{claude}"
    );
    assert!(!claude_env.exists(), "the reviewer was started");
}

#[test]
fn a_reviewers_control_characters_never_reach_the_terminal() {
    let p = Panel::new();
    p.panel_json(r#"{"providers": ["codex"]}"#);
    // ESC sequences that clear the screen and retitle the terminal, a NUL,
    // a BEL, a carriage return: a hostile or broken reviewer's answer,
    // which the smoke test quotes back.
    p.reviewer(
        "codex",
        r"printf 'no\033[2J\033]0;owned\007\000 \r done\n'; exit 3",
    );
    let output = p
        .loopx(&["panel", "--smoke", "--dir", p.f.d()])
        .output()
        .unwrap();
    // No reviewer answered: the report goes to stderr.
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let text = String::from_utf8_lossy(&output.stderr);
    assert!(text.contains("owned"), "the answer is not quoted: {text}");
    for (stream, bytes) in [("stdout", &output.stdout), ("stderr", &output.stderr)] {
        let raw: Vec<u8> = bytes
            .iter()
            .copied()
            .filter(|b| b.is_ascii_control() && *b != b'\n' && *b != b'\t')
            .collect();
        assert!(
            raw.is_empty(),
            "{stream} carries control bytes {raw:?}: {}",
            String::from_utf8_lossy(bytes)
        );
    }
    assert!(text.contains("\\u{1b}[2J"), "{text}");
}

#[test]
fn a_brief_with_personal_data_leaves_only_with_the_digest_of_its_exact_bytes() {
    let p = Panel::new();
    std::fs::write(
        p.f.dir.join("notes/b.md"),
        "lemma B holds for n <= 4; ask jane.doe@example.org\n",
    )
    .unwrap();
    p.reviewer("codex", &answer("codex", "pass"));
    let fingerprint = p.stage();
    let (_, view, stderr) = p.panel(&[], &[(loopx_core_pii_env(), None)]);
    assert_eq!(p.launches("codex"), 0, "the brief left: {view} {stderr}");
    let said = view.to_string();
    assert!(
        said.contains("holds personal data (1 email address)") && !said.contains("jane.doe"),
        "{said}"
    );
    // The operator reads the brief it kept, and approves those bytes.
    let folder =
        p.f.dir
            .join("panel")
            .join(&fingerprint[7..19])
            .join("result_review");
    let prompt = std::fs::read(folder.join("1-codex.prompt")).unwrap();
    let digest = loopx_core::digest::Digest::of_bytes(&prompt);
    assert!(said.contains(digest.as_str()), "{said}");
    let (code, view, stderr) = p.panel(&[], &[(loopx_core_pii_env(), Some(digest.as_str()))]);
    assert_eq!(code, 0, "{view} {stderr}");
    assert_eq!(view["state"], "banked_accepted", "{view}");
    assert_eq!(p.launches("codex"), 1);
}

fn loopx_core_pii_env() -> &'static str {
    loopx_core::pii::APPROVAL_ENV
}

#[test]
fn reviewers_are_refused_by_default_in_enforce_mode_and_run_pinned_and_contained_under_trusted_local(
) {
    let p = Panel::new();
    let seen = p.f.temp.path().join("reviewer-cgroup");
    p.reviewer(
        "codex",
        &format!(
            "cat /proc/self/cgroup > '{}'\n{}",
            seen.display(),
            answer("codex", "pass")
        ),
    );
    p.stage();
    // A released build: no transport in enforce mode is strict-isolated.
    let error = p.refused(&[("LOOPX_INJECTED_PROVIDERS", None)]);
    assert!(error.contains("resolves to strict-isolated"), "{error}");
    assert_eq!(p.launches("codex"), 0);
    if !common::containable() {
        return;
    }
    let attest = p
        .loopx(&["attest", "--provider", "codex", "--bin"])
        .arg(p.bin.join("codex"))
        .output()
        .unwrap();
    let mut env: Vec<(String, Option<String>)> = common::attested_pins(&attest.stdout)
        .into_iter()
        .map(|(name, value)| (name, Some(value)))
        .collect();
    env.push((
        "AAS_AUTOLOOP_ATTESTED_MODEL_CODEX".into(),
        Some("gpt-test".into()),
    ));
    env.push(("LOOPX_INJECTED_PROVIDERS".into(), None));
    // Every reviewer that may be invited must be pinned: invite codex only.
    env.push(("AAS_AUTOLOOP_PANEL_PROVIDERS".into(), Some("codex".into())));
    let env: Vec<(&str, Option<&str>)> = env
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_deref()))
        .collect();
    let (code, view, stderr) = p.panel(&["--transport", "trusted-local"], &env);
    assert_eq!(code, 0, "{view} {stderr}");
    assert_eq!(view["state"], "banked_accepted", "{view}");
    let cgroup = std::fs::read_to_string(&seen).unwrap();
    assert!(
        cgroup
            .lines()
            .any(|l| l.contains(":pids:") && l.contains("/loopx-panel-")),
        "the reviewer ran outside its scope: {cgroup}"
    );
}

/// A fake reviewer `name` that answers any strategy review with `verdict`
/// on the plan awaiting one when it runs (read then, as a reviewer reads
/// its brief), and any result review with a pass.
fn live_strategy_reviewer(p: &Panel, name: &str, verdict: &str) {
    live_strategy_reviewer_for(p, name, verdict, "claude");
}

/// [`live_strategy_reviewer`] of a direction for `executor`'s turns.
fn live_strategy_reviewer_for(p: &Panel, name: &str, verdict: &str, executor: &str) {
    let loopx = common::loopx_path();
    p.reviewer(
        name,
        &format!(
            r#"bind=$('{loopx}' goal-focus strategy-brief --dir '{dir}' --executor {executor} --json 2>/dev/null | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["brief"]["bind"]))' 2>/dev/null)
if [ -n "$bind" ]; then
  echo "My advice:"
  echo "{{\"schema\":\"strategy_advice.v1\",\"reviewer\":{{\"provider\":\"{name}\"}},\"reviewed\":$bind,\"verdict\":\"{verdict}\",\"rationale\":\"the lower bound beats the others\"}}"
fi
{result}"#,
            loopx = loopx.display(),
            dir = p.f.d(),
            result = answer(name, "pass"),
            executor = executor,
        ),
    );
}

#[test]
fn gate_six_a_closed_gate_is_replanned_and_reviewed_by_the_driver_itself() {
    // A registry, but no plan: the gate is closed (missing_plan).
    let p = gate_six_loop();
    assert_eq!(p.f.focus_ok(&["status"])["gate"], "blocked");
    let (code, stderr) = p.drive(&["--panel", "on", "--max-iterations", "1"]);
    assert_eq!(code, 0, "{stderr}");
    let proposed = stderr
        .find("the driver proposes a plan")
        .unwrap_or(usize::MAX);
    let turn = stderr.find("iteration 1 [claude] started").unwrap_or(0);
    assert!(
        proposed < turn,
        "no plan was proposed before the turn: {stderr}"
    );
    let status = p.f.focus_ok(&["status"]);
    assert_eq!(status["current_plan"]["state"], "active", "{status}");
    assert_eq!(status["current_plan"]["review"], "reviewed", "{status}");
    assert_eq!(p.launches("agent"), 1);
    assert_eq!(p.status()["last_iteration"]["bank"]["status"], "accepted");
    p.f.assert_valid();
}

/// A panel loop whose gate is closed by `missing_plan`, with a live
/// strategy reviewer that answers `verdict` and a staging agent.
fn gate_six_loop_reviewed(verdict: &str) -> Panel {
    let p = gate_six_registry();
    live_strategy_reviewer(&p, "codex", verdict);
    p.staging_agent();
    p
}

/// A panel loop with a registry and no plan: its gate is closed by
/// `missing_plan`.
fn gate_six_registry() -> Panel {
    let p = Panel::new();
    let approach = |id: &str, low: f64, high: f64| serde_json::json!({"approach_id": id, "estimate": {"low": low, "high": high}});
    let registry = serde_json::json!({"campaigns": [
        {"campaign_id": "direct", "approaches": [approach("induction", 0.6, 0.9)]},
        {"campaign_id": "search", "approaches": [approach("weak", 0.0, 0.1)]}
    ]});
    let file = p.f.json_file("registry.json", &registry);
    p.f.focus_ok(&["revise", "--registry", &file]);
    p
}

/// [`gate_six_loop_reviewed`] by a reviewer that endorses.
fn gate_six_loop() -> Panel {
    gate_six_loop_reviewed("endorse")
}

#[test]
fn gate_six_killed_at_each_step_commits_exactly_one_direction_on_restart() {
    // Uninterrupted, for the count to compare with.
    let whole = gate_six_loop();
    let (code, stderr) = whole.drive(&["--panel", "on", "--max-iterations", "1"]);
    assert_eq!(code, 0, "{stderr}");
    let decisions = journal_events(&whole.f.dir, "focus.direction_decided").len();
    assert!(decisions >= 2, "a proposal and a review each decide");
    // After the proposal, inside the strategy review's commit (the
    // drive's second grouped commit: plan and decision), after its commit,
    // and after the review.
    for (point, killed_in) in [
        ("drive.gate6_proposed", "needs_replan"),
        ("sqlite.commit_all.before_commit#2", "needs_replan"),
        ("sqlite.commit_all.after_commit#2", "active"),
        ("drive.gate6_reviewed", "active"),
    ] {
        let p = gate_six_loop();
        require_failpoints();
        let mut child = p
            .drive_command("claude")
            .args(["--panel", "on", "--max-iterations", "1"])
            .env("LOOPX_FAILPOINTS", point)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let reached =
            std::io::BufRead::lines(std::io::BufReader::new(child.stderr.take().unwrap()))
                .any(|line| line.unwrap().contains(&format!("failpoint: {point}")));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        assert!(reached, "{point} was never reached");
        let killed = p.f.focus_ok(&["status"]);
        assert_eq!(
            killed["current_plan"]["state"], killed_in,
            "{point}: {killed}"
        );
        let (code, stderr) = p.drive(&["--panel", "on", "--max-iterations", "1"]);
        assert_eq!(code, 0, "{point}: {stderr}");
        assert!(
            !stderr.contains("the driver proposes a plan"),
            "{point}: the restart proposed another plan: {stderr}"
        );
        assert_eq!(
            journal_events(&p.f.dir, "focus.direction_decided").len(),
            decisions,
            "{point}: not exactly one proposal and one review"
        );
        let status = p.f.focus_ok(&["status"]);
        assert_eq!(
            status["current_plan"]["state"], "active",
            "{point}: {status}"
        );
        assert_eq!(p.launches("agent"), 1, "{point}");
        p.f.assert_valid();
    }
}

#[test]
fn gate_six_a_failover_to_another_family_is_replanned_for_it_and_goes_on() {
    // Reviewed for claude's turns; this run's provider is codex (openai).
    let status = failed_over_to_codex("codex", "claude");
    assert_eq!(
        status["current_plan"]["strategy_review"]["executor"]["family"], "openai",
        "{status}"
    );
}

/// A loop directed for claude's turns, driven with `--provider providers`
/// that ends up at codex, whose direction `reviewer` reviews: gate 6
/// replans for the failover and the turn runs. `goal-focus status` after.
fn failed_over_to_codex(providers: &str, reviewer: &str) -> Value {
    let p = Panel::directed();
    p.staging_agent_as("codex", "", "");
    live_strategy_reviewer_for(&p, reviewer, "endorse", "codex");
    let output = p
        .drive_command(providers)
        .args(["--panel", "on", "--max-iterations", "1"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("(provider_failover)"), "{stderr}");
    assert_eq!(p.launches("agent"), 1, "{stderr}");
    assert_eq!(p.status()["last_iteration"]["executor_provider"], "codex");
    p.f.focus_ok(&["status"])
}

#[test]
fn gate_six_stops_with_the_reason_when_the_reviewer_objects() {
    let p = gate_six_loop_reviewed("object");
    let (code, stderr) = p.drive(&["--panel", "on", "--max-iterations", "1"]);
    assert_eq!(code, 4, "{stderr}");
    assert_eq!(
        p.launches("agent"),
        0,
        "a turn ran on an objected direction: {stderr}"
    );
    assert!(stderr.contains("the driver proposes a plan"), "{stderr}");
    assert!(stderr.contains("pre-dispatch gate is closed"), "{stderr}");
}

#[test]
fn gate_six_a_trip_wire_of_the_contract_is_replanned_by_the_driver_and_the_loop_goes_on() {
    let p = gate_six_loop();
    let contract = p.f.json_file(
        "contract.json",
        &serde_json::json!({"goal": "prove lemma B", "trip_wires": [{
            "trip_wire_id": "every-turn",
            "description": "look at the direction again after each turn",
            "when": {"kind": "iterations", "at_least": 1}
        }]}),
    );
    p.f.focus_ok(&["revise", "--contract", &contract]);
    let (code, stderr) = p.drive(&["--panel", "on", "--max-iterations", "2"]);
    assert_eq!(code, 0, "{stderr}");
    // missing_plan before the first turn, the trip wire before the second.
    assert!(stderr.contains("(trip_wire)"), "{stderr}");
    assert_eq!(p.launches("agent"), 2, "{stderr}");
    let status = p.f.focus_ok(&["status"]);
    assert_eq!(status["current_plan"]["trigger"], "trip_wire", "{status}");
    assert_eq!(status["current_plan"]["state"], "active", "{status}");
    assert_eq!(status["current_plan"]["review"], "reviewed", "{status}");
    p.f.assert_valid();
}

#[test]
fn gate_six_past_the_attempt_cap_rotates_to_a_reviewer_not_yet_tried_instead_of_a_person() {
    // codewhale (another family than claude's, and than codex's) can
    // decide.
    let p = gate_six_one_attempt_each();
    live_strategy_reviewer(&p, "codewhale", "endorse");
    let (code, stderr) = p.drive(&["--panel", "on", "--max-iterations", "1"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(p.launches("agent"), 1, "{stderr}");
    // The plan's review and the candidate's each asked codex once (its
    // one attempt), then rotated to codewhale; codex was not asked again.
    assert_eq!(p.launches("codex"), 2, "{stderr}");
    assert_eq!(p.launches("codewhale"), 2, "{stderr}");
    let status = p.f.focus_ok(&["status"]);
    assert_eq!(status["current_plan"]["state"], "active", "{status}");
    assert_eq!(
        status["current_plan"]["strategy_review"]["reviewer"]["provider"], "codewhale",
        "{status}"
    );
    assert_eq!(p.status()["last_iteration"]["bank"]["status"], "accepted");
    p.f.assert_valid();
}

#[test]
fn gate_six_asks_a_person_only_when_no_reviewer_of_another_family_is_left() {
    let p = gate_six_one_attempt_each();
    p.reviewer("codewhale", "echo 'cannot decide either'");
    let (code, stderr) = p.drive(&["--panel", "on", "--max-iterations", "1"]);
    assert_eq!(code, 4, "{stderr}");
    assert!(
        stderr.contains("no reviewer of another family is left"),
        "{stderr}"
    );
    assert_eq!((p.launches("codex"), p.launches("codewhale")), (1, 1));
    assert_eq!(p.launches("agent"), 0, "{stderr}");
}

/// [`gate_six_registry`] with one panel attempt per subject, reviewers
/// codex (which cannot decide) then codewhale (the caller's), and a
/// staging agent.
fn gate_six_one_attempt_each() -> Panel {
    let p = gate_six_registry();
    p.panel_json(r#"{"max_attempts": 1, "providers": ["codex", "codewhale"]}"#);
    p.reviewer("codex", "echo 'cannot decide'");
    p.staging_agent();
    p
}

#[test]
fn gate_six_three_scope_only_turns_fire_the_trigger_and_the_driver_replans_and_goes_on() {
    let p = gate_six_registry();
    live_strategy_reviewer(&p, "codex", "endorse");
    p.staging_agent_as("claude", "--local-without-goal-delta", "");
    let (code, stderr) = p.drive(&["--panel", "on", "--max-iterations", "3"]);
    assert_eq!(code, 0, "{stderr}");
    let fired = |status: &Value| {
        (status["signals"].as_array().unwrap().iter())
            .map(|s| s["trigger"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    let status = p.f.focus_ok(&["status"]);
    assert!(
        fired(&status).contains(&"scope_only".to_owned()),
        "{status}"
    );
    let decisions = journal_events(&p.f.dir, "focus.direction_decided").len();
    // The next run replans through gate 6, the reviewer endorses, and the
    // fourth turn runs under the new plan.
    let (code, stderr) = p.drive(&["--panel", "on", "--max-iterations", "1"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("the driver proposes a plan"), "{stderr}");
    assert_eq!(p.launches("agent"), 4, "{stderr}");
    assert_eq!(
        journal_events(&p.f.dir, "focus.direction_decided").len(),
        decisions + 2,
        "the proposal and its review are decisions in the journal"
    );
    let status = p.f.focus_ok(&["status"]);
    assert_eq!(status["current_plan"]["state"], "active", "{status}");
    assert_eq!(status["current_plan"]["committed_at_iteration"], 3);
    assert!(
        !fired(&status).contains(&"scope_only".to_owned()),
        "{status}"
    );
    p.f.assert_valid();
}

#[test]
fn gate_six_a_dead_provider_fails_over_to_another_family_replans_for_it_and_goes_on() {
    // Reviewed for claude's turns; claude is not installed, so the run
    // fails over to codex (openai), whose direction codewhale reviews.
    let status = failed_over_to_codex("claude,codex", "codewhale");
    let review = &status["current_plan"]["strategy_review"];
    assert_eq!(review["executor"]["provider"], "codex", "{status}");
    assert_eq!(review["reviewer"]["provider"], "codewhale", "{status}");
}

impl Panel {
    /// Make the project a git repository with one commit of `work.txt`,
    /// so the driver snapshots each turn.
    fn git_project(&self) {
        common::git(&self.project, &["init", "-q"]);
        std::fs::write(self.project.join("work.txt"), "before\n").unwrap();
        common::git(&self.project, &["add", "work.txt"]);
        common::git(&self.project, &["commit", "-q", "-m", "start"]);
    }

    /// The paths of the workspace snapshot `side` of turn 1.
    fn snapshot_paths(&self, side: &str) -> String {
        let run_id = self.status()["run_id"].as_str().unwrap().to_owned();
        common::git(
            &self.project,
            &[
                "ls-tree",
                "-r",
                "--name-only",
                &format!("refs/loopx/{run_id}/turns/1/{side}"),
            ],
        )
    }
}

/// The agent's edits after it staged: a tracked file grows, a file appears.
const EDITS: &str = "echo agent >> work.txt\necho new > agent-new.txt";

#[test]
fn a_candidate_the_panel_rejects_has_its_turn_rolled_back_and_a_quarantined_one_is_kept() {
    let p = Panel::directed();
    p.git_project();
    p.staging_agent_then(EDITS);
    p.reviewer("codex", &answer("codex", "fail"));
    let (_, stderr) = p.drive(&["--panel", "on", "--max-iterations", "1"]);
    assert_eq!(p.status()["last_iteration"]["bank"]["status"], "rejected");
    assert!(
        stderr.contains("rejected: turn 1's workspace changes undone"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(p.project.join("work.txt")).unwrap(),
        "before\n"
    );
    assert!(!p.project.join("agent-new.txt").exists());
    // Kept on the turn's after ref, and the rollback is on record.
    assert!(p.snapshot_paths("after").contains("agent-new.txt"));
    assert_eq!(journal_events(&p.f.dir, "driver.rolled_back").len(), 1);

    let q = Panel::directed();
    q.git_project();
    q.staging_agent_then(&format!("{EDITS}\nsleep 30"));
    q.reviewer("codex", &answer("codex", "fail"));
    let (code, stderr) = q.drive(&["--panel", "on", "--iteration-timeout", "2"]);
    assert_eq!(code, 4, "{stderr}");
    assert!(stderr.contains("quarantined"), "{stderr}");
    // Evidence for a person: left as the turn left it, both sides on refs.
    assert_eq!(
        std::fs::read_to_string(q.project.join("work.txt")).unwrap(),
        "before\nagent\n"
    );
    assert!(q.project.join("agent-new.txt").exists());
    assert!(q.snapshot_paths("after").contains("agent-new.txt"));
    assert!(!q.snapshot_paths("before").contains("agent-new.txt"));
    assert!(journal_events(&q.f.dir, "driver.rolled_back").is_empty());
}

/// A loop Goal Focus does not enforce (the legacy flow), with codex
/// advising in `advice` and codewhale answering nothing.
fn legacy_with_advisors(advice: &str) -> Panel {
    let f = Fixture::new();
    f.init(5, &[]);
    let p = Panel::around(f);
    p.panel_json(r#"{"providers": ["codex", "codewhale"]}"#);
    p.reviewer("codex", &format!("printf '%s\\n' '{advice}'"));
    p.reviewer("codewhale", "true");
    p
}

#[test]
fn target_advice_asks_each_reviewer_once_per_state_and_synthesizes_for_the_primary() {
    let p = legacy_with_advisors("Keep the committed path; it fails if B breaks at n = 5.");
    let run = || {
        let output = p
            .loopx(&["panel", "--dir", p.f.d(), "--phase", "target_advice"])
            .args(["--executor", "claude", "--json"])
            .output()
            .unwrap();
        let view: Value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
        (
            output.status.code(),
            view,
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let (code, view, stderr) = run();
    assert_eq!(code, Some(0), "{view} {stderr}");
    assert_eq!(view["state"], "advised", "{view}");
    assert_eq!(view["advised"], 1, "{view}");
    let outcomes: Vec<&str> = (view["attempts"].as_array().unwrap().iter())
        .map(|a| a["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["advised", "malformed"], "{view}");
    let synthesis_path = view["synthesis"].as_str().unwrap().to_owned();
    assert!(
        synthesis_path.ends_with("/target_advice/host_synthesis.md"),
        "{synthesis_path}"
    );
    let synthesis = std::fs::read_to_string(p.f.dir.join(&synthesis_path)).unwrap();
    assert!(synthesis.contains("- Advice from: codex\n"), "{synthesis}");
    assert!(
        synthesis.contains("> Keep the committed path; it fails if B breaks at n = 5."),
        "{synthesis}"
    );
    assert!(
        synthesis.contains("- codewhale (deepseek): malformed"),
        "{synthesis}"
    );
    assert!(
        synthesis.contains("## The committed next path\n\nstart the first bounded iteration"),
        "{synthesis}"
    );
    assert_eq!(mode(&p.f.dir.join(&synthesis_path)), 0o600);
    // The brief: the loop's state, not the reviewer's name.
    let folder = std::path::Path::new(&synthesis_path).parent().unwrap();
    let brief = std::fs::read_to_string(p.f.dir.join(folder).join("1-codex.prompt")).unwrap();
    assert!(brief.contains("## recovery.md (excerpt)"), "{brief}");
    assert!(!brief.contains("codex"), "{brief}");
    // The same state again: nobody is asked twice, the synthesis stands.
    let (code, again, stderr) = run();
    assert_eq!(code, Some(0), "{again} {stderr}");
    assert_eq!((p.launches("codex"), p.launches("codewhale")), (1, 1));
    assert_eq!(again["attempts"], serde_json::json!([]), "{again}");
    assert_eq!(again["synthesis"], synthesis_path.as_str());
    assert_eq!(
        std::fs::read_to_string(p.f.dir.join(&synthesis_path)).unwrap(),
        synthesis
    );
    // The loop's state moved: a new round.
    p.f.append("continue", &[]);
    let (code, moved, stderr) = run();
    assert_eq!(code, Some(0), "{moved} {stderr}");
    assert_ne!(moved["synthesis"], synthesis_path.as_str());
    assert_eq!(p.launches("codex"), 2);
    p.f.assert_valid();
}

#[test]
fn target_advice_is_refused_in_enforce_mode_and_changes_nothing() {
    let p = Panel::new();
    p.reviewer("codex", "echo advice");
    let before = p.f.fingerprint();
    let output = p
        .loopx(&["panel", "--dir", p.f.d(), "--phase", "target_advice"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("strategy_review"), "{stderr}");
    assert_eq!(p.f.fingerprint(), before);
    assert_eq!(p.launches("codex"), 0);
}

#[test]
fn drive_with_the_panel_on_a_legacy_loop_asks_target_advice_before_each_turn() {
    let p = legacy_with_advisors("Measure before you change anything.");
    let prompts = p.f.temp.path().join("prompts");
    let marker = p.marker("agent");
    p.script(
        "claude",
        &format!(
            "echo turn >> '{}'\nprintf '%s\\n=====\\n' \"$2\" >> '{}'\nloopx append-iteration --mode bounded-research --objective turn --decision continue >/dev/null",
            marker.display(),
            prompts.display()
        ),
    );
    let (code, stderr) = p.drive(&["--panel", "on", "--max-iterations", "2"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(p.launches("agent"), 2, "{stderr}");
    // One round per turn, every reviewer once each: the state moved.
    assert_eq!((p.launches("codex"), p.launches("codewhale")), (2, 2));
    assert!(
        stderr.contains("panel: target advice from 1 of 2"),
        "{stderr}"
    );
    let prompts = std::fs::read_to_string(&prompts).unwrap();
    let synthesis_lines: Vec<&str> = (prompts.lines())
        .filter(|l| l.contains("asked the panel for target advice"))
        .collect();
    assert_eq!(synthesis_lines.len(), 2, "{prompts}");
    for line in synthesis_lines {
        let path = line
            .split_once(&format!("{}/", p.f.d()))
            .and_then(|(_, rest)| rest.split_once(". "))
            .map(|(path, _)| path)
            .unwrap_or_else(|| panic!("{line}"));
        let synthesis = std::fs::read_to_string(p.f.dir.join(path)).unwrap();
        assert!(synthesis.contains("> Measure before you change anything."));
    }
    let finished = journal_events(&p.f.dir, "panel.attempt_finished");
    let advised = finished
        .iter()
        .filter(|e| e["outcome"] == "advised")
        .count();
    assert_eq!(advised, 2, "{finished:?}");
    p.f.assert_valid();
}

#[test]
fn a_failing_advisor_costs_its_attempt_and_the_turn_runs_without_advice() {
    let p = legacy_with_advisors("unused");
    p.reviewer("codex", "echo 'out of credit' >&2; exit 3");
    let prompts = p.f.temp.path().join("prompts");
    p.script(
        "claude",
        &format!(
            "printf '%s' \"$2\" > '{}'\nloopx append-iteration --mode bounded-research --objective turn --decision continue >/dev/null",
            prompts.display()
        ),
    );
    let (code, stderr) = p.drive(&["--panel", "on", "--max-iterations", "1"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("target advice from 0 of 2"), "{stderr}");
    let prompt = std::fs::read_to_string(&prompts).unwrap();
    assert!(prompt.contains("## Review panel"), "{prompt}");
    assert!(!prompt.contains("target advice"), "{prompt}");
    assert_eq!(p.status()["iterations"], 1);
}

#[test]
fn the_target_advice_brief_states_the_formal_policy_before_the_path() {
    let f = Fixture::new();
    f.init(5, &["--formal-policy", "on"]);
    let p = Panel::around(f);
    p.panel_json(r#"{"providers": ["codex"]}"#);
    p.reviewer("codex", "echo 'keep going'");
    let output = p
        .loopx(&[
            "panel",
            "--dir",
            p.f.d(),
            "--phase",
            "target_advice",
            "--json",
        ])
        .output()
        .unwrap();
    let view: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(view["state"], "advised", "{view}");
    let synthesis = view["synthesis"].as_str().unwrap();
    let folder = std::path::Path::new(synthesis).parent().unwrap();
    let brief = std::fs::read_to_string(p.f.dir.join(folder).join("1-codex.prompt")).unwrap();
    let formal = brief
        .find("## Formal policy")
        .unwrap_or_else(|| panic!("{brief}"));
    assert!(
        formal < brief.find("## The committed next path").unwrap(),
        "{brief}"
    );
}
