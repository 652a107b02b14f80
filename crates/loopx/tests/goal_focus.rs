//! Goal Focus v2 through the real binary: the mode a loop gets and why,
//! the direction rule committed as plan + decision, exact replay, the
//! cross-stream agreement `validate` checks, and every refusal leaving the
//! loop directory byte-for-byte unchanged.

mod common;
#[path = "../../loopx-store/tests/support/pg_server.rs"]
mod pg_server;

use common::Fixture;
use serde_json::{json, Value};

impl Fixture {
    /// A goal-focus command that must be refused without changing the
    /// loop directory; the error body.
    fn focus_refused(&self, args: &[&str]) -> Value {
        self.refused_in_dir(&[&["goal-focus"], args].concat()).0
    }

    fn registry(&self, value: Value) -> String {
        self.json_file("registry.json", &value)
    }
}

fn approach(id: &str, low: f64, high: f64) -> Value {
    json!({"approach_id": id, "summary": format!("try {id}"), "estimate": {"low": low, "high": high}})
}

/// Two campaigns whose leaders overlap, and a blocked approach.
fn overlapping() -> Value {
    json!({"campaigns": [
        {"campaign_id": "direct", "title": "Direct proof", "approaches": [approach("induction", 0.4, 0.9)]},
        {"campaign_id": "search", "approaches": [
            approach("counterexample", 0.3, 0.6),
            {"approach_id": "gpu-sweep", "estimate": {"low": 0.7, "high": 1.0},
             "eligibility": {"status": "blocked", "reason": "no GPU quota"},
             "reopen_conditions": ["GPU quota restored"]}
        ]}
    ]})
}

/// One approach whose lower bound is above every other upper bound.
fn dominant() -> Value {
    json!({"campaigns": [
        {"campaign_id": "direct", "approaches": [approach("induction", 0.7, 0.9)]},
        {"campaign_id": "search", "approaches": [approach("counterexample", 0.1, 0.4)]}
    ]})
}

#[test]
fn a_plain_init_is_monitor_by_default_status_says_why_and_appends_work_as_before() {
    let f = Fixture::new();
    f.init(5, &[]);
    let status = f.json(&["status", "--dir", f.d()]);
    assert_eq!(status["goal_focus_mode"], "monitor");
    let reason = status["goal_focus_mode_reason"].as_str().unwrap();
    assert!(reason.contains("without a review panel"), "{reason}");
    let focus = f.focus_ok(&["status"]);
    assert_eq!(focus["enforcement_mode"], "monitor");
    assert_eq!(focus["mode_source"], "default_without_panel");
    assert_eq!(focus["gate"], "reported");
    assert_eq!(focus["signals"][0]["trigger"], "missing_plan");
    f.append("continue", &[]).success();
    // A loop that never used Goal Focus gets no Goal Focus state or view.
    assert!(!f.dir.join("goal_focus.json").exists());
    f.assert_valid();

    let chosen = Fixture::new();
    chosen.init(5, &["--goal-focus-mode", "monitor"]);
    let focus = chosen.focus_ok(&["status"]);
    assert_eq!(focus["mode_source"], "chosen_at_init");
    assert!(focus["mode_reason"]
        .as_str()
        .unwrap()
        .contains("--goal-focus-mode monitor"));
}

#[test]
fn a_loop_created_with_a_review_panel_configured_is_enforce_by_default() {
    // panel.json placed in the directory before init, as the reference
    // keeps it.
    let f = Fixture::new();
    std::fs::create_dir_all(&f.dir).unwrap();
    std::fs::write(f.dir.join("panel.json"), r#"{"enabled": true}"#).unwrap();
    f.init(5, &[]);
    let focus = f.focus_ok(&["status"]);
    assert_eq!(focus["enforcement_mode"], "enforce");
    assert_eq!(focus["mode_source"], "default_with_panel");

    // The session switch, with no file.
    let switched = Fixture::new();
    switched
        .loopx()
        .args(switched.init_words())
        .env("AAS_AUTOLOOP_PANEL", "on")
        .assert()
        .success();
    assert_eq!(
        switched.focus_ok(&["status"])["enforcement_mode"],
        "enforce"
    );

    // A disabled panel, or the switch off, is no panel; an explicit mode wins.
    let disabled = Fixture::new();
    std::fs::create_dir_all(&disabled.dir).unwrap();
    std::fs::write(disabled.dir.join("panel.json"), r#"{"enabled": false}"#).unwrap();
    disabled.init(5, &[]);
    assert_eq!(
        disabled.focus_ok(&["status"])["enforcement_mode"],
        "monitor"
    );
    let chosen = Fixture::new();
    std::fs::create_dir_all(&chosen.dir).unwrap();
    std::fs::write(chosen.dir.join("panel.json"), r#"{"enabled": true}"#).unwrap();
    chosen.init(5, &["--goal-focus-mode", "monitor"]);
    assert_eq!(chosen.focus_ok(&["status"])["enforcement_mode"], "monitor");

    // An invalid panel.json is refused, not read as "no panel": nothing
    // is created.
    let broken = Fixture::new();
    std::fs::create_dir_all(&broken.dir).unwrap();
    std::fs::write(
        broken.dir.join("panel.json"),
        r#"{"enabled": true, "providrs": []}"#,
    )
    .unwrap();
    let before = broken.fingerprint();
    let out = broken.loopx().args(broken.init_words()).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("panel.json"), "{stderr}");
    assert_eq!(broken.fingerprint(), before);
}

#[test]
fn replan_commits_the_plan_and_its_decision_together_and_an_exact_replay_writes_nothing() {
    let f = Fixture::new();
    f.init(10, &[]);
    let registry = f.registry(overlapping());
    f.focus_ok(&["revise", "--registry", &registry]);
    let preview_before = f.fingerprint();
    let preview = f.focus_ok(&["replan", "--dry-run"]);
    assert_eq!(f.fingerprint(), preview_before, "a dry run wrote");
    assert_eq!(preview["dry_run"], true);

    let plan = f.focus_ok(&["replan", "--operation-id", "replan-1"]);
    assert_eq!(timeless(&plan["plan"]), timeless(&preview["plan"]));
    let selection = &plan["plan"]["selection"];
    assert_eq!(selection["kind"], "experiment");
    assert_eq!(
        selection["approach_ids"],
        json!(["induction", "counterexample"])
    );
    assert_eq!(plan["plan"]["state"], "active");
    assert_eq!(plan["plan"]["review"], "unreviewed");
    assert_eq!(plan["plan"]["trigger"], "missing_plan");
    assert_eq!(
        plan["plan"]["proposal"]["excluded"][0]["approach_id"],
        "gpu-sweep"
    );
    assert_eq!(plan["decision"]["decision"]["decision_id"], "replan-1");
    assert_eq!(plan["decision"]["decision"]["outcome"], "selected");
    assert_eq!(plan["decision"]["decision"]["plan_revision"], 1);

    let after = f.fingerprint();
    let replay = f.focus_ok(&["replan", "--operation-id", "replan-1"]);
    assert_eq!(replay["replayed"], true);
    assert_eq!(replay["plan"], plan["plan"]);
    assert_eq!(f.fingerprint(), after, "an exact replay wrote");

    let status = f.focus_ok(&["status"]);
    assert_eq!(status["gate"], "clear");
    assert_eq!(status["direction_decisions"], 1);
    assert_eq!(f.focus_ok(&["validate"])["status"], "ok");
    f.assert_valid();
    // The projection is exactly the status.
    let projection: Value =
        serde_json::from_slice(&std::fs::read(f.dir.join("goal_focus.json")).unwrap()).unwrap();
    assert_eq!(projection, status);
}

/// A plan without its commit time: a dry run cannot know when the commit
/// will happen; everything else it shows must be what is committed.
fn timeless(plan: &Value) -> Value {
    let mut plan = plan.clone();
    plan.as_object_mut().unwrap().remove("committed_at");
    plan
}

#[test]
fn a_robustly_dominant_approach_is_exploited_and_the_plan_expires_after_its_bound() {
    let f = Fixture::new();
    f.init(10, &[]);
    let registry = f.registry(dominant());
    f.focus_ok(&["revise", "--registry", &registry]);
    let plan = f.focus_ok(&["replan"]);
    let selection = &plan["plan"]["selection"];
    assert_eq!(selection["kind"], "exploit");
    assert_eq!(selection["approach_ids"], json!(["induction"]));
    assert_eq!(selection["horizon_iterations"], 3);
    for _ in 0..3 {
        f.append("continue", &["--global-delta", "none"]).success();
    }
    let status = f.focus_ok(&["status"]);
    let triggers: Vec<&str> = status["signals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["trigger"].as_str().unwrap())
        .collect();
    assert_eq!(triggers, ["plan_expired", "no_obligation_reduction"]);
    // Monitor mode reports and never blocks: appends still bank.
    assert_eq!(status["gate"], "reported");
    let next = f.focus_ok(&["replan"]);
    assert_eq!(next["plan"]["plan_revision"], 2);
    assert_eq!(next["plan"]["trigger"], "plan_expired");
    assert_eq!(next["plan"]["committed_at_iteration"], 3);
    assert_eq!(f.focus_ok(&["validate"])["status"], "ok");
}

#[test]
fn a_registry_revised_after_the_plan_fails_validate_until_a_replan() {
    let f = Fixture::new();
    f.init(10, &[]);
    let first = f.registry(overlapping());
    f.focus_ok(&["revise", "--registry", &first]);
    f.focus_ok(&["replan"]);
    let second = f.registry(dominant());
    f.focus_ok(&["revise", "--registry", &second]);
    let (ok, validation, _) = f.focus(&["validate"]);
    assert!(!ok, "validate passed a plan pinned to a replaced registry");
    let errors = validation["errors"].to_string();
    assert!(errors.contains("approach registry revision 1"), "{errors}");
    assert!(errors.contains("--trigger revision_drift"), "{errors}");
    let status = f.focus_ok(&["status"]);
    assert_eq!(status["signals"][0]["trigger"], "revision_drift");
    let replan = f.focus_ok(&["replan"]);
    assert_eq!(replan["plan"]["trigger"], "revision_drift");
    assert_eq!(replan["plan"]["registry_pin"]["revision"], 2);
    assert_eq!(f.focus_ok(&["validate"])["status"], "ok");
}

#[test]
fn enforce_mode_never_selects_a_direction_nobody_reviewed() {
    let f = Fixture::new();
    f.init(10, &["--goal-focus-mode", "enforce"]);
    let registry = f.registry(dominant());
    f.focus_ok(&["revise", "--registry", &registry]);
    let status = f.focus_ok(&["status"]);
    assert_eq!(status["mode_source"], "chosen_at_init");
    assert_eq!(status["gate"], "blocked");
    let replan = f.focus_ok(&["replan"]);
    let plan = &replan["plan"];
    assert_eq!(plan["state"], "needs_replan");
    assert_eq!(plan["review"], "strategy_review_required");
    assert_eq!(plan["selection"], Value::Null);
    // What the rule proposes is kept for the reviewer, never selected.
    assert_eq!(
        plan["proposal"]["selection"]["approach_ids"],
        json!(["induction"])
    );
    assert_eq!(
        replan["decision"]["decision"]["outcome"],
        "strategy_review_required"
    );
    let status = f.focus_ok(&["status"]);
    assert_eq!(status["gate"], "blocked");
    assert_eq!(status["signals"][0]["trigger"], "plan_not_active");
    assert_eq!(f.focus_ok(&["validate"])["status"], "ok");
}

#[test]
fn every_refusal_leaves_the_loop_directory_byte_for_byte_unchanged() {
    let f = Fixture::new();
    f.init(10, &[]);
    let registry = f.registry(overlapping());
    f.focus_ok(&["revise", "--registry", &registry]);
    f.focus_ok(&["replan", "--operation-id", "replan-1"]);

    // Nothing fires: a replan needs a named trigger.
    let refused = f.focus_refused(&["replan"]);
    assert_eq!(refused["class"], "refused");
    // The core names the field; the CLI's hint names its flag.
    assert!(refused["error"]
        .as_str()
        .unwrap()
        .contains("name the trigger manual"));
    assert!(refused["hint"]
        .as_str()
        .unwrap()
        .contains("--trigger manual"));
    // The same operation id for a different request.
    let conflict = f.focus_refused(&[
        "replan",
        "--trigger",
        "manual",
        "--operation-id",
        "replan-1",
    ]);
    assert_eq!(conflict["class"], "conflict");
    // A contract whose obligations depend on each other in a cycle.
    let cyclic = f.json_file(
        "cyclic.json",
        &json!({"goal": "prove B", "obligations": [
            {"obligation_id": "o1", "description": "a", "depends_on": ["o2"]},
            {"obligation_id": "o2", "description": "b", "depends_on": ["o1"]}
        ]}),
    );
    let refused = f.focus_refused(&["revise", "--contract", &cyclic]);
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("o1 -> o2 -> o1"),
        "{refused}"
    );
    // An estimate that is not an interval in [0, 1].
    let bad = f.registry(
        json!({"campaigns": [{"campaign_id": "c", "approaches": [approach("a", 0.9, 0.2)]}]}),
    );
    f.focus_refused(&["revise", "--registry", &bad]);
    // Hostile text: a terminal escape in a summary.
    let hostile = f.registry(json!({"campaigns": [{"campaign_id": "c", "approaches": [
        {"approach_id": "a", "summary": "\u{1b}[2Jgone", "estimate": {"low": 0.1, "high": 0.2}}
    ]}]}));
    f.focus_refused(&["revise", "--registry", &hostile]);
    // A path for an id.
    let path_id = f.registry(json!({"campaigns": [{"campaign_id": "../x", "approaches": []}]}));
    f.focus_refused(&["revise", "--registry", &path_id]);
    // A document without end.
    f.focus_refused(&["revise", "--registry", "/dev/zero"]);
    // A stale base revision.
    let fine = f.registry(dominant());
    let stale = f.focus_refused(&["revise", "--registry", &fine, "--base-revision", "0"]);
    assert_eq!(stale["class"], "stale");

    let off = Fixture::new();
    off.init(5, &["--goal-focus-mode", "off"]);
    let refused = off.focus_refused(&["replan", "--trigger", "manual"]);
    assert!(refused["error"]
        .as_str()
        .unwrap()
        .contains("Goal Focus is off"));
    let registry = off.registry(dominant());
    off.focus_refused(&["revise", "--registry", &registry]);
    assert_eq!(off.focus_ok(&["status"])["gate"], "not_applied");
}

#[test]
fn reconcile_rewrites_the_projection_from_the_store() {
    let f = Fixture::new();
    f.init(10, &[]);
    let registry = f.registry(dominant());
    f.focus_ok(&["revise", "--registry", &registry]);
    f.focus_ok(&["replan"]);
    let projection = f.dir.join("goal_focus.json");
    let committed = std::fs::read(&projection).unwrap();
    std::fs::write(&projection, b"{\"forged\": true}").unwrap();
    let reconciled = f.focus_ok(&["reconcile"]);
    assert!(reconciled["views"].to_string().contains("goal_focus.json"));
    assert_eq!(std::fs::read(&projection).unwrap(), committed);
}

#[test]
fn every_goal_focus_command_has_help() {
    let f = Fixture::new();
    for command in [
        "status",
        "validate",
        "replan",
        "reconcile",
        "revise",
        "review",
        "quarantine",
        "recover-quarantine",
        "recover-dispatch",
        "strategy-brief",
        "strategy-review",
    ] {
        let output = f
            .loopx()
            .args(["goal-focus", command, "--help"])
            .output()
            .unwrap();
        assert!(output.status.success(), "{command} --help failed");
        assert!(!output.stdout.is_empty());
    }
}

/// Run `goal-focus replan` paused at `failpoint` and SIGKILL it there.
fn kill_replan_at(f: &Fixture, failpoint: &str, operation_id: &str) {
    let mut command = std::process::Command::new(common::loopx_path());
    command
        .args([
            "goal-focus",
            "replan",
            "--dir",
            f.d(),
            "--trigger",
            "manual",
        ])
        .args(["--operation-id", operation_id])
        .env("LOOPX_REGISTRY_DIR", &f.registry)
        .env_remove("LOOPX_STORE");
    common::kill_at_failpoint(command, failpoint);
}

#[test]
fn a_replan_killed_mid_commit_leaves_neither_plan_nor_decision_and_its_replay_commits_both_once() {
    let f = Fixture::new();
    f.init(10, &[]);
    let registry = f.registry(dominant());
    f.focus_ok(&["revise", "--registry", &registry]);
    f.focus_ok(&["replan"]);
    // Inside the one transaction: the plan's journal entry, its snapshot,
    // and between the plan and its decision.
    let cases = [
        "sqlite.commit.before_journal",
        "sqlite.commit.before_snapshot",
        "sqlite.commit_all.between",
    ];
    for (index, failpoint) in cases.into_iter().enumerate() {
        let before = f.focus_ok(&["status"])["direction_decisions"]
            .as_u64()
            .unwrap();
        let operation_id = format!("crash-{index}");
        kill_replan_at(&f, failpoint, &operation_id);
        let status = f.focus_ok(&["status"]);
        let after = status["direction_decisions"].as_u64().unwrap();
        assert_eq!(after, before, "{failpoint}");
        assert_eq!(
            status["current_plan"]["plan_revision"], after,
            "{failpoint}"
        );
        assert_eq!(f.focus_ok(&["validate"])["status"], "ok", "{failpoint}");
        f.assert_valid();
        // The caller never saw a reply: repeating the operation finishes
        // (or returns) it, exactly once.
        let replay = f.focus_ok(&[
            "replan",
            "--trigger",
            "manual",
            "--operation-id",
            &operation_id,
        ]);
        assert_eq!(replay["replayed"], false, "{failpoint}");
        assert_eq!(replay["plan"]["plan_revision"], before + 1, "{failpoint}");
        let again = f.focus_ok(&[
            "replan",
            "--trigger",
            "manual",
            "--operation-id",
            &operation_id,
        ]);
        assert_eq!(again["replayed"], true, "{failpoint}");
        let status = f.focus_ok(&["status"]);
        assert_eq!(status["direction_decisions"], before + 1, "{failpoint}");
        assert_eq!(f.focus_ok(&["validate"])["status"], "ok", "{failpoint}");
    }
}

#[test]
fn goal_focus_state_lives_in_postgresql_as_in_sqlite() {
    let Some(url) = pg_server::database() else {
        return;
    };
    let f = Fixture::new();
    let store = ["--store", url.as_str()];
    f.loopx()
        .args(store)
        .args(f.init_words())
        .assert()
        .success();
    let run = |args: &[&str]| -> Value {
        let output = f
            .loopx()
            .args(store)
            .arg("goal-focus")
            .args(args)
            .args(["--dir", f.d(), "--json"])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(!text.contains(pg_server::PASSWORD), "{text}");
        serde_json::from_str(&text).unwrap()
    };
    let registry = f.registry(overlapping());
    run(&["revise", "--registry", &registry]);
    let plan = run(&["replan", "--operation-id", "pg-1"]);
    assert_eq!(plan["plan"]["selection"]["kind"], "experiment");
    assert_eq!(run(&["replan", "--operation-id", "pg-1"])["replayed"], true);
    assert_eq!(run(&["status"])["direction_decisions"], 1);
    assert_eq!(run(&["validate"])["status"], "ok");
}
