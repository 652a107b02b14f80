//! `loopx import` through the real binary: a loop directory of the
//! reference runtime (in `fixtures/import/`: `reference-*` recorded by
//! running the reference's own CLI, `scripts/record-reference-fixtures.sh`;
//! the others written by hand from the spec's file formats) becomes a new loopx loop with its history intact;
//! the dry run writes nothing anywhere; disagreeing direction signals are
//! never chosen among; links out of the source are not followed; a
//! malformed file is named with its line; a crash before the loop is in
//! place leaves no loop; and the source is byte-for-byte unchanged in
//! every case.

mod common;

use common::{fingerprint, Fixture};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/import");

/// A copy of fixture `name` in the test's temp dir, as `source`.
fn source(fixture: &Fixture, name: &str) -> PathBuf {
    let to = fixture.temp.path().join("source");
    std::fs::create_dir_all(&to).unwrap();
    for entry in std::fs::read_dir(Path::new(FIXTURES).join(name)).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
    to
}

/// Every file below the test's temp dir: what "writes nothing anywhere" compares.
fn everything(fixture: &Fixture) -> BTreeMap<String, Vec<u8>> {
    fingerprint(fixture.temp.path())
}

/// `loopx import --from SOURCE --dir D [extra] --json`: success and body.
fn import(fixture: &Fixture, from: &Path, extra: &[&str]) -> (bool, Value, String) {
    let output = fixture
        .loopx()
        .args([
            "import",
            "--from",
            from.to_str().unwrap(),
            "--dir",
            fixture.d(),
        ])
        .args(extra)
        .arg("--json")
        .output()
        .unwrap();
    (
        output.status.success(),
        serde_json::from_slice(&output.stdout).unwrap_or(Value::Null),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Run an import that must succeed, and prove the source unchanged.
fn import_ok(fixture: &Fixture, from: &Path, extra: &[&str]) -> Value {
    let before = fingerprint(from);
    let (ok, body, stderr) = import(fixture, from, extra);
    assert!(ok, "import {extra:?} failed: {stderr}");
    assert_eq!(fingerprint(from), before, "import changed its source");
    body
}

/// Run an import that must be refused, and prove it wrote nothing anywhere.
fn import_refused(fixture: &Fixture, from: &Path, extra: &[&str]) -> String {
    let before = everything(fixture);
    let (ok, body, _) = import(fixture, from, extra);
    assert!(!ok, "import {extra:?} was accepted: {body}");
    assert_eq!(
        everything(fixture),
        before,
        "a refused import wrote something"
    );
    body["error"].as_str().unwrap().to_owned()
}

/// The imported records, as the journal holds them, in order.
fn imported_records(dir: &Path) -> Vec<Value> {
    common::journal_events(dir, "ledger.iteration_imported")
        .into_iter()
        .map(|event| event["record"].clone())
        .collect()
}

/// The imported loop validates (ledger and Goal Focus) and has spent what
/// the source says: its status.
fn assert_valid_with_spent(f: &Fixture, iterations: u64, tokens: u64, usd: f64) -> Value {
    f.assert_valid();
    f.loopx()
        .args(["goal-focus", "validate", "--dir", f.d()])
        .assert()
        .success();
    let status = f.json(&["status", "--dir", f.d()]);
    assert_eq!(status["spent"]["iterations"], iterations, "{status}");
    assert_eq!(status["spent"]["tokens"], tokens, "{status}");
    assert_eq!(status["spent"]["usd"], usd, "{status}");
    status
}

fn signal<'a>(view: &'a Value, name: &str) -> Vec<&'a str> {
    view["signals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["signal"] == name)
        .map(|s| s["value"].as_str().unwrap())
        .collect()
}

#[test]
fn a_full_reference_loop_round_trips_with_its_history_and_validates() {
    let f = Fixture::new();
    let from = source(&f, "full");
    let view = import_ok(&f, &from, &["--apply"]);
    assert_eq!(view["dry_run"], false);
    assert_eq!(view["ambiguities"], serde_json::json!([]));
    assert_eq!(view["goal_contract"]["source_revision"], 2);
    assert_eq!(view["approach_registry"]["source_revision"], 3);
    assert_eq!(view["plan"]["source_revision"], 4);
    assert_eq!(view["source_decisions"], 4);
    // Counts and budget spent, as the source's budget.json says.
    let status = assert_valid_with_spent(&f, 3, 4200, 1.75);
    assert_eq!(status["state_status"], "running");

    // Every iteration keeps its number, timestamp, cost and outcome.
    let lines = std::fs::read_to_string(from.join("iterations.jsonl")).unwrap();
    let sources: Vec<Value> = lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let records = imported_records(&f.dir);
    assert_eq!(records.len(), sources.len());
    for (original, record) in sources.iter().zip(&records) {
        let n = original["iteration"].as_u64().unwrap();
        assert_eq!(record["iteration"], n);
        let at: jiff::Timestamp = record["timestamp"].as_str().unwrap().parse().unwrap();
        let was: jiff::Timestamp = original["timestamp"].as_str().unwrap().parse().unwrap();
        assert_eq!(at, was, "iteration {n} changed its timestamp");
        assert_eq!(record["decision"], original["decision"]);
        assert_eq!(record["objective"], original["objective"]);
        assert_eq!(record["budget_delta"], original["budget_delta"]);
        assert_eq!(record["direction"]["campaign_id"], "main");
    }

    // The plan keeps the source's selection; contract and registry their content.
    let focus = f.json(&["goal-focus", "status", "--dir", f.d()]);
    assert_eq!(focus["enforcement_mode"], "monitor");
    assert_eq!(focus["mode_source"], "imported");
    assert_eq!(focus["current_plan"]["state"], "active");
    assert_eq!(
        focus["current_plan"]["selection"]["approach_ids"],
        serde_json::json!(["A1"])
    );
    assert_eq!(focus["current_plan"]["valid_through_iteration"], 8);
    assert_eq!(focus["goal_contract"]["obligations"], 2);
    assert_eq!(focus["approach_registry"]["approaches"], 3);
    assert_eq!(focus["direction_decisions"], 1);
    // The approach's compute policy comes along (`backends` is its
    // allowlist), and the plan that selects it carries it.
    let registry = f.stored_snapshot(loopx_core::focus::REGISTRY_STREAM);
    assert_eq!(
        registry["campaigns"][0]["approaches"][0]["compute_policy"],
        serde_json::json!({"allowed_services": ["local", "kaggle"], "forbidden_services": ["hetzner"]}),
        "{registry}"
    );
    assert_eq!(
        focus["goal_contract"]["fingerprint"],
        view["goal_contract"]["fingerprint"]
    );

    // The loop goes on from there like any other.
    f.append("continue", &[]);
    let status = f.json(&["status", "--dir", f.d()]);
    assert_eq!(status["spent"]["iterations"], 4);
    f.assert_valid();
}

#[test]
fn the_dry_run_lists_every_direction_signal_and_writes_nothing_anywhere() {
    let f = Fixture::new();
    let from = source(&f, "full");
    let before = everything(&f);
    let view = import_ok(&f, &from, &[]);
    assert_eq!(everything(&f), before, "the dry run wrote something");
    assert!(!f.dir.exists());
    assert_eq!(view["dry_run"], true);
    assert_eq!(view["run_id"], Value::Null);
    assert_eq!(view["iterations"], 3);
    assert_eq!(signal(&view, "plan_state"), ["active"]);
    assert_eq!(signal(&view, "selected_approach"), ["A1"]);
    assert_eq!(signal(&view, "priority_campaign"), ["main"]);
    assert_eq!(signal(&view, "last_decision"), ["dec-4 for plan 4 (A1)"]);
    assert_eq!(view["sources"].as_array().unwrap().len(), 8);
    // The text says so too.
    let output = f
        .loopx()
        .args(["import", "--from", from.to_str().unwrap(), "--dir", f.d()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("nothing was written"), "{text}");
}

#[test]
fn disagreeing_signals_are_never_chosen_among_and_the_plan_is_kept_needs_replan() {
    let f = Fixture::new();
    let from = source(&f, "ambiguous");
    let dry = import_ok(&f, &from, &[]);
    let ambiguities: Vec<&str> = dry["ambiguities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(ambiguities.len(), 3, "{ambiguities:?}");
    assert!(ambiguities[0].contains("selects two directions"));
    assert!(ambiguities[1].contains("registry_revision 2"));
    assert!(ambiguities[2].contains("dec-5"));
    assert_eq!(signal(&dry, "pending_decision"), ["dec-5 (S1)"]);
    assert_eq!(dry["plan"]["state"], "needs_replan");
    assert_eq!(dry["plan"]["selection"], Value::Null);

    let view = import_ok(&f, &from, &["--apply"]);
    assert!(view["plan"]["reason"]
        .as_str()
        .unwrap()
        .contains("does not choose"));
    f.assert_valid();
    let focus = f.json(&["goal-focus", "status", "--dir", f.d()]);
    assert_eq!(focus["current_plan"]["state"], "needs_replan");
    assert_eq!(focus["current_plan"]["selection"], Value::Null);
    assert_eq!(focus["signals"][0]["trigger"], "plan_not_active");
    f.loopx()
        .args(["goal-focus", "validate", "--dir", f.d()])
        .assert()
        .success();
}

#[test]
fn a_selection_the_registry_does_not_hold_is_not_carried_over() {
    let f = Fixture::new();
    let from = source(&f, "full");
    // The plan selects an approach that the registry parks.
    let plan = std::fs::read_to_string(from.join("current_plan.json"))
        .unwrap()
        .replace("\"A1\"", "\"A2\"");
    std::fs::write(from.join("current_plan.json"), plan).unwrap();
    std::fs::write(
        from.join("direction_decisions.jsonl"),
        "{\"decision_id\": \"dec-1\", \"plan_revision\": 4, \"approach_id\": \"A2\"}\n",
    )
    .unwrap();
    let view = import_ok(&f, &from, &["--apply"]);
    assert_eq!(view["plan"]["state"], "needs_replan");
    let reason = view["plan"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("A2") && reason.contains("parked"),
        "{reason}"
    );
    f.assert_valid();
}

#[test]
fn a_symlink_in_the_source_is_not_followed() {
    let f = Fixture::new();
    let from = source(&f, "full");
    let outside = f.temp.path().join("outside.json");
    std::fs::write(
        &outside,
        "{\"enabled\": true, \"campaign_id\": \"elsewhere\"}",
    )
    .unwrap();
    std::fs::remove_file(from.join("goal_priority.json")).unwrap();
    std::os::unix::fs::symlink(&outside, from.join("goal_priority.json")).unwrap();
    let source_before = fingerprint(&from);
    let error = import_refused(&f, &from, &["--apply"]);
    assert!(
        error.contains("goal_priority.json") && error.contains("symlink"),
        "{error}"
    );
    assert_eq!(fingerprint(&from), source_before);
    // A link to a directory is not followed either.
    std::fs::remove_file(from.join("goal_priority.json")).unwrap();
    std::os::unix::fs::symlink(f.temp.path(), from.join("goal_priority.json")).unwrap();
    import_refused(&f, &from, &[]);
}

#[test]
fn a_malformed_file_is_a_clear_error_naming_the_file_and_line() {
    let f = Fixture::new();
    let from = source(&f, "malformed");
    let error = import_refused(&f, &from, &["--apply"]);
    assert!(error.starts_with("iterations.jsonl line 2 "), "{error}");
    assert!(error.contains("nothing was written"), "{error}");

    let f = Fixture::new();
    let from = source(&f, "full");
    std::fs::write(from.join("budget.json"), "{\"max_iterations\": \"ten\"}").unwrap();
    let error = import_refused(&f, &from, &[]);
    assert!(error.starts_with("budget.json line 1 column"), "{error}");
}

#[test]
fn a_source_that_disagrees_with_itself_or_breaks_a_ledger_rule_is_refused() {
    let f = Fixture::new();
    let from = source(&f, "full");
    let budget = std::fs::read_to_string(from.join("budget.json"))
        .unwrap()
        .replace("\"tokens\": 4200", "\"tokens\": 9999");
    std::fs::write(from.join("budget.json"), budget).unwrap();
    let error = import_refused(&f, &from, &["--apply"]);
    assert!(
        error.contains("budget.json") && error.contains("9999"),
        "{error}"
    );

    // Numbers that skip one, and time that runs backwards.
    let f = Fixture::new();
    let from = source(&f, "full");
    let lines = std::fs::read_to_string(from.join("iterations.jsonl"))
        .unwrap()
        .replace("\"iteration\": 3", "\"iteration\": 4");
    std::fs::write(from.join("iterations.jsonl"), lines).unwrap();
    let error = import_refused(&f, &from, &["--apply"]);
    assert!(
        error.contains("line 3") && error.contains("expected iteration 3"),
        "{error}"
    );
    let f = Fixture::new();
    let from = source(&f, "full");
    let lines = std::fs::read_to_string(from.join("iterations.jsonl"))
        .unwrap()
        .replace("2026-11-02T08:00:00Z", "2026-10-01T08:00:00Z");
    std::fs::write(from.join("iterations.jsonl"), lines).unwrap();
    let error = import_refused(&f, &from, &["--apply"]);
    assert!(error.contains("forward in time"), "{error}");
}

#[test]
fn an_existing_loop_or_a_target_inside_the_source_is_refused() {
    let f = Fixture::new();
    let from = source(&f, "full");
    f.init(5, &[]);
    let error = import_refused(&f, &from, &["--apply"]);
    assert!(error.contains("already holds a loop"), "{error}");

    // A --dir inside the source, directly or by climbing out (`..`) of a
    // directory that does not exist yet.
    let f = Fixture::new();
    let from = source(&f, "full");
    let before = everything(&f);
    for (dir, says) in [
        (from.join("inner"), "inside the source"),
        (f.temp.path().join("nope/../source/inner"), "`..`"),
    ] {
        let output = f
            .loopx()
            .args(["import", "--from", from.to_str().unwrap(), "--apply"])
            .args(["--dir", dir.to_str().unwrap(), "--json"])
            .output()
            .unwrap();
        assert!(!output.status.success());
        assert_eq!(everything(&f), before);
        let body: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert!(body["error"].as_str().unwrap().contains(says), "{body}");
    }
}

#[test]
fn killing_the_import_before_the_loop_is_in_place_leaves_no_loop() {
    let f = Fixture::new();
    let from = source(&f, "full");
    let source_before = fingerprint(&from);
    for failpoint in ["sqlite.commit.before_snapshot", "import.before_rename"] {
        let mut command = std::process::Command::new(common::loopx_path());
        command
            .env("LOOPX_REGISTRY_DIR", &f.registry)
            .env_remove("LOOPX_DIR")
            .args(["import", "--from", from.to_str().unwrap(), "--dir", f.d()])
            .arg("--apply");
        common::kill_at_failpoint(command, failpoint);
        assert!(!f.dir.exists(), "a killed import left {} behind", f.d());
        assert_eq!(fingerprint(&from), source_before);
    }
    // Running it again creates the complete loop.
    import_ok(&f, &from, &["--apply"]);
    f.assert_valid();
    let numbers: Vec<u64> = imported_records(&f.dir)
        .iter()
        .map(|r| r["iteration"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, [1, 2, 3]);
}

#[test]
fn hostile_text_in_a_signal_is_refused_not_printed() {
    let f = Fixture::new();
    let from = source(&f, "full");
    let decisions = "{\"decision_id\": \"dec-\\u001b]0;owned\\u0007\", \"status\": \"pending\"}\n";
    std::fs::write(from.join("direction_decisions.jsonl"), decisions).unwrap();
    let error = import_refused(&f, &from, &[]);
    assert!(
        error.contains("direction_decisions.jsonl pending_decision"),
        "{error}"
    );
    assert!(!error.contains('\u{1b}'), "{error:?}");
}

#[test]
fn an_enforce_mode_loop_keeps_its_direction_waiting_for_a_strategy_review() {
    let f = Fixture::new();
    let from = source(&f, "full");
    let plan = std::fs::read_to_string(from.join("current_plan.json"))
        .unwrap()
        .replace("\"monitor\"", "\"enforce\"");
    std::fs::write(from.join("current_plan.json"), plan).unwrap();
    let view = import_ok(&f, &from, &["--apply"]);
    assert_eq!(view["enforcement_mode"], "enforce");
    assert_eq!(view["plan"]["state"], "needs_replan");
    assert!(view["plan"]["reason"]
        .as_str()
        .unwrap()
        .contains("strategy review"));
    f.assert_valid();
    let focus = f.json(&["goal-focus", "status", "--dir", f.d()]);
    assert_eq!(focus["current_plan"]["review"], "strategy_review_required");
    assert_eq!(
        focus["current_plan"]["proposal"]["selection"]["approach_ids"],
        serde_json::json!(["A1"])
    );
}

#[test]
fn an_empty_target_directory_becomes_the_loop() {
    let f = Fixture::new();
    let from = source(&f, "full");
    std::fs::create_dir(&f.dir).unwrap();
    import_ok(&f, &from, &["--apply"]);
    f.assert_valid();
    // Only the new loop is there: nothing of the build is left beside it.
    let beside: Vec<String> = std::fs::read_dir(f.temp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains(".import-"))
        .collect();
    assert!(beside.is_empty(), "{beside:?}");
}

/// What the reference runtime's own CLI wrote (see
/// `scripts/record-reference-fixtures.sh`): obligations and campaigns keyed
/// by id, the spent budget in flat fields, and an iteration's direction
/// under `progress_assessment`, `goal_focus` and `execution`.
#[test]
fn a_loop_recorded_by_the_reference_runtime_imports_with_its_history() {
    let f = Fixture::new();
    let from = source(&f, "reference-run");
    let view = import_ok(&f, &from, &["--apply"]);
    assert_eq!(view["enforcement_mode"], "monitor");
    assert_eq!(view["goal_contract"]["source_revision"], 1);
    assert_eq!(view["approach_registry"]["source_revision"], 1);
    assert_eq!(view["plan"]["state"], "needs_replan");
    // An empty id in the plan names no direction.
    assert!(signal(&view, "selected_approach").is_empty(), "{view}");
    assert!(signal(&view, "selected_campaign").is_empty(), "{view}");
    assert_valid_with_spent(&f, 2, 2200, 0.75);
    let records = imported_records(&f.dir);
    assert_eq!(records.len(), 2);
    let second = &records[1];
    assert_eq!(second["executor_provider"], "codex");
    assert_eq!(second["direction"]["campaign_id"], "main");
    assert_eq!(second["direction"]["global_delta"], "reduced");
    assert_eq!(second["direction"]["campaign_delta"], "incremental");
    assert_eq!(
        second["direction"]["obligation_ids"],
        serde_json::json!(["GOAL-SC-1"])
    );
    assert_eq!(records[0]["executor_provider"], "claude");

    let focus = f.json(&["goal-focus", "status", "--dir", f.d()]);
    assert_eq!(focus["goal_contract"]["obligations"], 1, "{focus}");
    assert_eq!(focus["approach_registry"]["approaches"], 0);
}

#[test]
fn a_new_loop_of_the_reference_runtime_imports_in_its_default_enforce_mode() {
    let f = Fixture::new();
    let from = source(&f, "reference-new");
    let view = import_ok(&f, &from, &["--apply"]);
    assert_eq!(view["enforcement_mode"], "enforce");
    assert_eq!(view["iterations"], 0);
    assert_eq!(view["plan"]["state"], "needs_replan");
    f.assert_valid();
    let focus = f.json(&["goal-focus", "status", "--dir", f.d()]);
    assert_eq!(focus["enforcement_mode"], "enforce");
    assert_eq!(focus["goal_contract"]["obligations"], 1, "{focus}");
}

/// Rewrite the JSON document `name` of the source with `edit`.
fn edit_json(from: &Path, name: &str, edit: impl FnOnce(&mut Value)) {
    let path = from.join(name);
    let mut value: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    edit(&mut value);
    std::fs::write(path, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
}

#[test]
fn campaigns_and_approaches_keyed_by_id_read_as_the_lists_they_replace() {
    let f = Fixture::new();
    let from = source(&f, "reference-run");
    edit_json(&from, "approach_registry.json", |registry| {
        registry["campaigns"] = serde_json::json!({
            "main": {"id": "main", "title": "Direct proof", "status": "active", "approaches": {
                "A1": {"id": "A1", "campaign_id": "main", "status": "eligible",
                       "mechanism": "induction on the bridge lemma", "estimates": {}},
                "A2": {"status": "closed", "reopen_condition": "A1 fails"}
            }},
            "search": {"title": "Counterexample search", "status": "parked", "approaches": {
                "S1": {"status": "eligible"}
            }}
        });
    });
    let view = import_ok(&f, &from, &["--apply"]);
    assert!(
        view["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("estimates")),
        "{view}"
    );
    f.assert_valid();
    let focus = f.json(&["goal-focus", "status", "--dir", f.d()]);
    assert_eq!(focus["approach_registry"]["approaches"], 3, "{focus}");
    // Only A1 may be chosen: A2 is closed, and S1's campaign is parked.
    let preview = f.json(&["goal-focus", "replan", "--dry-run", "--dir", f.d()]);
    let proposal = &preview["plan"]["proposal"];
    assert_eq!(
        proposal["selection"]["approach_ids"],
        serde_json::json!(["A1"]),
        "{preview}"
    );
    let excluded: Vec<(&str, &str)> = proposal["excluded"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["approach_id"].as_str().unwrap(),
                e["reason"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        excluded,
        [
            ("A2", "closed: marked so in the imported registry"),
            ("S1", "parked: campaign search is parked")
        ]
    );

    // A key that disagrees with the id it holds is refused, naming both.
    let f = Fixture::new();
    let from = source(&f, "reference-run");
    edit_json(&from, "goal_contract.json", |contract| {
        contract["obligations"]["GOAL-SC-1"]["id"] = "GOAL-SC-9".into();
    });
    let error = import_refused(&f, &from, &["--apply"]);
    assert!(
        error.starts_with("goal_contract.json line")
            && error.contains("GOAL-SC-1")
            && error.contains("GOAL-SC-9"),
        "{error}"
    );
}

#[test]
fn a_flat_spent_budget_that_disagrees_with_the_iterations_is_refused() {
    let f = Fixture::new();
    let from = source(&f, "reference-run");
    edit_json(&from, "budget.json", |budget| {
        budget["spent_tokens"] = 9999.into();
    });
    let error = import_refused(&f, &from, &["--apply"]);
    assert!(
        error.contains("budget.json") && error.contains("9999"),
        "{error}"
    );
}

/// The journal holds each imported record as loopx writes its own:
/// canonical JSON, the text `validate` reads fastest.
#[test]
fn imported_records_are_stored_as_canonical_json() {
    let f = Fixture::new();
    let from = source(&f, "reference-run");
    import_ok(&f, &from, &["--apply"]);
    let texts = common::journal_texts(&f.dir, "ledger.iteration_imported");
    assert_eq!(texts.len(), 2);
    for text in texts {
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(text, loopx_core::digest::canonical_json(&value));
    }
}

/// Two imports of one source are two loops: the registry (and `serve
/// --all`) tell loops apart by run id. The source's own id is kept as
/// where the loop came from.
#[test]
fn each_import_of_the_same_source_is_a_loop_with_its_own_run_id() {
    let f = Fixture::new();
    let from = source(&f, "reference-run");
    let state: Value =
        serde_json::from_slice(&std::fs::read(from.join("loop_state.json")).unwrap()).unwrap();
    let source_run_id = state["run_id"].as_str().unwrap();
    let views: Vec<Value> = ["first", "second"]
        .iter()
        .map(|dir| {
            let dir = f.temp.path().join(dir);
            let view = f.json(&[
                "import",
                "--from",
                from.to_str().unwrap(),
                "--dir",
                dir.to_str().unwrap(),
                "--apply",
            ]);
            let status = f.json(&["status", "--dir", dir.to_str().unwrap()]);
            assert_eq!(status["run_id"], view["run_id"], "{status}");
            // The provenance is the loop's own state, not only the
            // import's output: status reads it from the store.
            assert_eq!(status["source_run_id"], source_run_id, "{status}");
            f.loopx()
                .args(["status", "--dir", dir.to_str().unwrap()])
                .assert()
                .success()
                .stdout(predicates::str::contains(format!(
                    "imported    from run {source_run_id}"
                )));
            view
        })
        .collect();
    assert_ne!(
        views[0]["run_id"], views[1]["run_id"],
        "two imports share a run id"
    );
    for view in &views {
        assert_ne!(view["run_id"], source_run_id);
        assert_eq!(view["source_run_id"], source_run_id, "{view}");
    }
    // The dry run names the source's id too, and no run id of its own.
    let dry = f.json(&[
        "import",
        "--from",
        from.to_str().unwrap(),
        "--dir",
        f.temp.path().join("third").to_str().unwrap(),
    ]);
    assert_eq!(dry["source_run_id"], source_run_id);
    assert_eq!(dry["run_id"], Value::Null);
    // A loop made by init has no provenance, and its status no such field.
    f.init(3, &[]);
    let native = f.json(&["status", "--dir", f.d()]);
    assert!(native.get("source_run_id").is_none(), "{native}");
}

/// Another runtime's records are redacted as an agent's report is: a key
/// in any of their texts (a reference, an id, an output) never reaches
/// the store, and the honest values beside it are kept.
#[test]
fn a_key_in_any_text_of_an_imported_record_never_reaches_the_store() {
    const KEY: &str = "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789_-abcdEFGH";
    let f = Fixture::new();
    let from = source(&f, "full");
    let ledger = from.join("iterations.jsonl");
    let text = std::fs::read_to_string(&ledger).unwrap();
    let planted = text
        .replace(
            "\"recovery.md\"",
            &format!("\"recovery.md\", \"key_{KEY}\""),
        )
        .replace("\"iteration 1 output\"", &format!("\"token={KEY}\""))
        .replace(
            "\"guard_refs\": []",
            &format!("\"guard_refs\": [\"g-{KEY}\"]"),
        );
    assert_ne!(planted, text, "nothing was planted");
    std::fs::write(&ledger, planted).unwrap();
    import_ok(&f, &from, &["--apply"]);

    let stored = common::stored_text(&f.dir);
    assert!(
        !stored.contains("AbCdEfGhIjKlMnOp"),
        "a key survived: {stored}"
    );
    let first = &imported_records(&f.dir)[0];
    assert_eq!(
        first["input_refs"],
        serde_json::json!(["recovery.md", "key_[REDACTED]"]),
        "{first}"
    );
    assert_eq!(first["output"], "token=[REDACTED]");
    assert_eq!(
        first["evidence_checked"]["guard_refs"],
        serde_json::json!(["g-[REDACTED]"])
    );
    f.assert_valid();
}
