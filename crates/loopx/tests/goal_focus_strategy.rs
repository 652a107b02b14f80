//! Strategy review through the real binary: in enforce mode a replan only
//! proposes a direction; a `strategy_advice.v1` from a reviewer of another
//! known family, bound to the exact goal contract, registry and plan it
//! read, commits the reviewed plan and its decision in one transaction (or,
//! objecting, leaves `needs_replan` with reviewer dissent). Every refusal
//! leaves the loop directory byte-for-byte unchanged; a kill -9 inside the
//! commit leaves plan and decision both or neither; a contract or registry
//! revised between the judgement and the commit stops the commit.

mod common;

use common::Fixture;
use serde_json::{json, Value};

impl Fixture {
    /// A goal-focus command that must be refused without changing the
    /// loop directory; its error text.
    fn focus_refused(&self, args: &[&str]) -> String {
        self.refused_in_dir(&[&["goal-focus"], args].concat()).1
    }

    /// An enforce loop whose replan proposed an experiment of induction
    /// and counterexample (overlapping), with `weak` dominated.
    fn proposed() -> Fixture {
        let f = Fixture::new();
        f.init(10, &["--goal-focus-mode", "enforce"]);
        let registry = f.json_file("registry.json", &registry(0.4));
        f.focus_ok(&["revise", "--registry", &registry]);
        let plan = f.focus_ok(&["replan"]);
        assert_eq!(plan["plan"]["review"], "strategy_review_required");
        f
    }

    /// `bind` from the brief, with claude as the executor.
    fn bind(&self) -> Value {
        self.focus_ok(&["strategy-brief", "--executor", "claude"])["brief"]["bind"].clone()
    }

    fn review_args(&self, advice: &Value, extra: &[&str]) -> Vec<String> {
        let file = self.json_file("advice.json", advice);
        let mut args: Vec<String> = ["strategy-review", "--file", &file]
            .map(str::to_owned)
            .to_vec();
        args.extend(extra.iter().map(|e| (*e).to_owned()));
        args
    }

    fn strategy_review(&self, advice: &Value, extra: &[&str]) -> Value {
        let args = self.review_args(advice, extra);
        self.focus_ok(&args.iter().map(String::as_str).collect::<Vec<_>>())
    }

    fn strategy_refused(&self, advice: &Value, extra: &[&str]) -> String {
        let args = self.review_args(advice, extra);
        self.focus_refused(&args.iter().map(String::as_str).collect::<Vec<_>>())
    }
}

fn approach(id: &str, low: f64, high: f64) -> Value {
    json!({"approach_id": id, "estimate": {"low": low, "high": high}})
}

fn registry(induction_low: f64) -> Value {
    json!({"campaigns": [
        {"campaign_id": "direct", "approaches": [approach("induction", induction_low, 0.9)]},
        {"campaign_id": "search", "approaches": [
            approach("counterexample", 0.3, 0.6),
            approach("weak", 0.0, 0.1)
        ]}
    ]})
}

fn advice(bind: &Value, provider: &str, verdict: &str) -> Value {
    json!({
        "schema": "strategy_advice.v1",
        "reviewer": {"provider": provider},
        "reviewed": bind,
        "verdict": verdict,
        "rationale": "two overlapping leaders: one iteration each tells them apart"
    })
}

const CLAUDE: [&str; 2] = ["--executor", "claude"];

#[test]
fn an_endorsement_from_another_family_commits_the_reviewed_plan_with_its_decision() {
    let f = Fixture::proposed();
    let brief = f.focus_ok(&["strategy-brief", "--executor", "claude"])["brief"].clone();
    assert_eq!(brief["answer_schema"], "strategy_advice.v1");
    assert_eq!(brief["executor"]["family"], "anthropic");
    assert_eq!(brief["current_plan"]["plan_revision"], 1);
    assert_eq!(
        brief["eligible"],
        json!(["induction", "counterexample", "weak"])
    );
    let endorse = advice(&brief["bind"], "codex", "endorse");
    let id = ["--executor", "claude", "--operation-id", "review-1"];
    let committed = f.strategy_review(&endorse, &id);
    let plan = &committed["plan"];
    assert_eq!(plan["plan_revision"], 2);
    assert_eq!(plan["state"], "active");
    assert_eq!(plan["review"], "reviewed");
    assert_eq!(
        plan["selection"]["approach_ids"],
        json!(["induction", "counterexample"])
    );
    assert_eq!(plan["strategy_review"]["reviewer"]["family"], "openai");
    assert_eq!(plan["strategy_review"]["executor"]["provider"], "claude");
    assert_eq!(plan["strategy_review"]["reviewed_plan_revision"], 1);
    let decision = &committed["decision"]["decision"];
    assert_eq!(decision["decision_id"], "review-1");
    assert_eq!(decision["outcome"], "selected");
    assert_eq!(decision["plan_revision"], 2);
    let status = f.focus_ok(&["status"]);
    assert_eq!(status["gate"], "clear");
    assert_eq!(status["direction_decisions"], 2);
    assert_eq!(f.focus_ok(&["validate"])["status"], "ok");
    f.assert_valid();
    // The exact advice again under its operation id: the receipt, no write.
    let before = f.fingerprint();
    let replay = f.strategy_review(&endorse, &id);
    assert_eq!(replay["replayed"], true);
    assert_eq!(replay["plan"], committed["plan"]);
    assert_eq!(f.fingerprint(), before, "a replay wrote");
    // Under a new id, the reviewed plan is no longer awaiting a review.
    let again = f.strategy_refused(&endorse, &CLAUDE);
    assert!(again.contains("not awaiting a strategy review"), "{again}");
}

#[test]
fn a_reviewer_may_propose_another_selectable_direction_but_not_a_dominated_one() {
    let f = Fixture::proposed();
    let bind = f.bind();
    let mut propose = advice(&bind, "deepseek", "propose");
    propose["selection"] = json!(["weak"]);
    let refused = f.strategy_refused(&propose, &CLAUDE);
    assert!(refused.contains("cannot be best"), "{refused}");
    propose["selection"] = json!(["induction", "counterexample", "weak", "induction"]);
    let refused = f.strategy_refused(&propose, &CLAUDE);
    assert!(refused.contains("1 to 3 approaches"), "{refused}");
    propose["selection"] = json!(["counterexample"]);
    let plan = f.strategy_review(&propose, &CLAUDE)["plan"].clone();
    assert_eq!(plan["state"], "active");
    assert_eq!(plan["selection"]["approach_ids"], json!(["counterexample"]));
    assert_eq!(plan["selection"]["kind"], "experiment");
    assert_eq!(plan["strategy_review"]["reviewer"]["family"], "deepseek");
    assert_eq!(f.focus_ok(&["validate"])["status"], "ok");
}

#[test]
fn a_reviewer_of_the_executors_family_or_an_unknown_one_is_refused() {
    let f = Fixture::proposed();
    let bind = f.bind();
    let same = f.strategy_refused(&advice(&bind, "claude", "endorse"), &CLAUDE);
    assert!(same.contains("the executor's own"), "{same}");
    let unknown = f.strategy_refused(&advice(&bind, "mystery-llm", "endorse"), &CLAUDE);
    assert!(unknown.contains("no verified family"), "{unknown}");
    // No driver and no --executor: the executor is unknown; fail closed.
    let no_executor = f.strategy_refused(&advice(&bind, "codex", "endorse"), &[]);
    assert!(no_executor.contains("--executor PROVIDER"), "{no_executor}");
    let bad_executor =
        f.strategy_refused(&advice(&bind, "codex", "endorse"), &["--executor", "nope"]);
    assert!(bad_executor.contains("executor provider"), "{bad_executor}");
    // An endpoint override makes the reviewer's family unknown.
    let before = f.fingerprint();
    let file = f.json_file("advice.json", &advice(&bind, "codex", "endorse"));
    let output = f
        .loopx()
        .args(["goal-focus", "strategy-review", "--file", &file])
        .args(["--executor", "claude", "--dir", f.d()])
        .env("OPENAI_BASE_URL", "http://127.0.0.1:9/")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("no verified family"), "{stderr}");
    assert_eq!(f.fingerprint(), before);
}

#[test]
fn an_advice_bound_to_any_other_version_is_refused() {
    let f = Fixture::proposed();
    let bind = f.bind();
    // Same revision, another fingerprint: as good as another document.
    for what in ["goal_contract", "approach_registry", "current_plan"] {
        let mut forged = bind.clone();
        let fingerprint = forged[what]["fingerprint"].as_str().unwrap().to_owned();
        let flipped = match fingerprint.ends_with('0') {
            true => format!("{}1", &fingerprint[..fingerprint.len() - 1]),
            false => format!("{}0", &fingerprint[..fingerprint.len() - 1]),
        };
        forged[what]["fingerprint"] = json!(flipped);
        let refused = f.strategy_refused(&advice(&forged, "codex", "endorse"), &CLAUDE);
        assert!(
            refused.contains("exact versions it read"),
            "{what}: {refused}"
        );
    }
    // The registry revised after the brief: the advice read the old one.
    let registry = f.json_file("registry2.json", &registry(0.45));
    f.focus_ok(&["revise", "--registry", &registry]);
    let stale = f.strategy_refused(&advice(&bind, "codex", "endorse"), &CLAUDE);
    assert!(stale.contains("approach registry revision 1"), "{stale}");
}

#[test]
fn an_objection_keeps_the_plan_without_a_direction_and_fires_reviewer_dissent() {
    let f = Fixture::proposed();
    let bind = f.bind();
    let bare = f.strategy_refused(&advice(&bind, "codex", "object"), &CLAUDE);
    assert!(bare.contains("needs at least one reason"), "{bare}");
    let mut object = advice(&bind, "codex", "object");
    object["reasons"] = json!(["counterexample search has no stopping rule"]);
    let committed = f.strategy_review(&object, &CLAUDE);
    assert_eq!(committed["plan"]["state"], "needs_replan");
    assert_eq!(committed["plan"]["review"], "strategy_objected");
    assert_eq!(committed["plan"]["selection"], Value::Null);
    assert_eq!(
        committed["decision"]["decision"]["outcome"],
        "strategy_objected"
    );
    let status = f.focus_ok(&["status"]);
    assert_eq!(status["gate"], "blocked");
    let dissent = (status["signals"].as_array().unwrap().iter())
        .find(|s| s["trigger"] == "reviewer_dissent")
        .unwrap_or_else(|| panic!("no reviewer dissent: {status}"));
    assert!(dissent["detail"]
        .as_str()
        .unwrap()
        .contains("no stopping rule"));
    assert_eq!(f.focus_ok(&["validate"])["status"], "ok");
    // A replan proposes again, and that proposal awaits a review.
    let replan = f.focus_ok(&["replan"]);
    assert_eq!(replan["plan"]["review"], "strategy_review_required");
    assert_eq!(replan["plan"]["plan_revision"], 3);
}

#[test]
fn a_malformed_advice_is_refused_with_what_it_must_be() {
    let f = Fixture::proposed();
    let bind = f.bind();
    let mut typo = advice(&bind, "codex", "endorse");
    typo["verdict_reason"] = json!("fine");
    let refused = f.strategy_refused(&typo, &CLAUDE);
    assert!(
        refused.contains("unknown field `verdict_reason`"),
        "{refused}"
    );
    assert!(refused.contains("strategy_advice.v1"), "{refused}");
    let mut schema = advice(&bind, "codex", "endorse");
    schema["schema"] = json!("strategy_advice.v0");
    let refused = f.strategy_refused(&schema, &CLAUDE);
    assert!(refused.contains("not \"strategy_advice.v1\""), "{refused}");
    let mut selection = advice(&bind, "codex", "endorse");
    selection["selection"] = json!(["induction"]);
    let refused = f.strategy_refused(&selection, &CLAUDE);
    assert!(refused.contains("takes no selection"), "{refused}");
    let refused = f.strategy_refused(&json!("endorse"), &CLAUDE);
    assert!(
        refused.contains("is not a strategy_advice.v1 document"),
        "{refused}"
    );
}

#[test]
fn monitor_mode_keeps_committing_unreviewed_and_has_nothing_to_review() {
    let f = Fixture::new();
    f.init(10, &["--goal-focus-mode", "monitor"]);
    let registry = f.json_file("registry.json", &registry(0.4));
    f.focus_ok(&["revise", "--registry", &registry]);
    let plan = f.focus_ok(&["replan"]);
    assert_eq!(plan["plan"]["state"], "active");
    assert_eq!(plan["plan"]["review"], "unreviewed");
    let refused = f.focus_refused(&["strategy-brief", "--executor", "claude"]);
    assert!(refused.contains("monitor mode"), "{refused}");
}

#[test]
fn a_strategy_review_killed_inside_its_commit_leaves_plan_and_decision_both_or_neither() {
    for failpoint in [
        "sqlite.commit.before_journal",
        "sqlite.commit.before_snapshot",
        "sqlite.commit_all.between",
    ] {
        let f = Fixture::proposed();
        let endorse = advice(&f.bind(), "codex", "endorse");
        let file = f.json_file("advice.json", &endorse);
        let mut command = std::process::Command::new(common::loopx_path());
        command
            .args(["goal-focus", "strategy-review", "--file", &file])
            .args(["--executor", "claude", "--operation-id", "crash"])
            .args(["--dir", f.d()])
            .env("LOOPX_REGISTRY_DIR", &f.registry)
            .env_remove("LOOPX_STORE");
        common::kill_at_failpoint(command, failpoint);
        let status = f.focus_ok(&["status"]);
        assert_eq!(status["direction_decisions"], 1, "{failpoint}");
        assert_eq!(status["current_plan"]["plan_revision"], 1, "{failpoint}");
        assert_eq!(f.focus_ok(&["validate"])["status"], "ok", "{failpoint}");
        f.assert_valid();
        // The caller never saw a reply: the same advice under the same id
        // commits both, once.
        let done = f.strategy_review(
            &endorse,
            &["--executor", "claude", "--operation-id", "crash"],
        );
        assert_eq!(done["replayed"], false, "{failpoint}");
        assert_eq!(done["plan"]["state"], "active", "{failpoint}");
        let status = f.focus_ok(&["status"]);
        assert_eq!(status["direction_decisions"], 2, "{failpoint}");
        assert_eq!(f.focus_ok(&["validate"])["status"], "ok", "{failpoint}");
    }
}

#[test]
fn the_executor_is_the_drivers_provider_and_a_contrary_flag_is_refused() {
    // A replan while a turn runs: the driver's dispatch is open (it needed
    // a reviewed direction to start) and the new plan awaits its review.
    let f = Fixture::new();
    f.init(10, &["--goal-focus-mode", "enforce"]);
    f.open_dispatch("claude");
    let revised = f.json_file("registry.json", &registry(0.4));
    f.focus_ok(&["revise", "--registry", &revised]);
    let plan = f.focus_ok(&["replan"]);
    assert_eq!(plan["plan"]["review"], "strategy_review_required");
    let brief = f.focus_ok(&["strategy-brief"])["brief"].clone();
    assert_eq!(brief["executor"]["provider"], "claude");
    let endorse = advice(&brief["bind"], "codex", "endorse");
    let contrary = f.strategy_refused(&endorse, &["--executor", "codex"]);
    assert!(contrary.contains("not the driver's provider"), "{contrary}");
    let same = f.strategy_refused(&advice(&brief["bind"], "claude", "endorse"), &[]);
    assert!(same.contains("the executor's own"), "{same}");
    let committed = f.strategy_review(&endorse, &[]);
    assert_eq!(
        committed["plan"]["strategy_review"]["executor"]["family"],
        "anthropic"
    );
}

#[test]
fn a_secret_in_the_reviewers_words_never_reaches_the_store() {
    let f = Fixture::proposed();
    let secret = "sk-ant-api03-PLANTEDaaaaaaaaaaaaaaaaaaaaaaaaaa0123456789";
    let mut object = advice(&f.bind(), "codex", "object");
    object["rationale"] = json!(format!("the key {secret} leaked into the plan"));
    object["reasons"] = json!([format!("uses {secret}")]);
    f.strategy_review(&object, &CLAUDE);
    for (name, bytes) in f.fingerprint() {
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains(secret), "{name} holds the secret");
    }
    // Control characters are refused, not stored.
    f.focus_ok(&["replan", "--trigger", "manual"]);
    let mut escape = advice(&f.bind(), "codex", "object");
    escape["reasons"] = json!(["\u{1b}[2Jcleared"]);
    let refused = f.strategy_refused(&escape, &CLAUDE);
    assert!(refused.contains("control character"), "{refused}");
}

/// Run `goal-focus <args>` held after its judgement, before its commit
/// (`focus.plan.before_commit`); run `between`; let it go on. Its output.
fn held_at_commit(f: &Fixture, args: &[&str], between: impl FnOnce()) -> std::process::Output {
    let mut command = std::process::Command::new(common::loopx_path());
    command
        .arg("goal-focus")
        .args(args)
        .args(["--dir", f.d(), "--json"])
        .env("LOOPX_REGISTRY_DIR", &f.registry)
        .env_remove("LOOPX_STORE");
    common::held_at(command, "focus.plan.before_commit", between)
}

#[test]
fn a_registry_revised_between_the_judgement_and_the_commit_stops_the_review() {
    let f = Fixture::proposed();
    let endorse = advice(&f.bind(), "codex", "endorse");
    let file = f.json_file("advice.json", &endorse);
    let mut revised = None;
    let output = held_at_commit(
        &f,
        &["strategy-review", "--file", &file, "--executor", "claude"],
        || {
            let registry = f.json_file("registry2.json", &registry(0.45));
            f.focus_ok(&["revise", "--registry", &registry]);
            revised = Some(f.fingerprint());
        },
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "the held review committed: {stderr}"
    );
    // Judged again against the revised registry, which the advice never read.
    assert!(stderr.contains("approach registry revision 1"), "{stderr}");
    assert_eq!(
        f.fingerprint(),
        revised.unwrap(),
        "the refused review wrote"
    );
    let status = f.focus_ok(&["status"]);
    assert_eq!(status["approach_registry"]["revision"], 2);
    assert_eq!(status["current_plan"]["plan_revision"], 1);
    assert_eq!(status["direction_decisions"], 1);
    f.assert_valid();
}

#[test]
fn a_registry_revised_between_a_replans_judgement_and_its_commit_is_chosen_from_again() {
    let f = Fixture::proposed();
    let output = held_at_commit(&f, &["replan"], || {
        let registry = f.json_file("registry2.json", &registry(0.45));
        f.focus_ok(&["revise", "--registry", &registry]);
    });
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let plan: Value = serde_json::from_slice(&output.stdout).unwrap();
    // Pinned to the registry that is there at the commit, not the one the
    // first judgement read: the plan is current, not born drifted.
    assert_eq!(plan["plan"]["registry_pin"]["revision"], 2, "{plan}");
    let status = f.focus_ok(&["status"]);
    assert_eq!(status["current_plan"]["plan_revision"], 2);
    assert!(
        !status["signals"].to_string().contains("revision_drift"),
        "{status}"
    );
    assert_eq!(f.focus_ok(&["validate"])["status"], "ok");
    f.assert_valid();
}
