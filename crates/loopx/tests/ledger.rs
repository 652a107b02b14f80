//! The ledger commands, run as the real binary on a real SQLite file.

mod common;

use common::{artifact, Fixture};
use predicates::prelude::PredicateBooleanExt as _;
use predicates::str::contains;
use serde_json::json;

#[test]
fn a_loop_runs_from_init_to_a_banked_proof() {
    let f = Fixture::new();
    f.init(5, &["--max-tokens", "10000"]);
    f.append(
        "continue",
        &[
            "--tokens",
            "120",
            "--usd",
            "0.25",
            "--next-action",
            "Compare bounds",
        ],
    )
    .success()
    .stdout(contains("iteration 1 recorded: continue"));
    f.write_proof("proof-1");
    f.append(
        "stop",
        &["--stop-reason", "proof_found", "--evidence-id", "proof-1"],
    )
    .success();

    let status = f.json(&["status", "--dir", f.d()]);
    assert_eq!(status["state_status"], "stopped");
    assert_eq!(status["iterations"], 2);
    assert_eq!(status["spent"]["tokens"], 120);
    assert_eq!(status["last_decision"], "stop");
    let done = f.json(&["done", "--dir", f.d()]);
    assert_eq!(
        (done["done"].as_bool(), done["reason"].as_str()),
        (Some(true), Some("terminal_status:stopped"))
    );
    f.loopx()
        .args(["validate", "--dir", f.d()])
        .assert()
        .success()
        .stdout(contains("valid: 2 iterations"));
    let recovery = std::fs::read_to_string(f.dir.join("recovery.md")).unwrap();
    assert!(
        recovery.contains("- Status: stopped")
            && recovery.contains("- Next safe action: report stop status"),
        "{recovery}"
    );
}

#[test]
fn every_refusal_leaves_the_loop_byte_for_byte_unchanged() {
    let f = Fixture::new();
    f.init(3, &[]);
    f.append("continue", &["--operation-id", "first"]).success();
    std::os::unix::fs::symlink("/etc/hostname", f.dir.join("proofs-link")).unwrap();
    let outside = f.temp.path().join("outside.json");
    std::fs::write(&outside, artifact("escape", "proofs-link").to_string()).unwrap();
    std::os::unix::fs::symlink(&outside, f.dir.join("proof_artifacts/escape.json")).unwrap();
    std::fs::write(
        f.dir.join("proof_artifacts/via-link.json"),
        artifact("via-link", "proofs-link").to_string(),
    )
    .unwrap();
    std::fs::write(
        f.dir.join("proof_artifacts/dotdot.json"),
        artifact("dotdot", "../outside.json").to_string(),
    )
    .unwrap();
    let before = f.fingerprint();

    let d = f.d();
    let refusals: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--usd", "NaN"], "finite non-negative"),
        (vec!["--usd", "inf"], "finite non-negative"),
        (vec!["--usd=-1"], "finite non-negative"),
        (vec!["--tokens", "many"], "invalid value"),
        (vec!["--mode", "sideways"], "invalid value"),
        (vec!["--decision", "maybe"], "invalid value"),
        (vec!["--no-such-flag"], "unexpected argument"),
        (vec!["--objective", "  "], "objective must not be empty"),
        (vec!["--decision", "blocked"], "early blocked"),
        (
            vec!["--decision", "stop", "--stop-reason", "plateau"],
            "success/proof stop_reason",
        ),
        (
            vec!["--decision", "stop", "--stop-reason", "success"],
            "at least one proof artifact",
        ),
        (
            vec![
                "--decision",
                "stop",
                "--stop-reason",
                "success",
                "--evidence-id",
                "missing",
            ],
            "does not exist",
        ),
        (
            vec![
                "--decision",
                "stop",
                "--stop-reason",
                "success",
                "--evidence-id",
                "escape",
            ],
            "symlink",
        ),
        (
            vec![
                "--decision",
                "stop",
                "--stop-reason",
                "success",
                "--evidence-id",
                "via-link",
            ],
            "symlink",
        ),
        (
            vec![
                "--decision",
                "stop",
                "--stop-reason",
                "success",
                "--evidence-id",
                "dotdot",
            ],
            "'..' is not allowed",
        ),
        (
            vec![
                "--decision",
                "stop",
                "--stop-reason",
                "success",
                "--evidence-id",
                "../../etc/passwd",
            ],
            "must be 1-128 characters",
        ),
        (
            vec!["--operation-id", "first", "--decision", "revise"],
            "already used for a different request",
        ),
        (vec!["--operation-id", "bad id!"], "invalid operation id"),
    ];
    for (extra, expected) in refusals {
        let mut command = f.loopx();
        command.args(["append-iteration", "--dir", d]);
        for (flag, default) in [
            ("--mode", "bounded-research"),
            ("--objective", "x"),
            ("--decision", "continue"),
        ] {
            if !extra.contains(&flag) {
                command.args([flag, default]);
            }
        }
        let output = command.args(&extra).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{extra:?} was accepted");
        assert!(
            stderr.contains(expected),
            "{extra:?}: expected {expected:?} in {stderr}"
        );
        assert_eq!(
            f.fingerprint(),
            before,
            "{extra:?} changed the loop directory"
        );
    }
    for read in ["status", "done", "validate"] {
        f.loopx().args([read, "--dir", d]).assert().success();
        f.loopx()
            .args([read, "--dir", d, "--json"])
            .assert()
            .success();
    }
    assert_eq!(f.fingerprint(), before, "a read changed the loop directory");
}

#[test]
fn the_final_iteration_must_end_the_loop_and_nothing_follows() {
    let f = Fixture::new();
    f.init(2, &[]);
    f.append("continue", &[]).success();
    f.append("delegate", &[]).failure().stderr(contains(
        "final allowed iteration must use decision stop or blocked",
    ));
    f.append("blocked", &["--stop-reason", "needs credentials"])
        .success();
    f.append("stop", &[])
        .failure()
        .stderr(contains("after loop status is blocked"));
    let recovery = std::fs::read_to_string(f.dir.join("recovery.md")).unwrap();
    assert!(
        recovery.contains("- Active blockers: needs credentials"),
        "{recovery}"
    );
    f.assert_valid();
}

#[test]
fn the_final_turns_prompt_names_the_decisions_it_accepts_and_how_to_record_them() {
    let f = Fixture::new();
    f.init(2, &[]);
    let body = |f: &Fixture| {
        let out = f
            .loopx()
            .args(["task-body", "--dir", f.d()])
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()
    };
    let first = body(&f);
    assert!(!first.contains("Final turn"), "{first}");
    f.append("continue", &[]).success();
    let last = body(&f);
    assert!(
        last.contains("Budget: iteration 2 of 2")
            && last.contains("accepts only decision stop or blocked")
            && last.contains(
                "`loopx append-iteration --mode bounded-research --objective \"<what this turn did>\" --decision stop --stop-reason loops_reached"
            )
            && last.contains("--decision blocked")
            && last.contains("--decision stop|blocked"),
        "{last}"
    );
    // The command it names is accepted as printed.
    f.append("stop", &["--stop-reason", "loops_reached"])
        .success();
    f.assert_valid();
}

#[test]
fn request_stop_writes_the_sentinel_that_ends_the_loop_and_bad_input_writes_nothing() {
    let f = Fixture::new();
    // No loop there: nothing is created.
    f.loopx()
        .args(["request-stop", "--dir", f.d()])
        .assert()
        .failure()
        .stderr(contains("no loop at"));
    assert!(!f.dir.exists());
    f.init(5, &[]);
    let sentinel = f.dir.join("STOP_REQUESTED");
    f.loopx()
        .args(["request-stop", "--dir", f.d(), "--reason", "bad\u{1b}[2J"])
        .assert()
        .failure()
        .stderr(contains("--reason"));
    assert!(!sentinel.exists());
    let body = f.json(&[
        "request-stop",
        "--dir",
        f.d(),
        "--reason",
        "enough for today",
    ]);
    assert_eq!(
        (&body["status"], &body["already_requested"]),
        (&json!("ok"), &json!(false)),
        "{body}"
    );
    assert_eq!(
        std::fs::read_to_string(&sentinel).unwrap(),
        "enough for today\n"
    );
    let done = f.json(&["done", "--dir", f.d()]);
    assert_eq!(
        (&done["done"], &done["reason"]),
        (&json!(true), &json!("user_stop_requested")),
        "{done}"
    );
    f.append("continue", &[]).success();
    // Asking again keeps the first request; the text says how to undo it.
    f.loopx()
        .args(["request-stop", "--dir", f.d()])
        .assert()
        .success()
        .stdout(contains("already requested").and(contains("rm ")));
    assert_eq!(
        std::fs::read_to_string(&sentinel).unwrap(),
        "enough for today\n"
    );
    f.loopx()
        .args(["request-stop", "--help"])
        .assert()
        .success()
        .stdout(contains("SIGTERM").and(contains("--reason")));
}

#[test]
fn an_exact_replay_returns_the_receipt_and_writes_nothing() {
    let f = Fixture::new();
    f.init(5, &["--operation-id", "init-1"]);
    let first = f.json(&[f.append_words("continue"), vec!["--operation-id", "op-7"]].concat());
    let after_first = f.fingerprint();
    let again = f.json(&[f.append_words("continue"), vec!["--operation-id", "op-7"]].concat());
    assert_eq!(f.fingerprint(), after_first);
    assert_eq!(again["replayed"], true);
    for key in ["iteration", "revision", "committed_at", "operation_id"] {
        assert_eq!(first[key], again[key], "{key}");
    }
    // init replays too, and a different init is refused.
    f.init(5, &["--operation-id", "init-1"]);
    f.loopx()
        .args([
            "init",
            "--dir",
            f.d(),
            "--goal",
            "Another",
            "--success-criteria",
            "x",
        ])
        .assert()
        .failure()
        .stderr(contains("never overwrites a ledger"));
    assert_eq!(f.fingerprint(), after_first);
}

#[test]
fn a_missing_loop_is_reported_and_never_created() {
    let f = Fixture::new();
    for args in [
        vec!["status", "--dir", f.d()],
        vec!["done", "--dir", f.d()],
        vec!["validate", "--dir", f.d()],
        f.append_words("continue"),
    ] {
        f.loopx()
            .args(&args)
            .assert()
            .code(1)
            .stderr(contains("no loop at"))
            .stderr(contains("loopx init"));
    }
    assert!(!f.dir.exists());
    // Bad init flags create nothing either.
    f.loopx()
        .args([
            "init",
            "--dir",
            f.d(),
            "--goal",
            " ",
            "--success-criteria",
            "x",
        ])
        .assert()
        .failure();
    f.loopx()
        .args(f.init_words())
        .args(["--max-usd", "NaN"])
        .assert()
        .failure();
    f.loopx()
        .args(f.init_words())
        .args(["--max-wall", "soon"])
        .assert()
        .failure();
    assert!(!f.dir.exists());
}

#[test]
fn a_corrupt_database_is_reported_and_left_alone() {
    let f = Fixture::new();
    f.init(3, &[]);
    // Recent commits live in the -wal, where SQLite would read them past
    // any damage to the main file: fold them in first, so the noise below
    // is the whole database.
    rusqlite::Connection::open(f.dir.join("loopx.sqlite"))
        .unwrap()
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    let noise: Vec<u8> = (0..8192u32).map(|i| (i * 7 + 3) as u8).collect();
    std::fs::write(f.dir.join("loopx.sqlite"), &noise).unwrap();
    let before = f.fingerprint();
    for args in [
        vec!["status", "--dir", f.d()],
        vec!["validate", "--dir", f.d()],
        f.append_words("continue"),
    ] {
        f.loopx()
            .args(&args)
            .assert()
            .code(1)
            .stderr(contains("unreadable"))
            .stderr(contains("nothing was changed"));
    }
    assert_eq!(f.fingerprint(), before);
}

#[test]
fn views_are_regenerated_from_the_store_and_never_read_back() {
    let f = Fixture::new();
    f.init(5, &[]);
    std::fs::write(f.dir.join("recovery.md"), "- Status: stopped\n").unwrap();
    std::fs::write(f.dir.join("status.json"), "{\"state_status\": \"stopped\"}").unwrap();
    assert_eq!(
        f.json(&["status", "--dir", f.d()])["state_status"],
        "initialized"
    );
    f.append("continue", &[]).success();
    let view: serde_json::Value =
        serde_json::from_slice(&std::fs::read(f.dir.join("status.json")).unwrap()).unwrap();
    assert_eq!(
        (view["state_status"].as_str(), view["iterations"].as_u64()),
        (Some("running"), Some(1))
    );
    assert!(std::fs::read_to_string(f.dir.join("recovery.md"))
        .unwrap()
        .contains("- Last completed iteration: 1"));
}

#[test]
fn validate_lists_what_a_tampered_database_no_longer_explains() {
    let f = Fixture::new();
    f.init(5, &[]);
    f.append("continue", &["--tokens", "5"]).success();
    f.write_proof("p");
    f.append("stop", &["--stop-reason", "success", "--evidence-id", "p"])
        .success();
    // Someone edits the snapshot by hand and deletes the proof.
    let conn = rusqlite::Connection::open(f.dir.join("loopx.sqlite")).unwrap();
    conn.execute(
        "UPDATE snapshots SET state = json_set(state, '$.spent.tokens', 0, '$.status', 'running')",
        [],
    )
    .unwrap();
    assert!(
        conn.execute("DELETE FROM journal", []).is_err(),
        "the journal must refuse deletes"
    );
    drop(conn);
    std::fs::remove_file(f.dir.join("proofs/lemma.lean")).unwrap();

    let report = f.json(&["validate", "--dir", f.d()]);
    assert_eq!(report["status"], "failed");
    let errors: Vec<&str> = report["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    for needle in [
        "disagrees with the journal on spent",
        "disagrees with the journal on status",
        "iteration 2: early stop",
    ] {
        assert!(
            errors.iter().any(|e| e.contains(needle)),
            "{needle} missing from {errors:#?}"
        );
    }
    f.loopx()
        .args(["validate", "--dir", f.d()])
        .assert()
        .code(1)
        .stderr(contains("invalid"));
}

#[test]
fn done_names_the_condition_that_holds() {
    let f = Fixture::new();
    f.init(5, &["--require-user-stop-only", "--max-wall", "48h"]);
    let done = f.json(&["done", "--dir", f.d()]);
    assert_eq!(
        (done["done"].as_bool(), done["reason"].as_str()),
        (Some(false), Some("awaiting_user_stop"))
    );
    std::fs::write(f.dir.join("PAUSE"), "").unwrap();
    assert_eq!(f.json(&["done", "--dir", f.d()])["paused"], true);
    std::fs::write(f.dir.join("STOP_REQUESTED"), "").unwrap();
    let done = f.json(&["done", "--dir", f.d()]);
    assert_eq!(
        (done["done"].as_bool(), done["reason"].as_str()),
        (Some(true), Some("user_stop_requested"))
    );
    f.loopx()
        .args(["done", "--dir", f.d()])
        .assert()
        .success()
        .stdout("stopped by the user (STOP_REQUESTED) [done: user_stop_requested (paused)]\n");
    assert_eq!(
        f.json(&["status", "--dir", f.d()])["budget"]["max_wall_time_seconds"],
        172800
    );
}

#[test]
fn a_spent_token_budget_ends_the_loop() {
    let f = Fixture::new();
    f.init(10, &["--max-tokens", "100"]);
    f.append("continue", &["--tokens", "100"])
        .failure()
        .stderr(contains("exhausts the token budget"));
    f.append("stop", &["--tokens", "100", "--stop-reason", "budget"])
        .success();
    let done = f.json(&["done", "--dir", f.d()]);
    assert_eq!(done["reason"], "credit_exhausted:tokens");
    f.assert_valid();
}

#[test]
fn dry_run_checks_everything_and_writes_nothing() {
    let f = Fixture::new();
    f.init(3, &[]);
    let before = f.fingerprint();
    let preview = f.json(&[f.append_words("continue"), vec!["--dry-run"]].concat());
    assert_eq!(
        (preview["dry_run"].as_bool(), preview["iteration"].as_u64()),
        (Some(true), Some(1))
    );
    f.append("blocked", &["--dry-run"])
        .failure()
        .stderr(contains("early blocked"));
    assert_eq!(f.fingerprint(), before);
}

#[test]
fn refusals_in_json_carry_the_early_stop_contract() {
    let f = Fixture::new();
    f.init(3, &[]);
    let output = f
        .loopx()
        .args(f.append_words("stop"))
        .args(["--stop-reason", "success", "--json"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let body: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(body["status"], "failed");
    assert!(body["accepted_stop_reasons"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r == "proof_found"));
    assert_eq!(body["expected_proof_artifact"]["schema_version"], "1.0");
}

#[test]
fn selftest_passes_offline() {
    let f = Fixture::new();
    f.loopx()
        .arg("selftest")
        .assert()
        .success()
        .stdout(contains(" passed, 0 failed"));
}

#[test]
fn a_key_in_any_id_or_reference_flag_never_reaches_the_store() {
    const KEY: &str = "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789_-abcdEFGH";
    let f = Fixture::new();
    f.init(3, &[]);
    let glued = |name: &str| format!("{name}_{KEY}");
    let (input, guard, source, evidence, claim, obligation) = (
        glued("key"),
        glued("guard"),
        glued("src"),
        glued("ev"),
        glued("claim"),
        glued("obl"),
    );
    f.append(
        "continue",
        &[
            "--input-ref",
            &input,
            "--guard-ref",
            &guard,
            "--source-id",
            &source,
            "--evidence-id",
            &evidence,
            "--claim-id",
            &claim,
            "--obligation-id",
            &obligation,
            "--input-ref",
            "notes/plan.md",
        ],
    )
    .success();
    // An honest evidence id still names its proof artifact.
    f.write_proof("proof-1");
    f.append(
        "stop",
        &["--stop-reason", "proof_found", "--evidence-id", "proof-1"],
    )
    .success();

    let stored = common::stored_text(&f.dir);
    assert!(stored.contains("[REDACTED]"), "nothing was redacted");
    assert!(
        !stored.contains("AbCdEfGhIjKlMnOp"),
        "a key survived: {stored}"
    );
    let records = common::journal_events(&f.dir, "ledger.iteration_appended");
    let first = &records[0]["record"];
    assert_eq!(
        first["input_refs"],
        serde_json::json!(["key_[REDACTED]", "notes/plan.md"])
    );
    assert_eq!(
        first["evidence_checked"]["evidence_ids"],
        serde_json::json!(["ev_[REDACTED]"])
    );
    assert_eq!(
        records[1]["record"]["evidence_checked"]["evidence_ids"],
        serde_json::json!(["proof-1"])
    );
    f.assert_valid();
}
