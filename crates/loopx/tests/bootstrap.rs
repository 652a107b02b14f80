//! `loopx bootstrap` and `apply-defaults` through the real binary: a
//! force-loop profile's pins, checked against the reference kit's own
//! profiles and defaults (fixtures/force_loop/, generated from the kit).

mod common;

use common::Fixture;
use serde_json::Value;

fn reference() -> Value {
    serde_json::from_str(include_str!("fixtures/force_loop/profiles.json")).unwrap()
}

/// `loopx <args> --dir D --json`: exit code and JSON.
fn run(f: &Fixture, args: &[&str]) -> (i32, Value, String) {
    let output = f
        .loopx()
        .args(args)
        .args(["--dir", f.d(), "--json"])
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        serde_json::from_slice(&output.stdout).unwrap_or(Value::Null),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn bootstrap(f: &Fixture, profile: &str) -> Value {
    let (code, view, stderr) = run(
        f,
        &[
            "bootstrap",
            "--profile",
            profile,
            "--goal",
            "Prove lemma B",
            "--success-criteria",
            "a checked proof",
        ],
    );
    assert_eq!(code, 0, "{view} {stderr}");
    view
}

fn file(f: &Fixture, name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(f.dir.join(name)).unwrap()).unwrap()
}

#[test]
fn each_profile_pins_what_the_reference_kit_ships_and_a_second_run_changes_nothing() {
    let reference = reference();
    for profile in ["general", "formal"] {
        let want = &reference[profile];
        let f = Fixture::new();
        let view = bootstrap(&f, profile);
        assert_eq!(view["created"], true, "{view}");
        let status = f.json(&["status", "--dir", f.d()]);
        assert_eq!(
            status["goal_focus_mode"], want["goal_focus_mode"],
            "{status}"
        );
        let priority = file(&f, "goal_priority.json");
        assert_eq!(priority["enabled"], want["goal_priority_enabled"]);
        assert_eq!(
            priority["discipline_mode"],
            want["goal_priority_discipline"]
        );
        assert_eq!(
            priority["max_consecutive_local_without_goal_delta"],
            reference["goal_priority_base"]["max_consecutive_local_without_goal_delta"]
        );
        assert_eq!(file(&f, "panel.json")["enabled"], want["panel_enabled"]);
        let formal = f.json(&["formal", "status", "--dir", f.d()]);
        let text = formal.to_string();
        assert!(
            text.contains(&format!("\"policy\":{}", want["formal_policy"])),
            "{formal}"
        );
        assert!(
            text.contains(&format!("\"typecheck\":{}", want["formal_typecheck"])),
            "{formal}"
        );
        // The compute pin holds without a plan: the prompt states it.
        let list = |key: &str| {
            (want[key].as_array().unwrap().iter())
                .map(|s| s.as_str().unwrap())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let body = f.json(&["task-body", "--dir", f.d()])["body"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(
            body.contains(&format!(
                "allowed: {}; forbidden: {}",
                list("compute_allowed"),
                list("compute_forbidden")
            )),
            "{body}"
        );
        if profile == "formal" {
            assert_eq!(status["budget"]["max_iterations"], 40, "{status}");
        }
        // Idempotent: the same bootstrap again adopts and changes nothing.
        let before = f.fingerprint();
        let again = bootstrap(&f, profile);
        assert_eq!(again["created"], false);
        assert!(
            (again["pins"].as_array().unwrap().iter()).all(|p| p["changed"] == false),
            "{again}"
        );
        assert_eq!(f.fingerprint(), before, "a second bootstrap wrote");
        f.assert_valid();
    }
}

#[test]
fn apply_defaults_reports_each_change_and_keeps_a_loops_mode() {
    let f = Fixture::new();
    f.init(5, &["--goal-focus-mode", "monitor"]);
    std::fs::write(
        f.dir.join("panel.json"),
        r#"{"providers": ["codex"], "max_attempts": 2}"#,
    )
    .unwrap();
    let (code, view, stderr) = run(&f, &["apply-defaults", "--profile", "general"]);
    assert_eq!(code, 0, "{stderr}");
    let pin = |name: &str| {
        (view["pins"].as_array().unwrap().iter())
            .find(|p| p["pin"] == name)
            .unwrap()
            .clone()
    };
    let mode = pin("goal_focus_mode");
    assert_eq!(
        (&mode["changed"], &mode["was"]),
        (&Value::Bool(false), &Value::from("monitor"))
    );
    assert!(
        mode["note"].as_str().unwrap().contains("set at init"),
        "{mode}"
    );
    assert_eq!(pin("panel")["changed"], true);
    assert_eq!(pin("goal_priority")["changed"], true);
    assert_eq!(pin("compute")["changed"], true);
    // general pins the formal policy off, which it already is.
    assert_eq!(pin("formal")["changed"], false, "{view}");
    // The operator's other panel settings are kept.
    let panel = file(&f, "panel.json");
    assert_eq!(panel["providers"][0], "codex");
    assert_eq!(panel["max_attempts"], 2);
    assert_eq!(panel["enabled"], true);
    f.assert_valid();
}

#[test]
fn a_file_it_cannot_read_as_settings_is_refused_and_nothing_changes() {
    let f = Fixture::new();
    f.init(5, &[]);
    std::fs::write(
        f.dir.join("panel.json"),
        r#"{"enabled": true, "colour": "red"}"#,
    )
    .unwrap();
    let (_, stderr) = f.refused_in_dir(&["apply-defaults", "--profile", "formal"]);
    assert!(stderr.contains("panel.json"), "{stderr}");
    // A new loop's directory with a panel.json the panel refuses: nothing made.
    let planted = Fixture::new();
    std::fs::create_dir_all(&planted.dir).unwrap();
    std::fs::write(planted.dir.join("panel.json"), r#"{"colour": "red"}"#).unwrap();
    let (code, _, stderr) = run(
        &planted,
        &[
            "bootstrap",
            "--profile",
            "general",
            "--goal",
            "g",
            "--success-criteria",
            "s",
        ],
    );
    assert_ne!(code, 0);
    assert!(stderr.contains("colour"), "{stderr}");
    assert!(!planted.dir.join("loopx.sqlite").exists());
    // bootstrap without a loop and without a goal: refused, nothing made.
    let empty = Fixture::new();
    let (code, _, stderr) = run(&empty, &["bootstrap", "--profile", "general"]);
    assert_ne!(code, 0);
    assert!(stderr.contains("--goal"), "{stderr}");
    assert!(!empty.dir.join("loopx.sqlite").exists());
}

#[test]
fn a_host_policy_file_changes_the_profiles_pins() {
    use std::os::unix::fs::PermissionsExt;
    let f = Fixture::new();
    let policy = f.temp.path().join("host.policy");
    std::fs::write(
        &policy,
        "AAS_AUTOLOOP_GOAL_PRIORITY=off\nAAS_AUTOLOOP_FORMAL_POLICY=force\nAAS_AUTOLOOP_FORMAL_TYPECHECK=0\nAAS_FORCE_LOOP_COMPUTE_LANES=hetzner\n",
    )
    .unwrap();
    let policy_path = policy.to_str().unwrap().to_owned();
    // Others may read it: refused, and no loop is made.
    std::fs::set_permissions(&policy, std::fs::Permissions::from_mode(0o644)).unwrap();
    let words = [
        "bootstrap",
        "--profile",
        "general",
        "--goal",
        "g",
        "--success-criteria",
        "s",
        "--policy-file",
        &policy_path,
    ];
    let (code, _, stderr) = run(&f, &words);
    assert_ne!(code, 0);
    assert!(stderr.contains("private to you"), "{stderr}");
    assert!(!f.dir.join("loopx.sqlite").exists());
    std::fs::set_permissions(&policy, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (code, view, stderr) = run(&f, &words);
    assert_eq!(code, 0, "{view} {stderr}");
    assert_eq!(file(&f, "goal_priority.json")["enabled"], false);
    let formal = f.json(&["formal", "status", "--dir", f.d()]).to_string();
    assert!(formal.contains("\"policy\":\"force\""), "{formal}");
    assert!(formal.contains("\"typecheck\":false"), "{formal}");
    let body = f.json(&["task-body", "--dir", f.d()])["body"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        body.contains("allowed: hetzner, local; forbidden: github-actions"),
        "{body}"
    );
}
