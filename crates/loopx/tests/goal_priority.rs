//! Legacy goal priority (`goal_priority.v1`) through the real binary: the
//! file and the `AAS_AUTOLOOP_GOAL_PRIORITY` switch, the turn prompt's
//! section and the validation warnings each mode gives, the template, and
//! a malformed file refused by name.

mod common;

use common::Fixture;
use serde_json::{json, Value};

const ENV: &str = "AAS_AUTOLOOP_GOAL_PRIORITY";
const SECTION: &str = "## Goal priority";
const REPLAN: &str = "REPLAN_REQUIRED";
const STREAK: &str = "local work without a goal delta (the cap is 2)";
/// `append-iteration` of one continuing iteration, run in the loop.
const APPEND: [&str; 7] = [
    "append-iteration",
    "--mode",
    "bounded-research",
    "--objective",
    "x",
    "--decision",
    "continue",
];
const BARE: &str = "claimed `advance` without saying what advanced";

fn write_config(f: &Fixture, config: &Value) {
    std::fs::write(f.dir.join("goal_priority.json"), config.to_string()).unwrap();
}

fn config(enabled: bool, mode: &str) -> Value {
    json!({
        "schema_version": "goal_priority.v1",
        "enabled": enabled,
        "discipline_mode": mode,
        "primary_campaign": "main",
        "primary_objective": "a checked proof of lemma B",
        "closed_campaigns": ["brute-force"],
        "max_consecutive_local_without_goal_delta": 2,
    })
}

/// A loop with two local iterations (a streak at the cap of 2) and then
/// nothing else: the state every mode is read against.
fn streaked() -> Fixture {
    let f = Fixture::new();
    f.init(6, &[]);
    for _ in 0..2 {
        f.append("continue", &["--local-without-goal-delta"])
            .success();
    }
    f
}

fn task_body(f: &Fixture, env: Option<&str>) -> String {
    let mut command = f.loopx();
    command.args(["task-body", "--dir", f.d()]);
    if let Some(value) = env {
        command.env(ENV, value);
    }
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "task-body failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn validate_warnings(f: &Fixture, env: Option<&str>) -> Vec<String> {
    let mut command = f.loopx();
    command.args(["validate", "--dir", f.d(), "--json"]);
    if let Some(value) = env {
        command.env(ENV, value);
    }
    let out = command.output().unwrap();
    assert!(out.status.success(), "validate failed");
    let view: Value = serde_json::from_slice(&out.stdout).unwrap();
    view["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap().to_owned())
        .filter(|w| w.starts_with("goal priority"))
        .collect()
}

#[test]
fn without_a_file_or_when_disabled_nothing_changes() {
    let f = streaked();
    let plain = task_body(&f, None);
    assert!(!plain.contains(SECTION), "{plain}");
    assert!(validate_warnings(&f, None).is_empty());
    // On without a config has nothing to enable.
    assert_eq!(task_body(&f, Some("on")), plain);
    let inert = validate_warnings(&f, Some("on"));
    assert_eq!(inert.len(), 1, "{inert:?}");
    assert!(inert[0].contains("=on has no effect"), "{inert:?}");
    // A config that does not say enabled: true stays off, in every mode.
    write_config(&f, &config(false, "hard"));
    assert_eq!(task_body(&f, None), plain);
    assert!(validate_warnings(&f, None).is_empty());
}

#[test]
fn soft_warns_in_validate_but_leaves_the_prompt_alone() {
    let f = streaked();
    let plain = task_body(&f, None);
    write_config(&f, &config(true, "soft"));
    assert_eq!(task_body(&f, None), plain);
    let warnings = validate_warnings(&f, None);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("the last 2 iterations were"),
        "{warnings:?}"
    );
    assert!(warnings[0].contains(STREAK), "{warnings:?}");
}

#[test]
fn advise_and_hard_add_the_goal_text_and_the_replan_warning_to_the_prompt() {
    let f = streaked();
    for mode in ["advise", "hard"] {
        write_config(&f, &config(true, mode));
        let body = task_body(&f, None);
        assert!(
            body.contains(&format!("{SECTION}\n\n- Mode: {mode} (advisory)")),
            "{body}"
        );
        assert!(
            body.contains("- It must produce: a checked proof of lemma B"),
            "{body}"
        );
        assert!(
            body.contains("- Closed campaigns (do not sample them): brute-force"),
            "{body}"
        );
        assert!(body.contains(REPLAN), "{body}");
        assert!(body.contains(STREAK), "{body}");
        assert_eq!(
            body.contains("The operator requires every turn to move the goal"),
            mode == "hard",
            "{body}"
        );
        // The section comes in its place after the contract, once.
        let at = body.find(SECTION).unwrap();
        assert!(at > body.find("## The one-iteration contract").unwrap());
        assert_eq!(body.matches(SECTION).count(), 1);
        assert_eq!(validate_warnings(&f, None).len(), 1);
    }
}

#[test]
fn a_bare_advance_is_warned_in_the_prompt_and_by_append_and_validate() {
    let f = Fixture::new();
    f.init(6, &[]);
    write_config(&f, &config(true, "advise"));
    let out = f
        .loopx()
        .args(f.append_words("continue"))
        .args(["--goal-contribution", "advance", "--campaign-id", "main"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("recorded goal contribution \"advance\" without saying what advanced"),
        "{stderr}"
    );
    let body = task_body(&f, None);
    assert!(body.contains(BARE), "{body}");
    assert!(!body.contains(REPLAN), "{body}");
    assert_eq!(validate_warnings(&f, None).len(), 1);
    // Saying what advanced clears it.
    f.append(
        "continue",
        &[
            "--goal-contribution",
            "advance",
            "--goal-contribution-detail",
            "lemma B.2 proved",
        ],
    )
    .success();
    assert!(!task_body(&f, None).contains(BARE));
    assert!(validate_warnings(&f, None).is_empty());
}

#[test]
fn the_switch_overrides_the_file() {
    let f = streaked();
    let plain = task_body(&f, None);
    // off disables an enabled config.
    write_config(&f, &config(true, "advise"));
    assert_eq!(task_body(&f, Some("off")), plain);
    assert!(validate_warnings(&f, Some("off")).is_empty());
    // on enables a config that exists but is disabled.
    write_config(&f, &config(false, "advise"));
    assert!(task_body(&f, Some("on")).contains(REPLAN));
    assert_eq!(validate_warnings(&f, Some("on")).len(), 1);
    // A word that is not a switch is refused, naming the variable.
    let out = f
        .loopx()
        .args(["task-body", "--dir", f.d()])
        .env(ENV, "sometimes")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains(ENV));
}

#[test]
fn a_goal_focus_enforce_loop_gets_no_goal_priority_section() {
    let f = Fixture::new();
    f.init(6, &["--goal-focus-mode", "enforce"]);
    write_config(&f, &config(true, "hard"));
    let body = task_body(&f, None);
    assert!(!body.contains(SECTION), "{body}");
}

#[test]
fn the_template_is_written_once_and_not_replaced_without_force() {
    let f = Fixture::new();
    f.init(3, &["--goal-priority-template"]);
    let path = f.dir.join("goal_priority.json");
    let template: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(template["enabled"], false);
    assert_eq!(template["discipline_mode"], "soft");
    assert_eq!(template["schema_version"], "goal_priority.v1");
    // The template itself is inert.
    assert!(!task_body(&f, None).contains(SECTION));

    // A second loop beside an edited file: refused, nothing written.
    let g = Fixture::new();
    std::fs::create_dir_all(&g.dir).unwrap();
    std::fs::write(g.dir.join("goal_priority.json"), b"{\"enabled\": true}\n").unwrap();
    let before = g.fingerprint();
    let out = g
        .loopx()
        .args(g.init_words())
        .arg("--goal-priority-template")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("goal_priority.json already exists"),
        "{stderr}"
    );
    assert!(stderr.contains("--force"), "{stderr}");
    assert_eq!(g.fingerprint(), before, "a refused init wrote something");

    // With --force the template replaces it and the loop is made.
    g.loopx()
        .args(g.init_words())
        .args(["--goal-priority-template", "--force"])
        .assert()
        .success();
    let replaced = std::fs::read_to_string(g.dir.join("goal_priority.json")).unwrap();
    assert_eq!(replaced, std::fs::read_to_string(&path).unwrap());

    // --force alone is not a flag of its own.
    let h = Fixture::new();
    let out = h
        .loopx()
        .args(h.init_words())
        .arg("--force")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(!h.dir.exists());
}

#[test]
fn a_malformed_file_is_refused_by_name_and_changes_nothing() {
    let f = Fixture::new();
    f.init(6, &[]);
    for bad in [
        "{not json",
        "{\"enabled\": \"yes\"}",
        "{\"discipline_mode\": \"strict\"}",
        "[]",
    ] {
        std::fs::write(f.dir.join("goal_priority.json"), bad).unwrap();
        for args in [&["task-body"][..], &APPEND[..]] {
            let (_, stderr) = f.refused_in_dir(args);
            assert!(stderr.contains("goal_priority.json"), "{bad}: {stderr}");
        }
        let (ok, view, _) = f.run_in_dir(&["validate"]);
        assert!(!ok, "{bad}: validate passed");
        assert!(
            view["errors"][0]
                .as_str()
                .unwrap()
                .contains("goal_priority.json"),
            "{view}"
        );
    }
    // A symlink in its place is not followed.
    std::fs::remove_file(f.dir.join("goal_priority.json")).unwrap();
    let outside = f.temp.path().join("outside.json");
    std::fs::write(&outside, config(true, "hard").to_string()).unwrap();
    std::os::unix::fs::symlink(&outside, f.dir.join("goal_priority.json")).unwrap();
    let (_, stderr) = f.refused_in_dir(&["task-body"]);
    assert!(stderr.contains("goal_priority.json"), "{stderr}");
}

#[test]
fn the_driver_refuses_to_start_on_a_malformed_file() {
    let f = Fixture::new();
    f.init(3, &[]);
    std::fs::write(f.dir.join("goal_priority.json"), "{\"enabled\": 1}").unwrap();
    let before = f.fingerprint();
    let out = f
        .loopx()
        .args(["drive", "--dir", f.d(), "--cmd", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "the operator's to fix");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("goal_priority.json"), "{stderr}");
    assert_eq!(f.fingerprint(), before, "the driver started");
}

#[test]
fn the_drivers_prompt_carries_the_section() {
    use std::os::unix::fs::PermissionsExt as _;
    let f = Fixture::new();
    f.init(3, &[]);
    for _ in 0..2 {
        f.append("continue", &["--local-without-goal-delta"])
            .success();
    }
    write_config(&f, &config(true, "advise"));
    let root = f.temp.path().join("project");
    std::fs::create_dir_all(&root).unwrap();
    let agent = f.temp.path().join("agent");
    std::fs::write(
        &agent,
        format!(
            "#!/bin/sh\ncat >/dev/null\n'{}' append-iteration --mode bounded-research --objective turn --decision stop --stop-reason loops_reached --goal-contribution replan >/dev/null\n",
            common::loopx_path().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = f
        .loopx()
        .args(["drive", "--dir", f.d(), "--root", root.to_str().unwrap()])
        .args(["--cmd", agent.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let logs: Vec<_> = std::fs::read_dir(f.dir.join("driver_logs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(logs.len(), 1, "{stderr}");
    let log = std::fs::read_to_string(&logs[0]).unwrap();
    assert!(
        log.contains("## Goal priority\n\n- Mode: advise (advisory)"),
        "{log}"
    );
    assert!(log.contains(REPLAN), "{log}");
}

#[test]
fn a_dry_run_shows_the_warnings_the_append_would_give_and_writes_nothing() {
    let f = Fixture::new();
    f.init(6, &[]);
    f.append("continue", &["--local-without-goal-delta"])
        .success();
    write_config(&f, &config(true, "soft"));
    let before = f.fingerprint();
    let (ok, view, stderr) =
        f.run_in_dir(&[&APPEND[..], &["--local-without-goal-delta", "--dry-run"]].concat());
    assert!(ok, "{stderr}");
    assert_eq!(f.fingerprint(), before, "a dry run wrote");
    let warnings = view["warnings"].as_array().unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w.as_str().unwrap().contains("the last 2 iterations were")),
        "{view}"
    );
}
