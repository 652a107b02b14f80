//! Hostile input through the real binary: paths that name no proof,
//! terminal escapes, inputs without end, and identities that are not ids.
//! Every refusal leaves the loop directory byte-for-byte unchanged.

mod common;

use common::{artifact, Fixture};
use serde_json::{json, Value};
use std::process::Output;
use std::time::{Duration, Instant};

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

impl Fixture {
    fn run(&self, args: &[&str]) -> Output {
        self.loopx()
            .args(args)
            .args(["--dir", self.d()])
            .output()
            .unwrap()
    }

    /// `args` must fail, say `expected`, and change nothing.
    fn refused_unchanged(&self, args: &[&str], expected: &str) {
        let before = self.fingerprint();
        let output = self.run(args);
        let message = stderr(&output);
        assert!(!output.status.success(), "{args:?} was accepted");
        assert!(
            message.contains(expected),
            "{args:?}: expected {expected:?} in {message}"
        );
        assert_eq!(self.fingerprint(), before, "{args:?} changed the loop");
    }

    fn file(&self, name: &str, bytes: &[u8]) -> String {
        let path = self.temp.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        path.display().to_string()
    }

    fn early_stop(&self, evidence_id: &str) -> Output {
        self.append(
            "stop",
            &["--stop-reason", "proof_found", "--evidence-id", evidence_id],
        )
        .get_output()
        .clone()
    }
}

fn setup() -> Fixture {
    let f = Fixture::new();
    f.init(5, &[]);
    f.loopx()
        .args(["todo", "add", "--title", "Build the deck", "--dir", f.d()])
        .assert()
        .success();
    f
}

#[test]
fn a_proof_path_that_names_no_regular_file_never_banks_an_early_stop() {
    let f = setup();
    let d = &f.dir;
    std::fs::create_dir_all(d.join("proofs/dir")).unwrap();
    std::fs::write(d.join("proofs/real.lean"), "theorem b : True := trivial\n").unwrap();
    std::os::unix::fs::symlink("real.lean", d.join("proofs/link.lean")).unwrap();
    std::os::unix::fs::symlink("proofs", d.join("proofs-dir-link")).unwrap();
    let cases = [
        (".", "\".\" is not allowed"),
        ("", "non-empty"),
        ("a/../b", "'..' is not allowed"),
        ("/etc/passwd", "not absolute"),
        ("proofs/", "empty name"),
        ("proofs\\real.lean", "'\\\\'"),
        ("proofs/link.lean", "symlink"),
        ("proofs-dir-link/real.lean", "symlink"),
        ("proofs/dir", "not a regular file"),
        ("proofs", "not a regular file"),
        ("proofs/fifo", "not a regular file"),
    ];
    for (index, (proof_path, expected)) in cases.iter().enumerate() {
        let id = format!("p{index}");
        std::fs::write(
            d.join(format!("proof_artifacts/{id}.json")),
            artifact(&id, proof_path).to_string(),
        )
        .unwrap();
        // The fingerprint reads every file, which a FIFO would block: take
        // it without the FIFO, and make the FIFO only for the command.
        let before = f.fingerprint();
        let fifo = d.join("proofs/fifo");
        let made = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(made.as_ptr(), 0o600) }, 0);
        let started = Instant::now();
        let output = f.early_stop(&id);
        std::fs::remove_file(&fifo).unwrap();
        let message = stderr(&output);
        assert!(!output.status.success(), "{proof_path:?} banked a stop");
        assert!(
            message.contains("proof_path") && message.contains(expected),
            "{proof_path:?}: expected {expected:?} in {message}"
        );
        assert!(started.elapsed() < Duration::from_secs(10), "blocked");
        assert_eq!(f.fingerprint(), before, "{proof_path:?} changed the loop");
    }
    // The same artifact with a real file banks, so the refusals above were
    // about the path alone.
    std::fs::write(
        d.join("proof_artifacts/good.json"),
        artifact("good", "proofs/real.lean").to_string(),
    )
    .unwrap();
    assert!(f.early_stop("good").status.success());
    f.assert_valid();
}

#[test]
fn a_huge_proof_artifact_is_refused_without_reading_it_whole() {
    let f = setup();
    // Sparse: two gigabytes on paper, nothing on disk.
    let file = std::fs::File::create(f.dir.join("proof_artifacts/huge.json")).unwrap();
    file.set_len(2 * 1024 * 1024 * 1024).unwrap();
    let before = f.fingerprint_without("proof_artifacts/huge.json");
    let started = Instant::now();
    let output = f.early_stop("huge");
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("larger than the 65536-byte limit"),
        "{}",
        stderr(&output)
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(f.fingerprint_without("proof_artifacts/huge.json"), before);
}

impl Fixture {
    /// The fingerprint with one (huge) file left out of the byte walk but
    /// its size kept.
    fn fingerprint_without(&self, name: &str) -> Vec<(String, Vec<u8>)> {
        let path = self.dir.join(name);
        let size = std::fs::metadata(&path).unwrap().len();
        let moved = self.temp.path().join("aside");
        std::fs::rename(&path, &moved).unwrap();
        let mut out: Vec<_> = self.fingerprint().into_iter().collect();
        std::fs::rename(&moved, &path).unwrap();
        out.push((name.into(), size.to_string().into_bytes()));
        out
    }
}

#[test]
fn a_document_without_end_is_refused_quickly_naming_the_limit() {
    let f = setup();
    for args in [
        vec![
            "goal-acceptance",
            "prepare-objective",
            "--document",
            "/dev/zero",
            "--execute",
        ],
        vec![
            "goal-acceptance",
            "refine-outcome",
            "--document",
            "/dev/zero",
        ],
        vec!["refresh-state", "--goal-outcome-update-json", "/dev/zero"],
    ] {
        let started = Instant::now();
        f.refused_unchanged(&args, "larger than the 131072-byte limit");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{args:?} read for {:?}",
            started.elapsed()
        );
    }
    let big = json!({"objective": "x".repeat(1024 * 1024)}).to_string();
    let path = f.file("big.json", big.as_bytes());
    f.refused_unchanged(
        &[
            "goal-acceptance",
            "prepare-objective",
            "--document",
            &path,
            "--execute",
        ],
        "131072-byte limit",
    );
}

#[test]
fn an_oversized_field_is_refused_naming_its_limit() {
    let f = setup();
    // Under the document limit, over the objective's.
    let doc = json!({"objective": "x".repeat(100 * 1024)}).to_string();
    let path = f.file("long.json", doc.as_bytes());
    f.refused_unchanged(
        &[
            "goal-acceptance",
            "prepare-objective",
            "--document",
            &path,
            "--execute",
        ],
        "objective is 102400 bytes; the limit is 16384 bytes",
    );
    let long = "x".repeat(100 * 1024);
    f.refused_unchanged(
        &["todo", "add", "--title", &long],
        "title is 102400 bytes; the limit is 512 bytes",
    );
    f.refused_unchanged(
        &[
            "append-iteration",
            "--mode",
            "bounded-research",
            "--decision",
            "continue",
            "--objective",
            &long,
        ],
        "--objective is 102400 bytes; the limit is 16384 bytes",
    );
    // init refuses before it creates anything.
    let fresh = Fixture::new();
    let output = fresh
        .loopx()
        .args(["init", "--dir", fresh.d(), "--success-criteria", "x"])
        .args(["--goal", &long])
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(stderr(&output).contains("--goal is 102400 bytes; the limit is 16384"));
    assert!(
        !fresh.dir.join("loopx.sqlite").exists(),
        "a refused init left a database"
    );
}

#[test]
fn terminal_escapes_are_refused_at_the_owner_and_never_printed() {
    let f = setup();
    let esc = "pwned\u{1b}]0;title\u{7}\u{1b}[2J";
    f.refused_unchanged(
        &["todo", "add", "--title", esc],
        "title contains the control character U+001B",
    );
    f.refused_unchanged(
        &["todo", "complete", "t1", "--note", "bell\u{7}"],
        "--note contains the control character U+0007",
    );
    f.refused_unchanged(&["todo", "add", "--title", "two\nlines"], "it is one line");
    f.refused_unchanged(
        &[
            "append-iteration",
            "--mode",
            "bounded-research",
            "--decision",
            "continue",
            "--objective",
            "ok",
            "--output",
            esc,
        ],
        "--output contains the control character U+001B",
    );
    let objective = f.file(
        "objective.json",
        json!({"objective": format!("New {esc}")})
            .to_string()
            .as_bytes(),
    );
    f.refused_unchanged(
        &[
            "goal-acceptance",
            "prepare-objective",
            "--document",
            &objective,
            "--execute",
        ],
        "objective contains the control character U+001B",
    );
    let outcome = f.file(
        "outcome.json",
        json!({
            "outcome_id": "deck", "objective": "deck",
            "add_requirements": [{"id": "R1", "description": "c1 \u{9b}31m"}],
            "source": {"ref": "msg-1"}
        })
        .to_string()
        .as_bytes(),
    );
    f.refused_unchanged(
        &["goal-acceptance", "refine-outcome", "--document", &outcome],
        "add_requirements[0].description contains the control character U+009B",
    );
    // A multi-line requirement is fine: newline and tab are prose.
    let ok = f.file(
        "ok.json",
        json!({
            "outcome_id": "deck", "objective": "deck",
            "add_requirements": [{"id": "R1", "description": "first line\n\tsecond line"}],
            "source": {"ref": "msg-1"}
        })
        .to_string()
        .as_bytes(),
    );
    let output = f.run(&["goal-acceptance", "refine-outcome", "--document", &ok]);
    assert!(output.status.success(), "{}", stderr(&output));
    for read in [
        vec!["goal-acceptance", "inspect"],
        vec!["task-body"],
        vec!["todo", "list"],
    ] {
        let output = f.run(&read);
        assert!(output.status.success());
        assert!(!output.stdout.iter().any(|b| *b == 0x1b || *b == 0x07));
    }
}

#[test]
fn an_agent_id_must_be_an_id_and_never_stands_in_for_the_owner() {
    let f = setup();
    for bad in ["", " ", "../../x y\n", "a/b"] {
        f.refused_unchanged(&["todo", "claim", "t1", "--agent-id", bad], "agent id");
        // Reads refuse it too, rather than answering as the owner.
        let output = f.run(&["task-body", "--agent-id", bad]);
        assert!(!output.status.success(), "task-body as {bad:?} answered");
    }
    let hostile = f.file(
        "hostile.json",
        json!({
            "outcome_id": "deck", "objective": "deck",
            "responsible_agent": "../../x y\n",
            "source": {"ref": "msg-1"}
        })
        .to_string()
        .as_bytes(),
    );
    f.refused_unchanged(
        &["goal-acceptance", "refine-outcome", "--document", &hostile],
        "agent id \"../../x y\\n\" is not valid",
    );
    f.refused_unchanged(
        &["todo", "add", "--title", "x", "--id", "../t9"],
        "todo id \"../t9\" is not valid",
    );
    f.refused_unchanged(
        &["goal-acceptance", "register-agent", "--agent-id", ""],
        "agent id \"\" is not valid",
    );
    // A real agent id works, and it is that agent, not the owner.
    let output = f.run(&["todo", "claim", "t1", "--agent-id", "claude@host", "--json"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let list: Value = serde_json::from_slice(&f.run(&["todo", "list", "--json"]).stdout).unwrap();
    assert_eq!(list["todos"][0]["lease"]["holder"], "claude@host");
}

#[test]
fn a_write_to_an_unknown_goal_names_the_goal_asked_for() {
    let f = setup();
    f.refused_unchanged(
        &["todo", "add", "--title", "x", "--goal-id", "foo"],
        "this loop has no goal \"foo\"",
    );
    f.refused_unchanged(
        &["todo", "complete", "t1", "--goal-id", "foo"],
        "no goal \"foo\"",
    );
}
