//! Executable checks through the real binary: the owner proposes and
//! applies them, the host runs them (real child processes, no shell),
//! and a configured requirement is met only by its check passing on the
//! project's current HEAD.

mod common;

use common::{git, Fixture};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// A loop whose goal has outcome `ship` with requirements `tests:unit@v1`
/// and `docs` (ids with `:` and `@` keep their identity), a git project
/// with one commit, and the check document `config`.
struct Checks {
    f: Fixture,
    project: PathBuf,
}

impl Checks {
    fn new() -> Checks {
        let f = Fixture::new();
        f.init(5, &["--success-check", "true"]);
        let update = json!({
            "outcome_id": "ship",
            "objective": "Ship the parser",
            "add_requirements": [
                {"id": "tests:unit@v1", "description": "the unit tests pass"},
                {"id": "docs", "description": "the docs build"}
            ],
            "source": {"ref": "msg-1", "summary": "the user asked"}
        });
        let document = f.json_file("outcome.json", &update);
        let (ok, _, stderr) =
            f.run_in_dir(&["goal-acceptance", "refine-outcome", "--document", &document]);
        assert!(ok, "{stderr}");
        let project = f.temp.path().join("project");
        std::fs::create_dir_all(&project).unwrap();
        git(&project, &["init", "-q"]);
        std::fs::write(project.join("README"), "parser\n").unwrap();
        commit(&project, "first");
        Checks { f, project }
    }

    fn config(&self, criteria: Value) -> String {
        self.f.json_file(
            "checks.json",
            &json!({"outcome_id": "ship", "criteria": criteria}),
        )
    }

    /// prepare-checks, then apply-checks as the owner: the proposal.
    fn configure(&self, criteria: Value) -> Value {
        let file = self.config(criteria);
        let (ok, proposal, stderr) =
            self.f
                .run_in_dir(&["goal-acceptance", "prepare-checks", "--file", &file]);
        assert!(ok, "{stderr}");
        let basis = proposal["basis"].as_str().unwrap();
        let (ok, receipt, stderr) = self.f.run_in_dir(&[
            "goal-acceptance",
            "apply-checks",
            "--file",
            &file,
            "--basis",
            basis,
        ]);
        assert!(ok, "{receipt} {stderr}");
        proposal
    }

    /// `loopx check <what> --root P --json`: exit code and JSON.
    fn check(&self, what: &str) -> (i32, Value) {
        let output = self
            .f
            .loopx()
            .args(["check", what, "--dir", self.f.d(), "--json", "--root"])
            .arg(&self.project)
            .output()
            .unwrap();
        let json = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
        (output.status.code().unwrap_or(-1), json)
    }

    fn states(view: &Value) -> Vec<(String, String)> {
        (view["criteria"].as_array().unwrap().iter())
            .map(|c| {
                (
                    c["criterion_id"].as_str().unwrap().to_owned(),
                    c["state"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    }

    fn marker(&self) -> PathBuf {
        self.f.temp.path().join("ran")
    }

    /// How many times the marking check ran.
    fn runs(&self) -> usize {
        std::fs::read_to_string(self.marker())
            .map(|t| t.lines().count())
            .unwrap_or(0)
    }

    /// A check that notes each run, then exits with `code`.
    fn marking(&self, code: i32) -> Value {
        json!([
            "sh",
            "-c",
            format!("echo run >> '{}'; exit {code}", self.marker().display())
        ])
    }
}

fn commit(project: &Path, message: &str) {
    git(project, &["add", "-A"]);
    git(
        project,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            message,
        ],
    );
}

#[test]
fn prepared_applied_and_run_a_passing_and_a_failing_check_decide_their_requirements() {
    let c = Checks::new();
    let proposal = c.configure(json!([
        {"id": "tests:unit@v1", "validation_argv": ["true"]},
        {"id": "docs", "validation_argv": c.marking(3), "timeout_seconds": 30}
    ]));
    assert_eq!(proposal["objective"], "Ship the parser");
    assert_eq!(proposal["criteria"][0]["id"], "tests:unit@v1");
    assert_eq!(proposal["requirements"][1]["checked"], true);
    // Configured, never run: neither requirement is met, and nothing ran.
    let (code, status) = c.check("status");
    assert_eq!(code, 1, "{status}");
    assert_eq!(
        Checks::states(&status),
        [
            ("tests:unit@v1".into(), "never_run".into()),
            ("docs".into(), "never_run".into())
        ]
    );
    assert_eq!(c.runs(), 0);
    let (code, ran) = c.check("run");
    assert_eq!(code, 1, "{ran}");
    assert_eq!(
        Checks::states(&ran),
        [
            ("tests:unit@v1".into(), "passed".into()),
            ("docs".into(), "failed".into())
        ]
    );
    assert_eq!(ran["criteria"][1]["last"]["exit_code"], 3);
    let head = git(&c.project, &["rev-parse", "HEAD"]);
    assert_eq!(ran["head"], head.trim());
    assert_eq!(c.runs(), 1);
    // The results are the goal's, with the requirement ids exactly as given.
    let inspect = c.f.json(&["goal-acceptance", "inspect", "--dir", c.f.d()]);
    let checks = &inspect["outcomes"][0]["configured_checks"];
    assert_eq!(checks[0]["criterion"]["id"], "tests:unit@v1", "{inspect}");
    assert_eq!(checks[0]["last"]["criterion_id"], "tests:unit@v1");
    assert_eq!(checks[1]["state"], "failed");
    c.f.assert_valid();
}

#[test]
fn apply_is_refused_after_the_requirements_changed_and_for_an_agent_changing_nothing() {
    let c = Checks::new();
    let file = c.config(json!([{"id": "docs", "validation_argv": ["true"]}]));
    let (_, proposal, _) =
        c.f.run_in_dir(&["goal-acceptance", "prepare-checks", "--file", &file]);
    let basis = proposal["basis"].as_str().unwrap().to_owned();
    let apply = [
        "goal-acceptance",
        "apply-checks",
        "--file",
        &file,
        "--basis",
        &basis,
    ];
    // An agent could certify itself with `true`.
    let (_, stderr) =
        c.f.refused_in_dir(&[&apply[..], &["--agent-id", "a"]].concat());
    assert!(stderr.contains("only the goal's owner"), "{stderr}");
    // A requirement added between the proposal and its application.
    let update = json!({"outcome_id": "ship", "add_requirements": [
        {"id": "bench", "description": "no slower"}], "source": {"ref": "msg-2"}});
    let document = c.f.json_file("more.json", &update);
    let (ok, _, stderr) =
        c.f.run_in_dir(&["goal-acceptance", "refine-outcome", "--document", &document]);
    assert!(ok, "{stderr}");
    let (_, stderr) = c.f.refused_in_dir(&apply);
    assert!(stderr.contains("changed since the proposal"), "{stderr}");
    // A criterion naming no requirement is refused at prepare already.
    let stray = c.config(json!([{"id": "tests:unit", "validation_argv": ["true"]}]));
    let (_, stderr) =
        c.f.refused_in_dir(&["goal-acceptance", "prepare-checks", "--file", &stray]);
    assert!(stderr.contains("names no requirement"), "{stderr}");
}

#[test]
fn apply_checks_replays_by_operation_id() {
    let c = Checks::new();
    let file = c.config(json!([{"id": "docs", "validation_argv": ["true"]}]));
    let (_, proposal, _) =
        c.f.run_in_dir(&["goal-acceptance", "prepare-checks", "--file", &file]);
    let basis = proposal["basis"].as_str().unwrap();
    let apply = [
        "goal-acceptance",
        "apply-checks",
        "--file",
        &file,
        "--basis",
        basis,
        "--operation-id",
        "configure-docs",
    ];
    let revision = |c: &Checks| {
        c.f.json(&["goal-acceptance", "inspect", "--dir", c.f.d()])["provider_revision"].clone()
    };
    let (ok, first, stderr) = c.f.run_in_dir(&apply);
    assert!(ok, "{stderr}");
    assert_eq!(first["effects"], json!(["checks_configured"]), "{first}");
    let after = revision(&c);
    let (ok, again, stderr) = c.f.run_in_dir(&apply);
    assert!(ok, "{stderr}");
    // The same receipt, replayed: nothing written again.
    assert_eq!(again["replayed"], true, "{again}");
    assert_eq!(
        (&first["revision"], &first["committed_at"]),
        (&again["revision"], &again["committed_at"])
    );
    assert_eq!(revision(&c), after);
}

#[test]
fn a_commit_makes_a_pass_stale_and_done_reports_it_without_running_anything() {
    let c = Checks::new();
    c.configure(json!([{"id": "docs", "validation_argv": c.marking(0)}]));
    assert_eq!(c.check("run").0, 0);
    assert_eq!(c.runs(), 1);
    let done = |c: &Checks| {
        let output =
            c.f.loopx()
                .args(["done", "--dir", c.f.d(), "--json", "--root"])
                .arg(&c.project)
                .output()
                .unwrap();
        serde_json::from_slice::<Value>(&output.stdout).unwrap()
    };
    assert_eq!(done(&c)["checks"]["not_met"], 0);
    // The agent commits: the pass was for another HEAD.
    std::fs::write(c.project.join("parser.rs"), "fn main() {}\n").unwrap();
    commit(&c.project, "the agent's change");
    let (code, status) = c.check("status");
    assert_eq!(code, 1);
    assert_eq!(Checks::states(&status), [("docs".into(), "stale".into())]);
    let view = done(&c);
    assert_eq!(view["checks"]["not_met"], 1, "{view}");
    assert_eq!(view["checks"]["criteria"][0]["state"], "stale");
    assert_eq!(c.runs(), 1, "done and status ran nothing");
    // Run again on the new HEAD: current.
    assert_eq!(c.check("run").0, 0);
    assert_eq!(done(&c)["checks"]["not_met"], 0);
}

#[test]
fn a_self_assessment_cannot_satisfy_a_configured_requirement() {
    let c = Checks::new();
    c.configure(json!([{"id": "docs", "validation_argv": ["false"]}]));
    let review = json!({"outcome_id": "ship", "reviews": [
        {"requirement_id": "docs", "conclusion": "met", "reasoning": "looks fine to me",
         "evidence_refs": ["docs/index.html"]},
        {"requirement_id": "tests:unit@v1", "conclusion": "met", "reasoning": "ran them",
         "evidence_refs": ["test.log"]}]});
    let document = c.f.json_file("review.json", &review);
    let (ok, _, stderr) =
        c.f.run_in_dir(&["goal-acceptance", "refine-outcome", "--document", &document]);
    assert!(ok, "{stderr}");
    let gaps = |c: &Checks| {
        let inspect = c.f.json(&["goal-acceptance", "inspect", "--dir", c.f.d()]);
        inspect["gaps"].clone()
    };
    // The unconfigured requirement is met by the review; the configured
    // one is not, until its check passes.
    let open = gaps(&c);
    let unresolved = open[0]["unresolved"].to_string();
    assert!(unresolved.contains("\"docs\""), "{open}");
    assert!(!unresolved.contains("tests:unit@v1"), "{open}");
    assert_eq!(c.check("run").0, 1);
    assert!(gaps(&c)[0]["unresolved"].to_string().contains("unmet"));
}

#[test]
fn verify_refuses_a_success_claim_while_a_configured_check_fails() {
    let c = Checks::new();
    c.configure(json!([{"id": "docs", "validation_argv": c.marking(1)}]));
    c.f.write_proof("p1");
    c.f.append("stop", &["--stop-reason", "success", "--evidence-id", "p1"])
        .success();
    let output =
        c.f.loopx()
            .args(["verify", "--dir", c.f.d(), "--json", "--root"])
            .arg(&c.project)
            .output()
            .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert_eq!(c.runs(), 1, "the completion gate ran the check");
    let view: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(view["verified"], false, "{view}");
    // The claim was refused: the loop goes on.
    let status = c.f.json(&["status", "--dir", c.f.d()]);
    assert_eq!(status["state_status"], "running", "{status}");
    assert_eq!(status["last_iteration"]["claim"], "refused", "{status}");
}

#[test]
fn argv_words_reach_the_program_literally_without_a_shell() {
    let c = Checks::new();
    let planted = c.f.temp.path().join("pwned");
    let word = format!("a;b $(touch {}) | c `id`", planted.display());
    c.configure(json!([{"id": "docs", "validation_argv": ["printf", "%s", word]}]));
    let (code, ran) = c.check("run");
    assert_eq!(code, 0, "{ran}");
    assert_eq!(ran["criteria"][0]["last"]["excerpt"], word.as_str());
    assert!(!planted.exists(), "a shell ran the word");
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.contains(") Z "))
        .unwrap_or(false)
}

#[test]
fn a_hanging_check_is_killed_at_its_timeout_with_everything_it_started() {
    let c = Checks::new();
    let pidfile = c.f.temp.path().join("child.pid");
    let script = format!("sleep 300 & echo $! > '{}'; wait", pidfile.display());
    c.configure(
        json!([{"id": "docs", "validation_argv": ["sh", "-c", script], "timeout_seconds": 1}]),
    );
    let started = std::time::Instant::now();
    let (code, ran) = c.check("run");
    assert_eq!(code, 1, "{ran}");
    assert!(started.elapsed().as_secs() < 30);
    assert_eq!(ran["criteria"][0]["state"], "errored", "{ran}");
    assert!(ran["criteria"][0]["last"]["excerpt"]
        .as_str()
        .unwrap()
        .contains("killed at its timeout"));
    let pid: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(!alive(pid), "the check's child {pid} outlived it");
}

#[test]
fn output_is_bounded_and_redacted() {
    let c = Checks::new();
    // Made at run time, so the argv (which views show) does not hold it.
    let secret = format!("ghp_{}", "A1b2C3d4E5".repeat(4));
    let script = "echo \"token=ghp_$(printf 'A1b2C3d4E5%.0s' 1 2 3 4)\"; head -c 300000 /dev/zero | tr '\\0' x";
    c.configure(json!([{"id": "docs", "validation_argv": ["sh", "-c", script]}]));
    let (code, ran) = c.check("run");
    assert_eq!(code, 0, "{ran}");
    let last = &ran["criteria"][0]["last"];
    let excerpt = last["excerpt"].as_str().unwrap();
    assert!(excerpt.chars().count() <= 1024, "{}", excerpt.len());
    assert!(!ran.to_string().contains(&secret), "the secret leaked");
    let log = c.f.dir.join(last["log"].as_str().unwrap());
    let logged = std::fs::read_to_string(log).unwrap();
    assert!(logged.len() < 2 * 1024 * 1024);
    let stored = common::stored_text(&c.f.dir);
    assert!(!stored.contains(&secret), "the secret reached the store");
}

#[test]
fn the_driver_banks_a_success_claim_only_once_the_configured_check_passes() {
    let c = Checks::new();
    c.configure(json!([{"id": "docs", "validation_argv": ["test", "-f", "docs.html"]}]));
    // The agent claims success every turn; only its second turn builds
    // the docs the owner's check looks for.
    let turns = c.f.temp.path().join("turns");
    let agent = c.f.temp.path().join("agent.sh");
    std::fs::write(&agent, common::claiming_agent(&turns, "docs.html")).unwrap();
    let output =
        c.f.loopx()
            .args(["drive", "--dir", c.f.d(), "--git-snapshot", "off", "--cmd"])
            .arg(format!("sh {}", agent.display()))
            .arg("--root")
            .arg(&c.project)
            .output()
            .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("check docs of ship: fail"), "{stderr}");
    assert!(stderr.contains("success claim refused"), "{stderr}");
    assert!(stderr.contains("success claim verified"), "{stderr}");
    let status = c.f.json(&["status", "--dir", c.f.d()]);
    assert_eq!(status["iterations"], 2, "{status}");
    assert_eq!(status["last_iteration"]["claim"], "verified", "{status}");
    c.f.assert_valid();
}

#[test]
fn a_verify_stopped_while_a_check_runs_leaves_the_claim_pending() {
    let c = Checks::new();
    c.configure(json!([{"id": "docs", "validation_argv": ["sleep", "30"], "timeout_seconds": 60}]));
    c.f.write_proof("p1");
    c.f.append("stop", &["--stop-reason", "success", "--evidence-id", "p1"])
        .success();
    let verify = std::process::Command::new(common::loopx_path())
        .args(["verify", "--dir", c.f.d(), "--root"])
        .arg(&c.project)
        .env("LOOPX_REGISTRY_DIR", &c.f.registry)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Stopped once the check runs (its log exists).
    let logs = c.f.dir.join("driver_logs");
    let started = std::time::Instant::now();
    while !(std::fs::read_dir(&logs)
        .map(|d| d.count() > 0)
        .unwrap_or(false))
    {
        assert!(started.elapsed().as_secs() < 20, "the check never started");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    unsafe { libc::kill(verify.id() as i32, libc::SIGTERM) };
    let output = verify.wait_with_output().unwrap();
    assert!(
        started.elapsed().as_secs() < 25,
        "the stop did not end the check"
    );
    assert_eq!(output.status.code(), Some(143));
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(said.contains("stays pending"), "{said}");
    // Not refused: the claim still waits for its check.
    let state = c.f.json(&["status", "--dir", c.f.d()]);
    assert_eq!(state["state_status"], "running", "{state}");
    assert_ne!(state["last_iteration"]["claim"], "refused", "{state}");
    assert_eq!(
        c.f.json(&["quota", "should-run", "--dir", c.f.d()])["scheduler_hint"]["reason_code"],
        "success_claim_pending"
    );
}
