//! Enforce mode through the real binary: `append-iteration` stages a
//! candidate with its evidence embedded, `goal-focus review` banks it
//! (accepted or rejected) and archives it in one transaction, and
//! quarantine holds it until an exact-fingerprint release. Every refusal
//! leaves the loop directory byte-for-byte unchanged; a kill -9 during
//! finalization banks once or not at all; a write between a review's check
//! and its commit prevents the banking.

mod common;
#[path = "../../loopx-store/tests/support/pg_server.rs"]
mod pg_server;

use common::{kill_at_failpoint, Fixture};
use serde_json::{json, Value};

impl Fixture {
    /// `loopx` as a plain process (to hold, pipe or kill it).
    fn process(&self) -> std::process::Command {
        let mut command = std::process::Command::new(common::loopx_path());
        command
            .env("LOOPX_REGISTRY_DIR", &self.registry)
            .env_remove("LOOPX_DIR");
        command
    }

    /// An enforce-mode loop with two evidence files.
    fn enforce(max_iterations: u64) -> Fixture {
        let f = Fixture::new();
        f.init(max_iterations, &["--goal-focus-mode", "enforce"]);
        std::fs::create_dir_all(f.dir.join("notes")).unwrap();
        std::fs::write(f.dir.join("notes/b.md"), "lemma B holds for n <= 4\n").unwrap();
        std::fs::write(f.dir.join("notes/c.md"), "counterexample search: none\n").unwrap();
        f
    }

    fn run(&self, args: &[&str]) -> (bool, Value, String) {
        self.run_in_dir(args)
    }

    fn ok(&self, args: &[&str]) -> Value {
        let (ok, json, stderr) = self.run(args);
        assert!(ok, "{args:?} failed: {stderr}");
        json
    }

    /// `args` must be refused and leave the loop directory unchanged; the
    /// error text.
    fn refused(&self, args: &[&str]) -> String {
        self.refused_in_dir(args).1
    }

    /// Stage an iteration claiming `claims` (each `ID=PATH`), run by
    /// claude, moving obligation o1, spending 1000 tokens and $0.25.
    fn stage(&self, claims: &[&str]) -> String {
        self.stage_with(&[], claims, &[])
    }

    /// [`Self::stage`] with global flags (`--store URL`) first and `extra`
    /// flags last.
    fn stage_with(&self, global: &[&str], claims: &[&str], extra: &[&str]) -> String {
        let mut args: Vec<String> = [
            &common::STAGE_BY_HAND[..],
            &[
                "--obligation-id",
                "o1",
                "--global-delta",
                "reduced",
                "--tokens",
                "1000",
                "--usd",
                "0.25",
            ],
        ]
        .concat()
        .into_iter()
        .map(str::to_owned)
        .collect();
        for claim in claims {
            let (id, _) = claim.split_once('=').unwrap();
            args.extend(["--claim-id".into(), id.into()]);
            args.extend(["--claim-evidence".into(), (*claim).into()]);
        }
        args.extend(extra.iter().map(|e| (*e).to_owned()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (ok, staged, stderr) = self.run_in_dir_with(global, &args);
        assert!(ok, "staging failed: {stderr}");
        assert_eq!(staged["state"], "pending_review", "{staged}");
        staged["candidate_fingerprint"].as_str().unwrap().to_owned()
    }

    fn review_file(&self, name: &str, review: &Value) -> String {
        let path = self.temp.path().join(name);
        std::fs::write(&path, review.to_string()).unwrap();
        path.display().to_string()
    }

    fn review_args(fingerprint: &str, file: &str) -> Vec<String> {
        [
            "goal-focus",
            "review",
            "--candidate-fingerprint",
            fingerprint,
            "--file",
            file,
        ]
        .map(str::to_owned)
        .to_vec()
    }

    fn review(&self, fingerprint: &str, review: &Value) -> (bool, Value, String) {
        let file = self.review_file("review.json", review);
        let args = Fixture::review_args(fingerprint, &file);
        self.run(&args.iter().map(String::as_str).collect::<Vec<_>>())
    }

    fn review_refused(&self, fingerprint: &str, review: &Value) -> String {
        let file = self.review_file("review.json", review);
        let args = Fixture::review_args(fingerprint, &file);
        self.refused(&args.iter().map(String::as_str).collect::<Vec<_>>())
    }

    /// Another append while a candidate is held: refused, unchanged.
    fn another_append_refused(&self) -> String {
        self.refused(&[
            "append-iteration",
            "--mode",
            "bounded-research",
            "--objective",
            "more",
            "--decision",
            "continue",
            "--executor-provider",
            "claude",
            "--executor",
            "claude",
        ])
    }

    fn status(&self) -> Value {
        self.ok(&["status"])
    }

    fn focus_status(&self) -> Value {
        self.ok(&["goal-focus", "status"])
    }

    /// The goal contract as `goal-focus status` summarizes it.
    fn contract(&self) -> Value {
        self.focus_status()["goal_contract"].clone()
    }

    /// Stage c1 on notes/b.md asking obligation o1 to become satisfied,
    /// and a review of it by codex with `verdict` that states that target.
    fn stage_satisfying_o1(&self, verdict: &str) -> (String, Value) {
        let fingerprint = self.stage_with(
            &[],
            &["c1=notes/b.md"],
            &["--obligation-target", "o1=satisfied"],
        );
        let mut review = review_of(&fingerprint, "codex", verdict);
        if verdict == "pass" {
            review["obligations"][0]["target_status"] = json!("satisfied");
        }
        (fingerprint, review)
    }
}

/// A review by `provider` binding `fingerprint`, judging claim c1 (on
/// notes/b.md) and obligation o1 with `verdict`.
fn review_of(fingerprint: &str, provider: &str, verdict: &str) -> Value {
    let (claim, obligation) = match verdict {
        "pass" => ("supported", "met"),
        _ => ("unsupported", "unmet"),
    };
    json!({
        "schema": "result_review.v1",
        "candidate_fingerprint": fingerprint,
        "reviewer": {"provider": provider},
        "verdict": verdict,
        "claims": [{"claim_id": "c1", "status": claim, "evidence_paths": ["notes/b.md"]}],
        "obligations": [{"obligation_id": "o1", "status": obligation, "evidence_paths": ["notes/b.md"]}],
        "inspected_paths": ["notes/b.md"],
        "summary": "checked the bound"
    })
}

#[test]
fn enforce_stages_a_candidate_with_its_evidence_embedded_and_banks_nothing() {
    let f = Fixture::enforce(5);
    let fingerprint = f.stage(&["c1=notes/b.md"]);
    assert!(fingerprint.starts_with("sha256:"));
    let status = f.status();
    assert_eq!(status["iterations"], 0, "nothing banked: {status}");
    let focus = f.focus_status();
    assert_eq!(focus["gate"], "blocked");
    let pending = &focus["candidate"]["pending"];
    assert_eq!(pending["fingerprint"], fingerprint.as_str());
    assert_eq!(pending["executor_family"], "anthropic");
    assert_eq!(pending["claims"][0]["claim_id"], "c1");
    assert_eq!(pending["claims"][0]["evidence_path"], "notes/b.md");
    let evidence = &pending["evidence"][0];
    assert_eq!(evidence["path"], "notes/b.md");
    assert_eq!(evidence["size"], 25);
    assert!(evidence["digest"].as_str().unwrap().starts_with("sha256:"));
    // One pending candidate at a time.
    let second = f.another_append_refused();
    assert!(second.contains("already pending review"), "{second}");
    f.assert_valid();
    assert_eq!(f.ok(&["goal-focus", "validate"])["status"], "ok");
}

#[test]
fn a_secret_in_the_report_or_the_evidence_never_reaches_the_store() {
    let f = Fixture::enforce(5);
    let secret = "sk-ant-api03-PLANTEDaaaaaaaaaaaaaaaaaaaaaaaaaa0123456789";
    std::fs::write(f.dir.join("notes/b.md"), format!("key {secret} works\n")).unwrap();
    let output = format!("used {secret}");
    let fingerprint = &f.stage_with(&[], &["c1=notes/b.md"], &["--output", &output]);
    let pending = &f.focus_status()["candidate"]["pending"]["evidence"][0];
    // Size and digest are of the file as read; its content was redacted.
    assert_eq!(pending["size"], format!("key {secret} works\n").len());
    let review = review_of(fingerprint, "codex", "pass");
    let (ok, _, stderr) = f.review(fingerprint, &review);
    assert!(ok, "{stderr}");
    for (name, bytes) in f.fingerprint() {
        if name.ends_with(".md") && name.starts_with("notes") {
            continue;
        }
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains(secret), "{name} holds the secret");
    }
}

#[test]
fn staging_refuses_loopx_control_files_as_evidence_and_changes_nothing() {
    let f = Fixture::enforce(5);
    std::fs::create_dir_all(f.dir.join("driver_logs")).unwrap();
    std::fs::create_dir_all(f.dir.join("panel")).unwrap();
    for (path, bytes) in [
        ("serve.token", "T0ken-0123456789abcdef\n"),
        ("notify.json", "{}"),
        ("panel.json", "{}"),
        ("driver_logs/d1.log", "raw agent output\n"),
        ("panel/brief.md", "a brief\n"),
    ] {
        std::fs::write(f.dir.join(path), bytes).unwrap();
    }
    for (path, why) in [
        ("serve.token", "serve.token is the dashboard's bearer token"),
        ("notify.json", "webhook URLs and secrets"),
        ("panel.json", "the review panel's config"),
        ("loopx.sqlite", "the loop's database"),
        ("loopx.sqlite-wal", "write-ahead log"),
        ("loopx.sqlite-journal", "rollback journal"),
        ("driver.lock", "the driver's lock"),
        (
            "driver_logs/d1.log",
            "driver_logs/ is the driver's raw, unredacted agent logs",
        ),
        ("panel/brief.md", "the review panel's own artifacts"),
        ("status.json", "a view loopx rewrites"),
    ] {
        let pair = format!("c1={path}");
        let mut args: Vec<&str> = common::STAGE_BY_HAND.to_vec();
        args.extend(["--claim-id", "c1", "--claim-evidence", &pair]);
        // `refused` checks that the directory is byte-for-byte unchanged.
        let error = f.refused(&args);
        assert!(
            error.contains(why) && error.contains("never evidence") && error.contains(&pair),
            "{path}: {error}"
        );
    }
    assert_eq!(f.focus_status()["candidate"]["pending"], Value::Null);
}

#[test]
fn staging_refuses_unbacked_claims_links_escapes_and_unknown_executors() {
    let f = Fixture::enforce(5);
    std::os::unix::fs::symlink("/etc/passwd", f.dir.join("notes/link.md")).unwrap();
    std::fs::write(f.dir.join("notes/big.md"), vec![b'x'; 300 * 1024]).unwrap();
    let base = [
        "append-iteration",
        "--mode",
        "bounded-research",
        "--objective",
        "Check lemma B",
        "--decision",
        "continue",
    ];
    let with = |extra: &[&str]| -> String {
        let args: Vec<&str> = base.iter().chain(extra).copied().collect();
        f.refused(&args)
    };
    let claude = ["--executor-provider", "claude", "--executor", "claude"];
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--claim-id", "c1"], "has no evidence path"),
        (
            vec!["--claim-id", "c1", "--claim-evidence", "c2=notes/b.md"],
            "does not make",
        ),
        (
            vec!["--claim-id", "c1", "--claim-evidence", "c1=notes/link.md"],
            "symlink",
        ),
        (
            vec!["--claim-id", "c1", "--claim-evidence", "c1=../outside.md"],
            "--claim-evidence",
        ),
        (
            vec!["--claim-id", "c1", "--claim-evidence", "c1=notes/big.md"],
            "limit",
        ),
        (
            vec!["--claim-id", "c1", "--claim-evidence", "c1=notes/none.md"],
            "does not exist",
        ),
    ];
    for (extra, expected) in cases {
        let args: Vec<&str> = claude.iter().chain(&extra).copied().collect();
        let error = with(&args);
        assert!(error.contains(expected), "{extra:?}: {error}");
    }
    // No executor stated (no dispatch is open to name one), or one no
    // family can be attributed to: fail closed.
    let error = with(&[]);
    assert!(error.contains("--executor PROVIDER"), "{error}");
    let error = with(&["--executor-provider", "claude"]);
    assert!(error.contains("--executor PROVIDER"), "{error}");
    let error = with(&["--executor", "my-gateway"]);
    assert!(error.contains("no verified family"), "{error}");
    // The report's own claim never overrides the stated executor.
    let error = with(&["--executor-provider", "codex", "--executor", "claude"]);
    assert!(error.contains("never from the report"), "{error}");
    let mut overridden = f.loopx();
    overridden
        .args(base)
        .args(["--executor", "claude", "--dir", f.d()])
        .env("ANTHROPIC_BASE_URL", "https://proxy.example");
    let before = f.fingerprint();
    let output = overridden.output().unwrap();
    assert!(!output.status.success());
    assert_eq!(f.fingerprint(), before);
}

#[test]
fn a_passing_different_family_review_banks_the_row_charges_the_budget_and_archives_at_once() {
    let f = Fixture::enforce(5);
    let fingerprint = f.stage(&["c1=notes/b.md"]);
    let (ok, banked, stderr) = f.review(&fingerprint, &review_of(&fingerprint, "codex", "pass"));
    assert!(ok, "{stderr}");
    assert_eq!(banked["bank_status"], "accepted");
    assert_eq!(banked["reviewer_family"], "openai");
    assert_eq!(banked["iteration"], 1);
    let status = f.status();
    assert_eq!(status["iterations"], 1);
    assert_eq!(status["spent"]["tokens"], 1000, "{status}");
    assert_eq!(status["spent"]["usd"], 0.25);
    let focus = f.focus_status();
    assert_eq!(focus["candidate"]["pending"], Value::Null);
    assert_eq!(focus["candidate"]["archived"], 1);
    let row = &f.status()["last_iteration"];
    assert_eq!(row["bank"]["status"], "accepted", "{row}");
    assert_eq!(row["bank"]["candidate_fingerprint"], fingerprint.as_str());
    assert_eq!(row["evidence_checked"]["claim_ids"], json!(["c1"]));
    // The same review again banks nothing twice.
    let again = f.review_refused(&fingerprint, &review_of(&fingerprint, "codex", "pass"));
    assert!(again.contains("already finalized"), "{again}");
    f.assert_valid();
    assert_eq!(f.ok(&["goal-focus", "validate"])["status"], "ok");
    // The next candidate can be staged now.
    f.stage(&["c1=notes/c.md"]);
}

#[test]
fn an_exact_retry_of_a_review_returns_its_receipt_and_banks_nothing() {
    let f = Fixture::enforce(5);
    let fingerprint = f.stage(&["c1=notes/b.md"]);
    let file = f.review_file("review.json", &review_of(&fingerprint, "codex", "pass"));
    let mut args = Fixture::review_args(&fingerprint, &file);
    args.extend(["--operation-id".into(), "review-1".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let first = f.ok(&args);
    assert_eq!(first["replayed"], false);
    let before = f.fingerprint();
    let again = f.ok(&args);
    assert_eq!(again["replayed"], true, "{again}");
    assert_eq!(again["iteration"], first["iteration"]);
    assert_eq!(again["bank_status"], "accepted");
    assert_eq!(f.fingerprint(), before, "a replay writes nothing");
    // The same operation id with another verdict is a conflict.
    let file = f.review_file("fail.json", &review_of(&fingerprint, "codex", "fail"));
    let mut args = Fixture::review_args(&fingerprint, &file);
    args.extend(["--operation-id".into(), "review-1".into()]);
    let error = f.refused(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        error.contains("already used for a different request"),
        "{error}"
    );
    assert_eq!(f.status()["iterations"], 1);
}

#[test]
fn a_failing_review_banks_the_row_rejected_with_its_cost_and_nothing_it_claimed() {
    let f = Fixture::enforce(5);
    let fingerprint = f.stage(&["c1=notes/b.md"]);
    let (ok, banked, stderr) = f.review(&fingerprint, &review_of(&fingerprint, "codex", "fail"));
    assert!(ok, "{stderr}");
    assert_eq!(banked["bank_status"], "rejected");
    assert_eq!(banked["decision"], "revise");
    let status = f.status();
    assert_eq!(status["iterations"], 1);
    assert_eq!(
        status["spent"]["tokens"], 1000,
        "real cost counts: {status}"
    );
    let row = &f.status()["last_iteration"];
    assert_eq!(row["bank"]["status"], "rejected", "{row}");
    assert_eq!(row["evidence_checked"]["claim_ids"], json!([]));
    assert_eq!(row["direction"].get("obligation_ids"), None, "{row}");
    assert_eq!(row["direction"].get("global_delta"), None, "{row}");
    // The next plan needs a replan: the dissent is a replan trigger.
    let focus = f.focus_status();
    let triggers: Vec<&str> = focus["signals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["trigger"].as_str().unwrap())
        .collect();
    assert!(triggers.contains(&"reviewer_dissent"), "{focus}");
    f.assert_valid();
}

#[test]
fn reviews_that_cannot_decide_the_candidate_are_refused_and_change_nothing() {
    let f = Fixture::enforce(5);
    let fingerprint = f.stage(&["c1=notes/b.md", "c2=notes/c.md"]);
    let both = |provider: &str| {
        json!({
            "schema": "result_review.v1",
            "candidate_fingerprint": fingerprint,
            "reviewer": {"provider": provider},
            "verdict": "pass",
            "claims": [
                {"claim_id": "c1", "status": "supported", "evidence_paths": ["notes/b.md"]},
                {"claim_id": "c2", "status": "supported", "evidence_paths": ["notes/c.md"]}
            ],
            "obligations": [{"obligation_id": "o1", "status": "met", "evidence_paths": ["notes/b.md"]}],
            "inspected_paths": ["notes/b.md", "notes/c.md"]
        })
    };
    let mut cases: Vec<(Value, &str)> = Vec::new();
    // Same family as the executor (claude: anthropic).
    cases.push((both("claude"), "executor's own"));
    // A reviewer no family can be attributed to.
    cases.push((both("my-gateway"), "no verified family"));
    // Split coverage: each review covers one claim; neither is unanimity.
    for (keep, missing) in [(0, "c2"), (1, "c1")] {
        let mut split = both("codex");
        let claim = split["claims"][keep].clone();
        split["claims"] = json!([claim]);
        cases.push((split, if missing == "c2" { "\"c2\"" } else { "\"c1\"" }));
    }
    // The obligation left out.
    let mut no_obligation = both("codex");
    no_obligation["obligations"] = json!([]);
    cases.push((no_obligation, "does not cover obligation"));
    // Another candidate's fingerprint.
    let mut wrong = both("codex");
    wrong["candidate_fingerprint"] = json!(format!("sha256:{}", "0".repeat(64)));
    cases.push((wrong, "binds candidate"));
    // Supported without citing inspected evidence.
    let mut uncited = both("codex");
    uncited["inspected_paths"] = json!(["notes/b.md"]);
    cases.push((uncited, "cites no staged evidence"));
    // Inspected something that was never staged.
    let mut unstaged = both("codex");
    unstaged["inspected_paths"] = json!(["notes/b.md", "notes/c.md", "secret.txt"]);
    cases.push((unstaged, "staged no such evidence"));
    // A pass that finds a claim unsupported.
    let mut disagrees = both("codex");
    disagrees["claims"][1]["status"] = json!("unsupported");
    cases.push((disagrees, "verdict is pass"));
    // Malformed: an unknown field, a wrong schema, a wrong verdict word.
    let mut extra = both("codex");
    extra["approved"] = json!(true);
    cases.push((extra, "result_review.v1"));
    let mut schema = both("codex");
    schema["schema"] = json!("result_review.v0");
    cases.push((schema, "schema"));
    let mut verdict = both("codex");
    verdict["verdict"] = json!("lgtm");
    cases.push((verdict, "result_review.v1"));
    for (review, expected) in cases {
        let error = f.review_refused(&fingerprint, &review);
        assert!(error.contains(expected), "{review}: {error}");
    }
    // Not JSON at all.
    let file = f.temp.path().join("garbage.json");
    std::fs::write(&file, "verdict: pass").unwrap();
    let args = Fixture::review_args(&fingerprint, file.to_str().unwrap());
    f.refused(&args.iter().map(String::as_str).collect::<Vec<_>>());
    // The CLI's fingerprint must be the pending one, and a digest at all.
    let other = format!("sha256:{}", "1".repeat(64));
    let error = f.review_refused(&other, &both("codex"));
    assert!(error.contains("not the pending one"), "{error}");
    let error = f.review_refused("latest", &both("codex"));
    assert!(error.contains("sha256:<64 hex>"), "{error}");
    // A complete review from another family still banks.
    let (ok, banked, stderr) = f.review(&fingerprint, &both("codex"));
    assert!(ok, "{stderr}");
    assert_eq!(banked["bank_status"], "accepted");
}

#[test]
fn killing_finalization_at_any_commit_boundary_banks_once_or_not_at_all() {
    // The banking moves three streams (ledger row, candidate archive, goal
    // contract): a kill anywhere leaves all three before or all after.
    for failpoint in [
        "focus.review.before_finalize",
        "sqlite.commit.before_journal",
        "sqlite.commit_all.between",
        "sqlite.commit_all.before_commit",
        "sqlite.commit_all.after_commit",
    ] {
        let f = Fixture::enforce(5);
        f.with_obligations();
        let (fingerprint, review) = f.stage_satisfying_o1("pass");
        let file = f.review_file("review.json", &review);
        let mut command = f.process();
        command
            .args(Fixture::review_args(&fingerprint, &file))
            .args(["--dir", f.d()]);
        kill_at_failpoint(command, failpoint);
        let banked = f.status()["iterations"].as_u64().unwrap();
        let pending = f.focus_status()["candidate"]["pending"].clone();
        let contract = f.contract();
        match banked {
            // Not banked: the candidate is still pending, the contract as
            // it was, and reviewing it now banks it once.
            0 => {
                assert_eq!(pending["fingerprint"], fingerprint.as_str(), "{failpoint}");
                assert_eq!(contract["revision"], 1, "{failpoint}: {contract}");
                assert_eq!(contract["open_obligations"], 2, "{failpoint}");
                let (ok, _, stderr) = f.review(&fingerprint, &review);
                assert!(ok, "{failpoint}: {stderr}");
            }
            // Banked: archived and the obligation moved in the same
            // transaction.
            1 => {
                assert_eq!(pending, Value::Null, "{failpoint}");
                assert_eq!(contract["revision"], 2, "{failpoint}: {contract}");
            }
            n => panic!("{failpoint}: banked {n} times"),
        }
        assert_eq!(f.contract()["open_obligations"], 1, "{failpoint}");
        assert_eq!(f.status()["iterations"], 1, "{failpoint}");
        assert_eq!(f.status()["spent"]["tokens"], 1000, "{failpoint}");
        f.assert_valid();
        assert_eq!(f.ok(&["goal-focus", "validate"])["status"], "ok");
    }
}

/// Start a review of `fingerprint` and hold it after its check, before its
/// commit; run `between`; let it go on. Its output.
fn interleave(f: &Fixture, fingerprint: &str, between: impl FnOnce()) -> std::process::Output {
    let file = f.review_file("held.json", &review_of(fingerprint, "codex", "pass"));
    let mut command = f.process();
    command
        .args(Fixture::review_args(fingerprint, &file))
        .args(["--dir", f.d(), "--json"]);
    common::held_at(command, "focus.review.before_finalize", between)
}

#[test]
fn a_write_between_a_reviews_check_and_its_commit_prevents_the_banking() {
    // Another review of the same candidate commits first: the held one
    // must not bank it a second time.
    let f = Fixture::enforce(5);
    let fingerprint = f.stage(&["c1=notes/b.md"]);
    let output = interleave(&f, &fingerprint, || {
        let (ok, _, stderr) = f.review(&fingerprint, &review_of(&fingerprint, "codex", "pass"));
        assert!(ok, "{stderr}");
    });
    assert!(!output.status.success(), "the held review banked too");
    assert_eq!(f.status()["iterations"], 1);
    f.assert_valid();

    // The host quarantines the candidate meanwhile: nothing is banked.
    let f = Fixture::enforce(5);
    let fingerprint = f.stage(&["c1=notes/b.md"]);
    let output = interleave(&f, &fingerprint, || {
        f.ok(&[
            "goal-focus",
            "quarantine",
            "--candidate-fingerprint",
            &fingerprint,
            "--reason",
            "turn timed out",
        ]);
    });
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "banked past a quarantine");
    assert!(
        stderr.contains("stale") || stderr.contains("quarantined"),
        "{stderr}"
    );
    assert_eq!(f.status()["iterations"], 0);
    assert!(f.focus_status()["candidate"]["quarantined"].is_object());
    f.assert_valid();
}

#[test]
fn a_quarantined_candidate_holds_everything_until_its_exact_fingerprint_releases_it() {
    let f = Fixture::enforce(5);
    let fingerprint = f.stage(&["c1=notes/b.md"]);
    let other = format!("sha256:{}", "2".repeat(64));
    let error = f.refused(&[
        "goal-focus",
        "quarantine",
        "--candidate-fingerprint",
        &other,
        "--reason",
        "timeout",
    ]);
    assert!(error.contains("not the pending one"), "{error}");
    f.ok(&[
        "goal-focus",
        "quarantine",
        "--candidate-fingerprint",
        &fingerprint,
        "--reason",
        "cleanup failed",
    ]);
    let shown = f.ok(&["goal-focus", "recover-quarantine"]);
    assert_eq!(shown["quarantined"]["fingerprint"], fingerprint.as_str());
    assert_eq!(shown["quarantined"]["reason"], "cleanup failed");
    assert!(shown["release_command"]
        .as_str()
        .unwrap()
        .ends_with(&format!("--release --candidate-fingerprint {fingerprint}")));
    assert_eq!(f.focus_status()["gate"], "blocked");
    // Neither review nor staging gets past it.
    let error = f.review_refused(&fingerprint, &review_of(&fingerprint, "codex", "pass"));
    assert!(error.contains("quarantined"), "{error}");
    let error = f.another_append_refused();
    assert!(error.contains("quarantined"), "{error}");
    // The driver stops without running a turn.
    let drive = f
        .loopx()
        .args(["drive", "--dir", f.d(), "--provider", "claude"])
        .output()
        .unwrap();
    assert_eq!(drive.status.code(), Some(4), "{drive:?}");
    assert!(
        String::from_utf8_lossy(&drive.stderr).contains("quarantined")
            || String::from_utf8_lossy(&drive.stdout).contains("quarantined")
    );
    // Only the exact fingerprint releases it, and the release banks nothing.
    let before = f.status();
    let error = f.refused(&[
        "goal-focus",
        "recover-quarantine",
        "--release",
        "--candidate-fingerprint",
        &other,
    ]);
    assert!(error.contains("not the quarantined one"), "{error}");
    let released = f.ok(&[
        "goal-focus",
        "recover-quarantine",
        "--release",
        "--candidate-fingerprint",
        &fingerprint,
    ]);
    assert_eq!(released["state"], "released");
    let after = f.status();
    assert_eq!(after["iterations"], before["iterations"]);
    assert_eq!(after["spent"], before["spent"]);
    assert_eq!(f.focus_status()["candidate"]["quarantined"], Value::Null);
    f.assert_valid();
    f.stage(&["c1=notes/b.md"]);
}

#[test]
fn a_plain_monitor_loop_still_banks_appends_directly() {
    let f = Fixture::new();
    f.init(5, &[]);
    f.append("continue", &["--claim-id", "c1"]).success();
    assert_eq!(f.status()["iterations"], 1);
    assert_eq!(f.status()["last_iteration"].get("bank"), None);
    let review = review_of(&format!("sha256:{}", "3".repeat(64)), "codex", "pass");
    let error = f.review_refused(&format!("sha256:{}", "3".repeat(64)), &review);
    assert!(error.contains("no candidate is pending"), "{error}");
    f.assert_valid();
}

/// `GET path` on a `loopx serve --json` of `f` with its token: the body.
/// `GET path` from a real `loopx serve` on the loop: the JSON body.
fn api_get(f: &Fixture, path: &str) -> Value {
    let (status, json) = common::Server::start(f).request("GET", path, "");
    assert_eq!(status, 200, "{json}");
    json
}

#[test]
fn the_health_line_of_a_closed_enforce_gate_needs_a_person_until_a_direction_is_reviewed() {
    let f = Fixture::enforce(5);
    let health = api_get(&f, "/api/health");
    assert_eq!(health["state"], "needs_person", "{health}");
    assert!(
        health["line"]
            .as_str()
            .unwrap()
            .contains("pre-dispatch gate is closed (missing_plan"),
        "{health}"
    );
    assert_eq!(
        health["command"].as_str(),
        Some(format!("loopx goal-focus status --dir {}", f.d()).as_str())
    );
    f.reviewed_direction();
    let health = api_get(&f, "/api/health");
    assert_eq!(health["state"], "not_driven", "{health}");
}

#[test]
fn the_health_line_of_an_undecided_candidate_needs_a_person_and_names_the_command() {
    let f = Fixture::enforce(5);
    let fingerprint = f.stage(&["c1=notes/b.md"]);
    // Pending: a person brings (or the panel runs) the review.
    let health = api_get(&f, "/api/health");
    assert_eq!(health["state"], "needs_person", "{health}");
    assert!(health["command"].as_str().unwrap().contains(&format!(
        "goal-focus review --dir {} --candidate-fingerprint {fingerprint}",
        f.d()
    )));
    f.ok(&[
        "goal-focus",
        "quarantine",
        "--candidate-fingerprint",
        &fingerprint,
        "--reason",
        "turn timed out",
    ]);
    let health = api_get(&f, "/api/health");
    assert_eq!(health["state"], "needs_person", "{health}");
    assert!(
        health["line"].as_str().unwrap().contains("quarantined"),
        "{health}"
    );
    assert_eq!(
        health["command"].as_str(),
        Some(format!("loopx goal-focus recover-quarantine --dir {}", f.d()).as_str())
    );
}

#[test]
fn staging_and_finalization_work_the_same_on_postgresql() {
    let Some(url) = pg_server::database() else {
        return;
    };
    let f = Fixture::new();
    let store = ["--store", url.as_str()];
    f.loopx()
        .args(store)
        .args(f.init_words())
        .args(["--goal-focus-mode", "enforce"])
        .assert()
        .success();
    std::fs::create_dir_all(f.dir.join("notes")).unwrap();
    std::fs::write(f.dir.join("notes/b.md"), "lemma B holds for n <= 4\n").unwrap();
    let run = |args: &[&str]| -> Value {
        let (ok, json, stderr) = f.run_in_dir_with(&store, args);
        assert!(ok, "{args:?}: {stderr}");
        assert!(!json.to_string().contains(pg_server::PASSWORD), "{json}");
        json
    };
    // The contract's o1 moves with the banking: three streams, one
    // PostgreSQL transaction.
    let contract = f.json_file(
        "contract.json",
        &json!({"goal": "prove B", "obligations": [{"obligation_id": "o1", "description": "lemma B"}]}),
    );
    run(&["goal-focus", "revise", "--contract", &contract]);
    let fingerprint = f.stage_with(
        &store,
        &["c1=notes/b.md"],
        &["--obligation-target", "o1=satisfied"],
    );
    let mut review = review_of(&fingerprint, "codex", "pass");
    review["obligations"][0]["target_status"] = json!("satisfied");
    let file = f.review_file("review.json", &review);
    let args = Fixture::review_args(&fingerprint, &file);
    let banked = run(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(banked["bank_status"], "accepted");
    assert_eq!(run(&["status"])["iterations"], 1);
    let focus = run(&["goal-focus", "status"]);
    assert_eq!(focus["candidate"]["archived"], 1);
    assert_eq!(focus["goal_contract"]["revision"], 2, "{focus}");
    assert_eq!(focus["goal_contract"]["open_obligations"], 0, "{focus}");
    assert_eq!(run(&["validate"])["status"], "ok");
}

/// `append-iteration` of claim c1 on notes/b.md as an agent of `dispatch`
/// runs it (`LOOPX_DISPATCH_ID`; `None`: by hand), with `extra` flags.
fn append_under(f: &Fixture, dispatch: Option<&str>, extra: &[&str]) -> (bool, Value, String) {
    let mut command = f.loopx();
    command
        .args(["append-iteration", "--mode", "bounded-research"])
        .args(["--objective", "Check lemma B", "--decision", "continue"])
        .args(["--claim-id", "c1", "--claim-evidence", "c1=notes/b.md"])
        .args(["--obligation-id", "o1", "--global-delta", "reduced"])
        .args(extra)
        .args(["--dir", f.d(), "--json"])
        .env_remove("AAS_AUTOLOOP_PRIMARY_PROVIDER")
        .env("LOOPX_DISPATCH_ID", dispatch.unwrap_or(""));
    let output = command.output().unwrap();
    (
        output.status.success(),
        serde_json::from_slice(&output.stdout).unwrap_or(Value::Null),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn append_under_refused(f: &Fixture, dispatch: Option<&str>, extra: &[&str]) -> String {
    let before = f.fingerprint();
    let (ok, json, stderr) = append_under(f, dispatch, extra);
    assert!(!ok, "{dispatch:?} {extra:?} was staged: {json}");
    assert_eq!(
        f.fingerprint(),
        before,
        "a refused staging wrote ({stderr})"
    );
    stderr
}

#[test]
fn staging_binds_to_the_open_dispatch_and_takes_its_executor_never_the_reports() {
    let f = Fixture::enforce(5);
    let dispatch = f.open_dispatch("claude");
    let id = Some(dispatch.as_str());
    // By hand while a turn's dispatch is open: it belongs to that turn.
    let error = append_under_refused(&f, None, &["--executor", "claude"]);
    assert!(error.contains("is open"), "{error}");
    let error = append_under_refused(&f, Some("d9-forged"), &[]);
    assert!(error.contains("the open dispatch is"), "{error}");
    // A hostile agent claiming another family to pick its own reviewer.
    let error = append_under_refused(&f, id, &["--executor-provider", "codex"]);
    assert!(error.contains("never from the report"), "{error}");
    let mut lying = f.loopx();
    lying
        .args(["append-iteration", "--mode", "bounded-research"])
        .args(["--objective", "o", "--decision", "continue"])
        .args(["--dir", f.d()])
        .env("LOOPX_DISPATCH_ID", &dispatch)
        .env("AAS_AUTOLOOP_PRIMARY_PROVIDER", "deepseek");
    let before = f.fingerprint();
    assert!(!lying.output().unwrap().status.success());
    assert_eq!(f.fingerprint(), before);

    let (ok, staged, stderr) = append_under(&f, id, &[]);
    assert!(ok, "{stderr}");
    let fingerprint = staged["candidate_fingerprint"].as_str().unwrap().to_owned();
    let pending = &f.focus_status()["candidate"]["pending"];
    assert_eq!(pending["dispatch_id"], dispatch.as_str());
    assert_eq!(pending["executor_provider"], "claude");
    assert_eq!(pending["executor_family"], "anthropic");
    // A claude reviewer is the executor's family: refused.
    let same = f.review_refused(&fingerprint, &review_of(&fingerprint, "claude", "pass"));
    assert!(same.contains("different family"), "{same}");
    let (ok, _, stderr) = f.review(&fingerprint, &review_of(&fingerprint, "codex", "pass"));
    assert!(ok, "{stderr}");
    let row = &f.status()["last_iteration"];
    assert_eq!(row["executor_provider"], "claude", "{row}");
    // One candidate per dispatch: the same turn cannot stage a second.
    let error = append_under_refused(&f, id, &[]);
    assert!(error.contains("already staged a candidate"), "{error}");
}

#[test]
fn recover_dispatch_shows_the_open_dispatch_and_cancels_only_its_exact_id() {
    let f = Fixture::enforce(5);
    let nothing = f.ok(&["goal-focus", "recover-dispatch"]);
    assert_eq!(nothing["open"], Value::Null);
    let refused = f.refused(&[
        "goal-focus",
        "recover-dispatch",
        "--cancel",
        "--dispatch-id",
        "d1-x",
    ]);
    assert!(refused.contains("no dispatch is open"), "{refused}");

    let dispatch = f.open_dispatch("claude");
    let shown = f.ok(&["goal-focus", "recover-dispatch"]);
    let open = &shown["open"];
    assert_eq!(open["dispatch_id"], dispatch.as_str(), "{shown}");
    assert_eq!(open["provider"], "claude");
    assert_eq!(open["agent"], "not_started");
    assert_eq!(open["running_driver"], Value::Null);
    assert_eq!(open["recovery"]["action"], "cancel_unstarted");
    assert!(open["since"].as_str().is_some());
    // The enforce gate is closed on it, and the health line names the command.
    let focus = f.focus_status();
    assert_eq!(focus["gate"], "blocked", "{focus}");
    assert_eq!(
        focus["unresolved_dispatch"]["command"],
        format!("loopx goal-focus recover-dispatch --dir {}", f.d())
    );
    let health = api_get(&f, "/api/health");
    assert_eq!(health["state"], "needs_person", "{health}");
    assert_eq!(
        health["command"].as_str(),
        Some(format!("loopx goal-focus recover-dispatch --dir {}", f.d()).as_str())
    );

    let wrong = f.refused(&[
        "goal-focus",
        "recover-dispatch",
        "--cancel",
        "--dispatch-id",
        "d9-other",
    ]);
    assert!(wrong.contains("not the open dispatch"), "{wrong}");
    let cancelled = f.ok(&[
        "goal-focus",
        "recover-dispatch",
        "--cancel",
        "--dispatch-id",
        &dispatch,
    ]);
    assert_eq!(cancelled["cancelled"], dispatch.as_str());
    assert_eq!(
        f.ok(&["goal-focus", "recover-dispatch"])["open"],
        Value::Null
    );
    assert_eq!(f.focus_status()["unresolved_dispatch"], Value::Null);
    let recent = &f.status()["driver"]["last"];
    assert_eq!(recent["outcome"], "cancelled", "{recent}");
    // The cancelled dispatch can no longer stage anything.
    let error = append_under_refused(&f, Some(&dispatch), &[]);
    assert!(error.contains("is not open"), "{error}");
    f.assert_valid();
}

#[test]
fn recover_dispatch_never_cancels_a_dispatch_a_live_driver_holds() {
    let f = Fixture::enforce(5);
    let dispatch = f.open_dispatch("claude");
    // A driver that holds the loop's lock (as a running one does).
    let lock = std::fs::OpenOptions::new()
        .write(true)
        .open(f.dir.join("driver.lock"))
        .unwrap();
    lock.try_lock().unwrap();
    let held = f.refused(&[
        "goal-focus",
        "recover-dispatch",
        "--cancel",
        "--dispatch-id",
        &dispatch,
    ]);
    assert!(held.contains("another driver"), "{held}");
    drop(lock);
    f.ok(&[
        "goal-focus",
        "recover-dispatch",
        "--cancel",
        "--dispatch-id",
        &dispatch,
    ]);
}

#[test]
fn an_accepting_review_must_state_exactly_the_requested_obligation_target_status() {
    let f = Fixture::enforce(5);
    let targeting = |target: &str| {
        f.refused(&[
            "append-iteration",
            "--mode",
            "bounded-research",
            "--objective",
            "o",
            "--decision",
            "continue",
            "--executor",
            "claude",
            "--obligation-id",
            "o1",
            "--obligation-target",
            target,
        ])
    };
    let malformed = targeting("o1=done");
    assert!(malformed.contains("OBLIGATION_ID=STATUS"), "{malformed}");
    let unmoved = targeting("o2=satisfied");
    assert!(unmoved.contains("does not move"), "{unmoved}");
    // Banking moves only the contract's obligations: it has none yet.
    let undefined = targeting("o1=satisfied");
    assert!(undefined.contains("does not define"), "{undefined}");
    f.with_obligations();

    let fingerprint = f.stage_with(
        &[],
        &["c1=notes/b.md"],
        &["--obligation-target", "o1=satisfied"],
    );
    let pending = &f.focus_status()["candidate"]["pending"];
    assert_eq!(
        pending["obligation_targets"],
        json!([{"obligation_id": "o1", "target_status": "satisfied"}])
    );
    let mut review = review_of(&fingerprint, "codex", "pass");
    for wrong in [Value::Null, json!("partial"), json!("closed")] {
        review["obligations"][0]["target_status"] = wrong.clone();
        let refused = f.review_refused(&fingerprint, &review);
        assert!(
            refused.contains("exactly the requested target status"),
            "{wrong}: {refused}"
        );
    }
    let before = f.fingerprint();
    review["obligations"][0]["target_status"] = json!("satisfied");
    let (ok, banked, stderr) = f.review(&fingerprint, &review);
    assert!(ok, "{stderr}");
    assert_eq!(banked["bank_status"], "accepted");
    assert_ne!(f.fingerprint(), before);
    // Without a requested target, an accepting review states none.
    let f = Fixture::enforce(5);
    let fingerprint = f.stage(&["c1=notes/b.md"]);
    let mut stated = review_of(&fingerprint, "codex", "pass");
    stated["obligations"][0]["target_status"] = json!("satisfied");
    let refused = f.review_refused(&fingerprint, &stated);
    assert!(refused.contains("requests none"), "{refused}");
}

#[test]
fn banking_an_accepted_candidate_moves_its_reviewed_obligations_in_the_contract() {
    let f = Fixture::enforce(5);
    f.with_obligations();
    let before = f.contract();
    assert_eq!(
        (&before["revision"], &before["open_obligations"]),
        (&json!(1), &json!(2))
    );
    let (fingerprint, review) = f.stage_satisfying_o1("pass");
    let file = f.review_file("review.json", &review);
    let mut args = Fixture::review_args(&fingerprint, &file);
    args.extend(["--operation-id".to_owned(), "bank-1".to_owned()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let banked = f.ok(&args);
    assert_eq!(banked["bank_status"], "accepted");
    let after = f.contract();
    assert_eq!(after["revision"], 2, "{after}");
    assert_eq!(after["open_obligations"], 1, "o1 is satisfied: {after}");
    let row = &f.status()["last_iteration"];
    assert_eq!(
        row["bank"]["obligation_transitions"],
        json!([{"obligation_id": "o1", "target_status": "satisfied"}]),
        "{row}"
    );
    // The retry of that review answers with its receipt and moves nothing.
    let again = f.fingerprint();
    assert_eq!(f.ok(&args)["replayed"], true);
    assert_eq!(f.fingerprint(), again);
    f.assert_valid();
    assert_eq!(f.ok(&["goal-focus", "validate"])["status"], "ok");
}

#[test]
fn banking_a_rejected_candidate_leaves_the_contract_unchanged() {
    let f = Fixture::enforce(5);
    f.with_obligations();
    let before = f.contract();
    let (fingerprint, review) = f.stage_satisfying_o1("fail");
    let (ok, banked, stderr) = f.review(&fingerprint, &review);
    assert!(ok, "{stderr}");
    assert_eq!(banked["bank_status"], "rejected");
    assert_eq!(f.contract(), before, "a rejected candidate moves nothing");
    let row = &f.status()["last_iteration"];
    assert_eq!(row["bank"].get("obligation_transitions"), None, "{row}");
}

#[test]
fn only_a_banked_reviewed_discharge_resets_the_count_of_iterations_without_reduction() {
    let f = Fixture::enforce(10);
    f.with_obligations();
    f.reviewed_direction();
    let stalled = |f: &Fixture| {
        let signals = f.focus_status()["signals"].clone();
        (signals.as_array().unwrap().iter()).any(|s| s["trigger"] == "no_obligation_reduction")
    };
    // Three banked iterations that each claim --global-delta reduced but
    // ask no obligation to move: the claim is not a reduction.
    for _ in 0..3 {
        let fingerprint = f.stage(&["c1=notes/b.md"]);
        let (ok, _, stderr) = f.review(&fingerprint, &review_of(&fingerprint, "codex", "pass"));
        assert!(ok, "{stderr}");
    }
    assert!(stalled(&f), "{}", f.focus_status());
    // A reviewed transition that discharges o1 is one.
    let (fingerprint, review) = f.stage_satisfying_o1("pass");
    let (ok, _, stderr) = f.review(&fingerprint, &review);
    assert!(ok, "{stderr}");
    assert!(!stalled(&f), "{}", f.focus_status());
    assert_eq!(f.contract()["open_obligations"], 1);
}

#[test]
fn a_candidate_outside_the_plans_compute_policy_is_refused_and_one_inside_it_staged() {
    let f = Fixture::enforce(5);
    // The force-loop general profile's defaults, on the selected approach.
    f.reviewed_direction_with(json!({
        "allowed_services": ["local", "kaggle", "modal"],
        "forbidden_services": ["hetzner", "github-actions"]
    }));
    // The turn prompt states it, in its place.
    let out = f
        .loopx()
        .args(["task-body", "--dir", f.d()])
        .output()
        .unwrap();
    let body = String::from_utf8(out.stdout).unwrap();
    assert!(
        body.contains("## Compute policy\n\n- The compute services the host and the reviewed plan allow: allowed: kaggle, local, modal; forbidden: github-actions, hetzner."),
        "{body}"
    );
    let staging = |extra: &[&str]| -> Vec<String> {
        [
            &common::STAGE_BY_HAND[..],
            &["--claim-id", "c1", "--claim-evidence", "c1=notes/b.md"],
            extra,
        ]
        .concat()
        .into_iter()
        .map(str::to_owned)
        .collect()
    };
    let refused = |extra: &[&str]| {
        let args = staging(extra);
        f.refused(&args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let forbidden = refused(&[
        "--compute-run",
        r#"{"service":"GitHub Actions","status":"succeeded"}"#,
    ]);
    assert!(
        forbidden.contains("\"github-actions\", which the plan forbids"),
        "{forbidden}"
    );
    let unlisted = refused(&[
        "--compute-run",
        r#"{"service":"other:lab","status":"failed"}"#,
    ]);
    assert!(
        unlisted.contains("not among those the plan allows"),
        "{unlisted}"
    );
    let silent = refused(&[]);
    assert!(silent.contains("says nothing about compute"), "{silent}");
    // Inside the policy, or no compute at all: staged.
    let fingerprint = f.stage_with(
        &[],
        &["c1=notes/b.md"],
        &[
            "--compute-run",
            r#"{"service":"kaggle","status":"succeeded"}"#,
        ],
    );
    assert!(fingerprint.starts_with("sha256:"), "{fingerprint}");
}

#[test]
fn without_a_compute_policy_a_report_need_not_say_anything_about_compute() {
    let f = Fixture::enforce(5);
    f.reviewed_direction();
    let out = f
        .loopx()
        .args(["task-body", "--dir", f.d()])
        .output()
        .unwrap();
    assert!(!String::from_utf8(out.stdout)
        .unwrap()
        .contains("## Compute policy"));
    assert!(f.stage(&["c1=notes/b.md"]).starts_with("sha256:"));
}
