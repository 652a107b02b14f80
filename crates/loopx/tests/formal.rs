//! The formal (Lean) policy through the real binary: each value's prompt
//! section, its sources and their order, bad values refused with nothing
//! written, the drive's pin and the agent's environment, and the force
//! tick with a fake `lake` on PATH that passes, fails, hangs or is not
//! there, until its credits run out; the host's re-check of a Lean proof
//! artifact, and the artifacts it refuses.

mod common;

use common::{journal_events, Fixture};
use serde_json::Value;
use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;
use std::process::Command;

const FORMAL_VARIABLES: [&str; 6] = [
    "AAS_AUTOLOOP_FORMAL_POLICY",
    "AAS_AUTOLOOP_FORMAL_PROJECT",
    "AAS_AUTOLOOP_FORMAL_FORCE",
    "AAS_AUTOLOOP_FORMAL_TYPECHECK",
    "AAS_AUTOLOOP_FORMAL_FORCE_CREDITS",
    "AAS_AUTOLOOP_FORMAL_TYPECHECK_TIMEOUT",
];

/// `loopx` without any formal variable of the test's own environment.
fn loopx(f: &Fixture) -> assert_cmd::Command {
    let mut command = f.loopx();
    for name in FORMAL_VARIABLES {
        command.env_remove(name);
    }
    command
}

fn init(f: &Fixture, extra: &[&str]) {
    loopx(f)
        .args(f.init_words())
        .args(["--max-iterations", "10"])
        .args(extra)
        .assert()
        .success();
}

fn task_body_with(f: &Fixture, env: &[(&str, &str)]) -> String {
    let done = loopx(f)
        .args(["task-body", "--dir", f.d()])
        .envs(env.iter().copied())
        .assert()
        .success();
    String::from_utf8(done.get_output().stdout.clone()).unwrap()
}

/// The prompt's formal section (from its heading on), or `None`.
fn formal_section(body: &str) -> Option<&str> {
    body.find("## Formal policy").map(|at| &body[at..])
}

#[test]
fn each_policy_value_gives_its_own_prompt_section() {
    let mut seen = Vec::new();
    for (value, opening) in [
        ("mention-only", "Policy: mention-only."),
        ("auto", "Policy: auto, no stable formal candidate"),
        ("on", "Policy: on, parked"),
        ("force", "Policy: force.\n\nBinding rules:"),
    ] {
        let f = Fixture::new();
        init(&f, &["--formal-policy", value]);
        let body = task_body_with(&f, &[]);
        let section = formal_section(&body).unwrap_or_else(|| panic!("{value}: {body}"));
        assert!(
            section.starts_with(&format!("## Formal policy\n\n{opening}")),
            "{value}: {section}"
        );
        assert!(
            body.find("## The one-iteration contract").unwrap()
                < body.find("## Formal policy").unwrap(),
            "the formal section comes last: {body}"
        );
        seen.push(section.to_owned());
    }
    seen.dedup();
    assert_eq!(seen.len(), 4, "each value reads differently");
    assert!(seen[3].contains("### Force hygiene") && seen[3].contains("not turned on"));
    assert!(seen[2].contains("### Early stop") && !seen[2].contains("Binding rules"));

    let off = Fixture::new();
    init(&off, &["--formal-policy", "off"]);
    assert_eq!(formal_section(&task_body_with(&off, &[])), None);
    let plain = Fixture::new();
    init(&plain, &[]);
    assert_eq!(formal_section(&task_body_with(&plain, &[])), None);
    assert!(
        !plain.dir.join("formal").exists(),
        "a loop that never heard of the policy gets no formal folder"
    );
}

#[test]
fn the_sources_stack_file_then_standing_orders_then_environment() {
    let f = Fixture::new();
    init(&f, &[]);
    std::fs::create_dir(f.dir.join("formal")).unwrap();
    std::fs::write(
        f.dir.join("formal/formal_policy.json"),
        r#"{"schema_version":"formal_policy.v1","policy":"auto","notes":["mine"]}"#,
    )
    .unwrap();
    let from_file = task_body_with(&f, &[]);
    assert!(
        from_file.contains("Policy: auto, no stable formal candidate"),
        "{from_file}"
    );
    let from_env = task_body_with(&f, &[("AAS_AUTOLOOP_FORMAL_POLICY", "mention-only")]);
    assert!(from_env.contains("Policy: mention-only."), "{from_env}");
    // A stable candidate the user entered turns auto's binding rules on.
    std::fs::write(
        f.dir.join("formal/candidates.jsonl"),
        "{\"id\":\"c1\",\"status\":\"stable\",\"source\":\"agent\"}\n",
    )
    .unwrap();
    assert!(
        !task_body_with(&f, &[]).contains("Binding rules"),
        "an agent's candidate is not one"
    );
    std::fs::write(
        f.dir.join("formal/candidates.jsonl"),
        "{\"id\":\"c1\",\"status\":\"stable\",\"source\":\"user\"}\n",
    )
    .unwrap();
    let bound = task_body_with(&f, &[]);
    assert!(bound.contains("### Auto checklist"), "{bound}");

    // The standing orders init records are over the file.
    let g = Fixture::new();
    init(&g, &["--formal-policy", "on", "--formal-project", "Lean/"]);
    let written: Value =
        serde_json::from_slice(&std::fs::read(g.dir.join("formal/formal_policy.json")).unwrap())
            .unwrap();
    assert_eq!(written["policy"], "on");
    assert_eq!(written["project"], "Lean/");
    assert_eq!(written["force_credits"], 3);
    std::fs::write(
        g.dir.join("formal/formal_policy.json"),
        r#"{"policy":"off"}"#,
    )
    .unwrap();
    assert!(task_body_with(&g, &[]).contains("Policy: on, parked"));
    let orders = journal_events(&g.dir, "formal.orders_set");
    assert_eq!(orders.len(), 1, "{orders:?}");
    assert_eq!(orders[0]["source"], "init");
    assert_eq!(orders[0]["settings"]["policy"], "on");
}

#[test]
fn init_replayed_by_operation_id_records_the_standing_orders_once() {
    let f = Fixture::new();
    for _ in 0..2 {
        init(&f, &["--formal-policy", "auto", "--operation-id", "init-1"]);
    }
    assert_eq!(journal_events(&f.dir, "formal.orders_set").len(), 1);
    f.assert_valid();
}

#[test]
fn a_bad_value_is_refused_and_changes_nothing() {
    let f = Fixture::new();
    for bad in [
        &["--formal-policy", "forse"][..],
        &["--formal-project", "../outside"],
        &["--formal-project", "/abs"],
        &["--formal-force-credits", "-1"],
    ] {
        let output = loopx(&f).args(f.init_words()).args(bad).output().unwrap();
        assert!(!output.status.success(), "{bad:?}");
        assert!(!f.dir.exists(), "{bad:?} wrote the loop");
    }

    init(&f, &["--formal-policy", "on"]);
    let before = f.fingerprint();
    let d = Driven::new(f);
    let agent = d.agent("");
    for (name, value) in [
        ("AAS_AUTOLOOP_FORMAL_POLICY", "strict"),
        ("AAS_AUTOLOOP_FORMAL_FORCE", "please"),
        ("AAS_AUTOLOOP_FORMAL_PROJECT", "../up"),
    ] {
        let (code, stderr) = d.drive_with(&["--cmd", &agent], &[(name, value)]);
        assert_eq!(code, 2, "{name}: {stderr}");
        assert!(stderr.contains(name), "the variable is named: {stderr}");
        assert_eq!(d.f.fingerprint(), before, "{name} changed the loop");
    }
    let output = loopx(&d.f)
        .args(["task-body", "--dir", d.f.d()])
        .env("AAS_AUTOLOOP_FORMAL_POLICY", "strict")
        .output()
        .unwrap();
    assert!(!output.status.success());

    std::fs::write(
        d.f.dir.join("formal/formal_policy.json"),
        r#"{"policy": "sometimes"}"#,
    )
    .unwrap();
    let before = d.f.fingerprint();
    let (code, stderr) = d.drive_with(&["--cmd", &agent], &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("formal_policy.json") && stderr.contains("\"sometimes\""),
        "{stderr}"
    );
    assert_eq!(d.f.fingerprint(), before);
}

/// A drive on a loop: a project root, and a PATH whose first folder
/// holds the scripts written for it (`Fixture::fake_provider`'s).
struct Driven {
    f: Fixture,
    root: PathBuf,
    path: String,
}

impl Driven {
    fn new(f: Fixture) -> Self {
        let (root, path) = f.fake_provider("noop", "exit 0");
        Driven { f, root, path }
    }

    fn script(&self, name: &str, body: &str) -> String {
        self.f.fake_provider(name, body);
        self.f
            .temp
            .path()
            .join("bin")
            .join(name)
            .display()
            .to_string()
    }

    /// An agent that runs `before`, then records one iteration.
    fn agent(&self, before: &str) -> String {
        self.script(
            "agent",
            &format!(
                "{before}\nloopx append-iteration --mode bounded-research --objective turn --decision continue >/dev/null"
            ),
        )
    }

    /// A Lake project in the project root's formal/, with one `sorry`
    /// when `sorry`.
    fn lake_project(&self, sorry: bool) {
        let project = self.root.join("formal");
        std::fs::create_dir_all(project.join(".lake")).unwrap();
        std::fs::write(project.join("lakefile.lean"), "import Lake\n").unwrap();
        let proof = if sorry { "sorry" } else { "rfl" };
        std::fs::write(
            project.join("Main.lean"),
            format!("theorem t : 1 = 1 := by {proof}\n"),
        )
        .unwrap();
        // Build output is not scanned.
        std::fs::write(project.join(".lake/Old.lean"), "sorry sorry\n").unwrap();
    }

    /// A `lake` that appends its working directory and arguments to a
    /// file, then prints `output`; the file's path.
    fn recording_lake(&self, output: &str) -> PathBuf {
        let ran = self.f.temp.path().join("lake-ran");
        self.script(
            "lake",
            &format!("echo \"$(pwd) $*\" >> {}; echo '{output}'", ran.display()),
        );
        ran
    }

    /// A `lake` that never ends (a child of its own sleeping too); the
    /// file its process ids are written to.
    fn hanging_lake(&self) -> PathBuf {
        let pids = self.f.temp.path().join("lake-pids");
        self.script(
            "lake",
            &format!("sleep 600 & echo \"$$ $!\" > {}; wait", pids.display()),
        );
        pids
    }

    fn drive_with(&self, args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
        let output = loopx(&self.f)
            .args(["drive", "--dir", self.f.d(), "--root"])
            .arg(&self.root)
            .args(args)
            .env("PATH", &self.path)
            .envs(env.iter().copied())
            .output()
            .unwrap();
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }

    fn reports(&self) -> Vec<Value> {
        let folder = self.f.dir.join("formal/force_loop_reports");
        let mut names: Vec<PathBuf> = match std::fs::read_dir(&folder) {
            Ok(entries) => entries.map(|e| e.unwrap().path()).collect(),
            Err(_) => Vec::new(),
        };
        names.sort_by_key(|path| {
            let report: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
            report["tick"].as_u64().unwrap()
        });
        names
            .iter()
            .map(|path| serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap())
            .collect()
    }

    fn state_status(&self) -> String {
        let status = self.f.json(&["status", "--dir", self.f.d()]);
        status["state_status"].as_str().unwrap().to_owned()
    }
}

/// Every process id in `pids` (a file) is gone.
fn assert_gone(pids: &std::path::Path) {
    for pid in std::fs::read_to_string(pids).unwrap().split_whitespace() {
        let alive = Command::new("kill")
            .args(["-0", pid])
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap()
            .success();
        assert!(!alive, "lake's process {pid} outlived its timeout");
    }
}

fn forced(extra: &[&str]) -> Driven {
    let f = Fixture::new();
    let mut flags = vec![
        "--formal-policy",
        "force",
        "--formal-force-after-iteration",
        "--formal-typecheck",
    ];
    flags.extend_from_slice(extra);
    init(&f, &flags);
    Driven::new(f)
}

#[test]
fn the_pin_is_written_once_per_drive_start_and_the_agent_is_told_the_policy() {
    let f = Fixture::new();
    init(&f, &["--formal-policy", "on"]);
    let d = Driven::new(f);
    let seen = d.f.temp.path().join("seen");
    let agent = d.agent(&format!(
        "{{ env | grep '^AAS_AUTOLOOP_FORMAL_' | sort; cat \"$LOOPX_DIR/formal/host_policy.pin.json\"; grep -c 'Policy: force' || true; }} >> {}",
        seen.display()
    ));
    // The flag is over the environment, and the turns go by it.
    let (code, stderr) = d.drive_with(
        &[
            "--cmd",
            &agent,
            "--max-iterations",
            "2",
            "--formal-policy",
            "force",
        ],
        &[("AAS_AUTOLOOP_FORMAL_POLICY", "mention-only")],
    );
    assert_eq!(code, 0, "{stderr}");
    let pin_path = d.f.dir.join("formal/host_policy.pin.json");
    let first: Value = serde_json::from_slice(&std::fs::read(&pin_path).unwrap()).unwrap();
    assert_eq!(first["policy"], "force");
    assert_eq!(first["project"], "formal/");
    assert_eq!(first["force_credits"], 3);
    assert_eq!(first["pin_source"], "drive_start");
    assert_eq!(first["schema_version"], "formal_policy.v1");
    let mode = std::fs::metadata(&pin_path).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "the pin is private");
    let told = std::fs::read_to_string(&seen).unwrap();
    assert_eq!(
        told.matches("AAS_AUTOLOOP_FORMAL_POLICY=force\n").count(),
        2,
        "{told}"
    );
    assert!(
        told.contains("AAS_AUTOLOOP_FORMAL_PROJECT=formal/\n"),
        "{told}"
    );
    assert!(told.contains("AAS_AUTOLOOP_FORMAL_FORCE=0\n"), "{told}");
    assert_eq!(
        told.matches(first["pinned_at"].as_str().unwrap()).count(),
        2,
        "both turns saw the one pin of this start: {told}"
    );
    assert_eq!(
        told.matches("\n1\n").count(),
        2,
        "the prompt said force: {told}"
    );
    // The resolved policy became the standing orders: the next drive,
    // without the flag, goes by them.
    let orders = journal_events(&d.f.dir, "formal.orders_set");
    assert_eq!(orders.last().unwrap()["settings"]["policy"], "force");
    let (code, stderr) = d.drive_with(&["--cmd", &agent, "--max-iterations", "1"], &[]);
    assert_eq!(code, 0, "{stderr}");
    let second: Value = serde_json::from_slice(&std::fs::read(&pin_path).unwrap()).unwrap();
    assert_eq!(second["policy"], "force");
    assert_ne!(
        second["pinned_at"], first["pinned_at"],
        "a new start, a new pin"
    );
    assert_ne!(second["driver_pid"], first["driver_pid"]);
    d.f.assert_valid();
}

#[test]
fn a_force_tick_with_a_passing_lake_reports_clean_and_never_ends_the_loop() {
    let d = forced(&[]);
    d.lake_project(false);
    let ran = d.recording_lake("Build completed successfully.");
    let agent = d.agent("");
    let (code, stderr) = d.drive_with(&["--cmd", &agent, "--max-iterations", "2"], &[]);
    assert_eq!(code, 0, "{stderr}");
    let reports = d.reports();
    assert_eq!(reports.len(), 2, "a report a tick: {stderr}");
    let first = &reports[0];
    assert_eq!(first["schema_version"], "formal_force_report.v1");
    assert_eq!(first["tick"], 1);
    assert_eq!(first["iteration"], 1);
    assert_eq!(first["terminal"], "issue_free");
    assert_eq!(first["hygiene_status"], "clean");
    assert_eq!(first["typecheck"]["status"], "passed");
    assert_eq!(first["typecheck"]["exit_code"], 0);
    // Main.lean and lakefile.lean; .lake/ (build output) is not read.
    assert_eq!(first["scan"]["lean_files"], 2, "{first}");
    assert_eq!(first["scan"]["sorry_count"], 0);
    assert_eq!(first["claim_support_status"], "not_evaluated");
    assert_eq!(first["credits_remaining"], 2);
    assert_eq!(reports[1]["credits_remaining"], 1);
    let project = d.root.join("formal").canonicalize().unwrap();
    let ran = std::fs::read_to_string(&ran).unwrap();
    assert_eq!(ran, format!("{0} build\n{0} build\n", project.display()));
    let log = d.f.dir.join(first["typecheck"]["log"].as_str().unwrap());
    assert!(std::fs::read_to_string(log)
        .unwrap()
        .contains("Build completed"));
    assert!(
        stderr.contains("formal force tick 1 of 3: clean"),
        "{stderr}"
    );
    assert_eq!(d.state_status(), "running", "{stderr}");
    assert_eq!(d.f.stored_snapshot("formal")["credits_spent"], 2);
    d.f.assert_valid();
}

#[test]
fn a_failing_lake_and_a_sorry_are_gaps_and_the_drive_goes_on() {
    let d = forced(&[]);
    d.lake_project(true);
    d.script("lake", "echo 'error: unsolved goals' >&2; exit 1");
    let agent = d.agent("");
    let (code, stderr) = d.drive_with(&["--cmd", &agent, "--max-iterations", "2"], &[]);
    assert_eq!(code, 0, "{stderr}");
    let reports = d.reports();
    assert_eq!(reports.len(), 2);
    assert_eq!(reports[0]["typecheck"]["status"], "failed");
    assert_eq!(reports[0]["typecheck"]["exit_code"], 1);
    assert_eq!(reports[0]["scan"]["sorry_count"], 1);
    assert_eq!(reports[0]["hygiene_status"], "gaps");
    assert_eq!(reports[0]["terminal"], "issue_free");
    assert_eq!(reports[0]["claim_support_status"], "not_evaluated");
    assert_eq!(d.state_status(), "running");
}

#[test]
fn a_hanging_lake_is_killed_at_its_timeout_with_its_process_group() {
    let d = forced(&[]);
    d.lake_project(false);
    let pids = d.hanging_lake();
    let agent = d.agent("");
    let started = std::time::Instant::now();
    let (code, stderr) = d.drive_with(
        &[
            "--cmd",
            &agent,
            "--max-iterations",
            "1",
            "--iteration-timeout",
            "3",
        ],
        &[],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(
        started.elapsed().as_secs() < 60,
        "the typecheck was cut at 3 s"
    );
    let reports = d.reports();
    assert_eq!(reports[0]["typecheck"]["status"], "timed_out", "{stderr}");
    assert_eq!(reports[0]["typecheck"]["timeout_s"], 3);
    assert_eq!(reports[0]["hygiene_status"], "gaps");
    assert_gone(&pids);
    assert_eq!(d.state_status(), "running");
}

#[test]
fn without_lake_the_tick_records_tool_unavailable_and_the_drive_goes_on() {
    let d = forced(&[]);
    d.lake_project(false);
    let agent = d.agent("");
    assert!(
        !std::env::split_paths(&std::env::var_os("PATH").unwrap())
            .any(|dir| dir.join("lake").exists()),
        "this test needs a PATH without lake"
    );
    let (code, stderr) = d.drive_with(&["--cmd", &agent, "--max-iterations", "2"], &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(common::iteration_numbers(&d.f.dir), vec![1, 2]);
    let reports = d.reports();
    assert_eq!(reports.len(), 2);
    for report in &reports {
        assert_eq!(report["terminal"], "tool_unavailable");
        assert_eq!(report["hygiene_status"], "unavailable");
        assert_eq!(report["typecheck"]["status"], "tool_unavailable");
        assert_eq!(report["claim_support_status"], "not_evaluated");
    }
    assert_eq!(d.state_status(), "running");

    // No Lake project at all: the same, without a typecheck.
    let e = forced(&[]);
    let agent = e.agent("");
    let (code, stderr) = e.drive_with(&["--cmd", &agent, "--max-iterations", "1"], &[]);
    assert_eq!(code, 0, "{stderr}");
    let report = &e.reports()[0];
    assert_eq!(report["terminal"], "tool_unavailable");
    assert_eq!(report.get("typecheck"), None);
    assert_eq!(report.get("project_dir"), None);
}

#[test]
fn the_credits_run_out_once_and_a_restart_does_not_refill_them() {
    let d = forced(&["--formal-force-credits", "2"]);
    d.lake_project(false);
    d.script("lake", "exit 0");
    let agent = d.agent("");
    let (code, stderr) = d.drive_with(&["--cmd", &agent, "--max-iterations", "3"], &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(common::iteration_numbers(&d.f.dir).len(), 3);
    assert_eq!(d.reports().len(), 2, "{stderr}");
    assert_eq!(
        stderr.matches("all 2 credits are spent").count(),
        1,
        "{stderr}"
    );
    let (code, stderr) = d.drive_with(&["--cmd", &agent, "--max-iterations", "2"], &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(d.reports().len(), 2, "no tick after a restart: {stderr}");
    assert_eq!(
        stderr.matches("all 2 credits are spent").count(),
        1,
        "{stderr}"
    );
    // A larger budget given to a later drive allows more; spent stays spent.
    let (code, stderr) = d.drive_with(
        &[
            "--cmd",
            &agent,
            "--max-iterations",
            "2",
            "--formal-force-credits",
            "3",
        ],
        &[],
    );
    assert_eq!(code, 0, "{stderr}");
    let reports = d.reports();
    assert_eq!(reports.len(), 3, "{stderr}");
    assert_eq!(reports[2]["tick"], 3);
    assert_eq!(reports[2]["credits_remaining"], 0);
    assert_eq!(d.f.stored_snapshot("formal")["credits_spent"], 3);
}

#[test]
fn the_tick_runs_only_with_policy_force_and_the_flag() {
    for flags in [
        &["--formal-policy", "force", "--formal-typecheck"][..],
        &["--formal-policy", "on", "--formal-force-after-iteration"],
    ] {
        let f = Fixture::new();
        init(&f, flags);
        let d = Driven::new(f);
        d.lake_project(false);
        let ran = d.recording_lake("");
        let agent = d.agent("");
        let (code, stderr) = d.drive_with(&["--cmd", &agent, "--max-iterations", "1"], &[]);
        assert_eq!(code, 0, "{stderr}");
        assert!(d.reports().is_empty(), "{flags:?}");
        assert!(!ran.exists(), "{flags:?}");
    }
}

#[test]
fn the_force_flags_help_names_every_source() {
    let help = |command: &str| {
        let output = Command::new(common::loopx_path())
            .args([command, "--help"])
            .output()
            .unwrap();
        String::from_utf8(output.stdout).unwrap()
    };
    for command in ["init", "drive"] {
        let text = help(command);
        for flag in [
            "--formal-policy",
            "--formal-project",
            "--formal-force-after-iteration",
            "--formal-typecheck",
            "--formal-force-credits",
            "AAS_AUTOLOOP_FORMAL_POLICY",
        ] {
            assert!(text.contains(flag), "{command} --help lacks {flag}");
        }
    }
}

/// A loop with a Lake project in its formal/ folder and a Lean proof
/// artifact `p1` whose proof is formal/Proof/Main.lean (`proof`).
fn with_lean_artifact(proof: &str, artifact_type: &str, checker: &str) -> Driven {
    let f = Fixture::new();
    init(&f, &[]);
    let project = f.dir.join("formal");
    std::fs::create_dir_all(project.join("Proof")).unwrap();
    std::fs::write(project.join("lakefile.toml"), "name = \"proof\"\n").unwrap();
    std::fs::write(project.join("Proof/Main.lean"), proof).unwrap();
    std::fs::create_dir_all(f.dir.join("proof_artifacts")).unwrap();
    let artifact = serde_json::json!({
        "schema_version": "1.0", "id": "p1", "artifact_type": artifact_type,
        "machine_checkable": true, "target": "t", "proof_path": "formal/Proof/Main.lean",
        "checker": {"name": checker, "status": "passed"}
    });
    std::fs::write(f.dir.join("proof_artifacts/p1.json"), artifact.to_string()).unwrap();
    Driven::new(f)
}

impl Driven {
    /// `loopx formal recheck --evidence-id p1 --json` with the bin folder
    /// first on PATH (or only the system's, without `lake`, when not
    /// `with_bin`): (exit code, JSON, stderr).
    fn recheck(&self, with_bin: bool, extra: &[&str]) -> (i32, Value, String) {
        let path = match with_bin {
            true => self.path.clone(),
            false => std::env::var("PATH").unwrap(),
        };
        let output = loopx(&self.f)
            .args([
                "formal",
                "recheck",
                "--dir",
                self.f.d(),
                "--evidence-id",
                "p1",
                "--json",
            ])
            .args(extra)
            .env("PATH", path)
            .output()
            .unwrap();
        let json = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
        (
            output.status.code().unwrap_or(-1),
            json,
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }
}

#[test]
fn the_host_rechecks_a_lean_proof_with_lake_and_records_what_it_saw() {
    let d = with_lean_artifact("theorem t : 1 = 1 := rfl\n", "lean", "lake");
    let ran = d.recording_lake("checked");
    let (code, json, stderr) = d.recheck(true, &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(json["passed"], true, "{json}");
    assert_eq!(json["recheck"]["status"], "passed");
    assert_eq!(json["recheck"]["project"], "formal");
    assert_eq!(
        json["recheck"]["argv"],
        serde_json::json!(["lake", "env", "lean", "Proof/Main.lean"])
    );
    let project = d.f.dir.join("formal").canonicalize().unwrap();
    assert_eq!(
        std::fs::read_to_string(&ran).unwrap(),
        format!("{} env lean Proof/Main.lean\n", project.display())
    );
    let stored = d.f.stored_snapshot("formal");
    assert_eq!(stored["rechecks"]["p1"]["status"], "passed");
    assert_eq!(
        stored["rechecks"]["p1"]["proof_digest"],
        json["recheck"]["proof_digest"]
    );
    let status = d.f.json(&["formal", "status", "--dir", d.f.d()]);
    assert_eq!(status["settings"]["policy"], "off");
    assert_eq!(status["standing"]["rechecks"]["p1"]["status"], "passed");
    d.f.assert_valid();

    // Lean failing, or a sorry Lean lets through, is not passed.
    d.script("lake", "echo 'error: type mismatch' >&2; exit 1");
    let (code, json, _) = d.recheck(true, &[]);
    assert_eq!(
        (code, json["recheck"]["status"].as_str()),
        (1, Some("failed"))
    );
    std::fs::write(
        d.f.dir.join("formal/Proof/Main.lean"),
        "theorem t : 1 = 2 := by sorry\n",
    )
    .unwrap();
    d.script("lake", "echo \"declaration uses 'sorry'\"");
    let (code, json, _) = d.recheck(true, &[]);
    assert_eq!(code, 1);
    assert_eq!(
        (
            json["recheck"]["status"].as_str(),
            json["recheck"]["sorry_count"].as_u64()
        ),
        (Some("passed"), Some(1))
    );
    assert_eq!(json["passed"], false);
    assert_eq!(
        d.f.stored_snapshot("formal")["rechecks"]["p1"]["sorry_count"],
        1
    );
}

#[test]
fn a_recheck_is_killed_at_its_timeout_and_needs_lake() {
    let d = with_lean_artifact("theorem t : 1 = 1 := rfl\n", "lean", "lake");
    let pids = d.hanging_lake();
    let (code, json, stderr) = d.recheck(true, &["--timeout", "1"]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(json["recheck"]["status"], "timed_out");
    assert_gone(&pids);
    let (code, json, _) = d.recheck(false, &[]);
    assert_eq!(
        (code, json["recheck"]["status"].as_str()),
        (1, Some("tool_unavailable"))
    );
}

#[test]
fn an_artifact_the_host_cannot_recheck_is_refused_and_nothing_is_written() {
    for (artifact_type, checker) in [("coq", "lake"), ("lean", "lean")] {
        let d = with_lean_artifact("theorem t : 1 = 1 := rfl\n", artifact_type, checker);
        let ran = d.recording_lake("");
        let before = d.f.fingerprint();
        let (code, json, stderr) = d.recheck(true, &[]);
        assert_ne!(code, 0);
        assert_eq!(json["status"], "failed", "{stderr}");
        assert!(
            json["error"]
                .as_str()
                .unwrap()
                .contains("nothing was checked"),
            "{json}"
        );
        assert!(!ran.exists());
        assert_eq!(d.f.fingerprint(), before);
    }
    let d = with_lean_artifact("theorem t : 1 = 1 := rfl\n", "lean", "lake");
    std::fs::remove_file(d.f.dir.join("formal/lakefile.toml")).unwrap();
    let (code, json, _) = d.recheck(true, &[]);
    assert_ne!(code, 0);
    assert!(
        json["error"].as_str().unwrap().contains("no Lake project"),
        "{json}"
    );
}
