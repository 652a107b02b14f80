//! Helpers shared by the integration tests: the real binary, real loop
//! directories, and a fingerprint of everything a loop directory holds.

#![allow(dead_code)]

use assert_cmd::Command;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub fn loopx_path() -> PathBuf {
    assert_cmd::cargo::cargo_bin("loopx")
}

/// `loopx` with a private registry, so tests never touch the user's.
pub fn loopx(registry: &Path) -> Command {
    let mut command = Command::new(loopx_path());
    command
        .env("LOOPX_REGISTRY_DIR", registry)
        // Fake provider scripts stand in for real ones (a test build only).
        .env("LOOPX_INJECTED_PROVIDERS", "1")
        .env_remove("LOOPX_DIR")
        .env_remove("AAS_AUTOLOOP_PANEL")
        .env_remove("AAS_AUTOLOOP_GOAL_PRIORITY")
        .env_remove("AUTOLOOP_DISABLE")
        .env_remove("AUTOLOOP_DRIVER")
        .env_remove("CLAUDE_PROJECT_DIR");
    command
}

/// `append-iteration` of claude's iteration staged by hand in an
/// enforce-mode loop (no driver dispatch is open, so the operator names
/// the executor); ready for the obligation, claim and cost flags.
pub const STAGE_BY_HAND: [&str; 11] = [
    "append-iteration",
    "--mode",
    "bounded-research",
    "--objective",
    "Check lemma B",
    "--decision",
    "continue",
    "--executor-provider",
    "claude",
    "--executor",
    "claude",
];

pub struct Fixture {
    pub temp: tempfile::TempDir,
    pub dir: PathBuf,
    pub registry: PathBuf,
}

impl Fixture {
    pub fn new() -> Self {
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path().join("run");
        let registry = temp.path().join("registry");
        Fixture {
            temp,
            dir,
            registry,
        }
    }

    pub fn loopx(&self) -> Command {
        loopx(&self.registry)
    }

    pub fn d(&self) -> &str {
        self.dir.to_str().unwrap()
    }

    /// The words of `init` on this loop, ready for more flags.
    pub fn init_words(&self) -> Vec<&str> {
        vec![
            "init",
            "--dir",
            self.d(),
            "--goal",
            "Prove lemma B",
            "--success-criteria",
            "checked proof",
        ]
    }

    /// `init` with `max_iterations` and the given extra flags; must succeed.
    pub fn init(&self, max_iterations: u64, extra: &[&str]) {
        self.loopx()
            .args(self.init_words())
            .args(["--max-iterations", &max_iterations.to_string()])
            .args(extra)
            .assert()
            .success();
    }

    /// The words of `append-iteration` on this loop with `decision`,
    /// ready for more flags.
    pub fn append_words<'a>(&'a self, decision: &'a str) -> Vec<&'a str> {
        vec![
            "append-iteration",
            "--dir",
            self.d(),
            "--mode",
            "bounded-research",
            "--objective",
            "Check evidence gaps",
            "--decision",
            decision,
        ]
    }

    /// `append-iteration` with a decision and extra flags; the assert is
    /// left to the caller.
    pub fn append(&self, decision: &str, extra: &[&str]) -> assert_cmd::assert::Assert {
        self.loopx()
            .args(self.append_words(decision))
            .args(extra)
            .assert()
    }

    /// `validate` must pass.
    pub fn assert_valid(&self) {
        self.loopx()
            .args(["validate", "--dir", self.d()])
            .assert()
            .success();
    }

    /// `validate` must fail: what it said, stdout then stderr.
    pub fn validate_refused(&self) -> String {
        let output = self
            .loopx()
            .args(["validate", "--dir", self.d()])
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&output.stdout).into_owned()
            + &String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "validate passed: {said}");
        said
    }

    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        let output = self.loopx().args(args).arg("--json").output().unwrap();
        serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
            panic!(
                "{args:?} printed no JSON ({e}): {}",
                String::from_utf8_lossy(&output.stderr)
            )
        })
    }

    /// `loopx <args> --dir D --json`: success, the JSON printed (`Null`
    /// when none), and stderr.
    pub fn run_in_dir(&self, args: &[&str]) -> (bool, serde_json::Value, String) {
        self.run_in_dir_with(&[], args)
    }

    /// [`Self::run_in_dir`] with global flags (`--store URL`) first.
    pub fn run_in_dir_with(
        &self,
        global: &[&str],
        args: &[&str],
    ) -> (bool, serde_json::Value, String) {
        let output = self
            .loopx()
            .args(global)
            .args(args)
            .args(["--dir", self.d(), "--json"])
            .output()
            .unwrap();
        (
            output.status.success(),
            serde_json::from_slice(&output.stdout).unwrap_or(serde_json::Value::Null),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }

    pub fn fingerprint(&self) -> BTreeMap<String, Vec<u8>> {
        fingerprint(&self.dir)
    }

    /// A project root for a driven turn, and a PATH whose first directory
    /// holds a fake provider CLI `name`: a shell script with `body`.
    pub fn fake_provider(&self, name: &str, body: &str) -> (PathBuf, String) {
        use std::os::unix::fs::PermissionsExt;
        let root = self.temp.path().join("project");
        let bin = self.temp.path().join("bin");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&bin).unwrap();
        let script = bin.join(name);
        std::fs::write(&script, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
        (root, path)
    }

    /// A goal grown large: `todos` open todos added through the bulk path
    /// (one `todo add --from-file`), then `outcomes` outcomes, each with
    /// `requirements` unreviewed requirements and no linked work, so each
    /// is an open gap.
    pub fn large_goal(&self, todos: usize, outcomes: usize, requirements: usize) {
        let plan = self.temp.path().join("large-plan.jsonl");
        let lines: String = (1..=todos)
            .map(|i| format!("{{\"title\": \"step {i} of a large imported plan\"}}\n"))
            .collect();
        std::fs::write(&plan, lines).unwrap();
        let (ok, _, stderr) =
            self.run_in_dir(&["todo", "add", "--from-file", plan.to_str().unwrap()]);
        assert!(ok, "the bulk add failed: {stderr}");
        for o in 1..=outcomes {
            let update = serde_json::json!({
                "outcome_id": format!("outcome-{o}"),
                "objective": format!("Outcome {o} of the large goal"),
                "add_requirements": (1..=requirements)
                    .map(|r| serde_json::json!({"id": format!("R{r}"), "description": format!("requirement {r} of outcome {o}")}))
                    .collect::<Vec<_>>(),
                "source": {"ref": format!("msg-{o}"), "summary": "the user asked for it"}
            });
            let document = self.json_file(&format!("outcome-{o}.json"), &update);
            let (ok, _, stderr) =
                self.run_in_dir(&["goal-acceptance", "refine-outcome", "--document", &document]);
            assert!(ok, "refining outcome {o} failed: {stderr}");
        }
    }

    /// Run `args` (as [`Self::run_in_dir`]), which must be refused and
    /// leave the loop directory byte-for-byte unchanged: the JSON printed
    /// and stderr.
    pub fn refused_in_dir(&self, args: &[&str]) -> (serde_json::Value, String) {
        let before = self.fingerprint();
        let (ok, json, stderr) = self.run_in_dir(args);
        assert!(!ok, "{args:?} was accepted: {json}");
        assert_eq!(
            self.fingerprint(),
            before,
            "refused {args:?} changed the loop directory ({stderr})"
        );
        (json, stderr)
    }

    /// `loopx goal-focus <args> --dir D --json`: success, body, stderr.
    pub fn focus(&self, args: &[&str]) -> (bool, serde_json::Value, String) {
        self.run_in_dir(&[&["goal-focus"], args].concat())
    }

    /// The snapshot of `stream` as the loop's SQLite file stores it, read
    /// around loopx (what no command prints whole).
    pub fn stored_snapshot(&self, stream: &str) -> serde_json::Value {
        let conn = rusqlite::Connection::open_with_flags(
            self.dir.join("loopx.sqlite"),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .unwrap();
        let state: String = conn
            .query_row(
                "SELECT state FROM snapshots WHERE stream = ?1",
                [stream],
                |row| row.get(0),
            )
            .unwrap();
        serde_json::from_str(&state).unwrap()
    }

    pub fn focus_ok(&self, args: &[&str]) -> serde_json::Value {
        let (ok, json, stderr) = self.focus(args);
        assert!(ok, "goal-focus {args:?} failed: {stderr}");
        json
    }

    /// Give the loop a goal contract with open obligations o1 (a bridge)
    /// and o2 (the terminal one, after o1).
    pub fn with_obligations(&self) {
        let contract = self.json_file(
            "contract.json",
            &serde_json::json!({"goal": "prove B", "obligations": [
                {"obligation_id": "o1", "description": "lemma B", "kind": "bridge"},
                {"obligation_id": "o2", "description": "theorem", "kind": "terminal", "depends_on": ["o1"]}
            ]}),
        );
        self.focus_ok(&["revise", "--contract", &contract]);
    }

    /// Give an enforce-mode loop a reviewed, active direction, so that the
    /// driver's pre-dispatch gate opens: a registry where `induction`
    /// dominates, a replan proposing it, and codex's endorsement for
    /// claude's turns.
    pub fn reviewed_direction(&self) {
        self.reviewed_direction_with(serde_json::Value::Null);
    }

    /// [`Fixture::reviewed_direction`], the selected approach carrying
    /// `compute_policy` (none when null).
    pub fn reviewed_direction_with(&self, compute_policy: serde_json::Value) {
        use serde_json::json;
        let approach = |id: &str, low: f64, high: f64| json!({"approach_id": id, "estimate": {"low": low, "high": high}});
        let mut induction = approach("induction", 0.6, 0.9);
        if !compute_policy.is_null() {
            induction["compute_policy"] = compute_policy;
        }
        let registry = self.json_file(
            "direction-registry.json",
            &json!({"campaigns": [
                {"campaign_id": "direct", "approaches": [induction]},
                {"campaign_id": "search", "approaches": [approach("weak", 0.0, 0.1)]}
            ]}),
        );
        self.focus_ok(&["revise", "--registry", &registry]);
        self.focus_ok(&["replan"]);
        let bind =
            self.focus_ok(&["strategy-brief", "--executor", "claude"])["brief"]["bind"].clone();
        let advice = self.json_file(
            "direction-advice.json",
            &json!({
                "schema": "strategy_advice.v1",
                "reviewer": {"provider": "codex"},
                "reviewed": bind,
                "verdict": "endorse",
                "rationale": "induction's lower bound beats every other upper bound"
            }),
        );
        let reviewed =
            self.focus_ok(&["strategy-review", "--file", &advice, "--executor", "claude"]);
        assert_eq!(reviewed["plan"]["state"], "active", "{reviewed}");
    }

    /// Leave a driver dispatch of `provider` open, as a driver killed
    /// right after committing its intent does (its agent never started):
    /// a fake `provider` on PATH, `loopx drive` SIGKILLed at
    /// `drive.after_intent`. The open dispatch's id. An enforce-mode loop
    /// without an active direction gets [`Fixture::reviewed_direction`]
    /// first: the driver dispatches nothing without one.
    pub fn open_dispatch(&self, provider: &str) -> String {
        use std::io::{BufRead, BufReader};
        let focus = self.focus_ok(&["status"]);
        if focus["enforcement_mode"] == "enforce" && focus["current_plan"]["state"] != "active" {
            self.reviewed_direction();
        }
        use std::os::unix::fs::PermissionsExt;
        let bin = self.temp.path().join("bin");
        let root = self.temp.path().join("project");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&root).unwrap();
        let agent = bin.join(provider);
        std::fs::write(&agent, "#!/bin/sh\ntrue\n").unwrap();
        std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
        require_failpoints();
        let mut child = std::process::Command::new(loopx_path())
            .args(["drive", "--dir", self.d(), "--root", root.to_str().unwrap()])
            .args(["--provider", provider])
            .env("PATH", path)
            .env("LOOPX_REGISTRY_DIR", &self.registry)
            .env("LOOPX_FAILPOINTS", "drive.after_intent")
            .env("LOOPX_INJECTED_PROVIDERS", "1")
            .env_remove("LOOPX_DIR")
            .env_remove("AUTOLOOP_DRIVER")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let reached = BufReader::new(child.stderr.take().unwrap())
            .lines()
            .any(|line| line.unwrap().contains("failpoint: drive.after_intent"));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        assert!(reached, "the driver never committed its intent");
        let recover = self.json(&["recover", "--dir", self.d()]);
        recover["open"]["dispatch_id"]
            .as_str()
            .unwrap_or_else(|| panic!("no open dispatch: {recover}"))
            .to_owned()
    }

    /// Write `value` as a JSON file outside the loop directory; its path.
    pub fn json_file(&self, name: &str, value: &serde_json::Value) -> String {
        let path = self.temp.path().join(name);
        std::fs::write(&path, value.to_string()).unwrap();
        path.display().to_string()
    }

    /// Write a valid proof artifact `id` (and its proof file).
    pub fn write_proof(&self, id: &str) {
        std::fs::create_dir_all(self.dir.join("proofs")).unwrap();
        std::fs::write(
            self.dir.join("proofs/lemma.lean"),
            "theorem b : True := trivial\n",
        )
        .unwrap();
        std::fs::write(
            self.dir.join(format!("proof_artifacts/{id}.json")),
            artifact(id, "proofs/lemma.lean").to_string(),
        )
        .unwrap();
    }
}

/// The body of an agent that claims success every turn with a valid
/// proof artifact (evidence `p`), noting each turn in `turns` and creating
/// `file` in its working directory from its second turn on: what a host
/// check (a success check, a configured check) looks for.
pub fn claiming_agent(turns: &Path, file: &str) -> String {
    format!(
        r#"echo turn >> {turns}
[ "$(wc -l < {turns})" -ge 2 ] && touch {file}
mkdir -p "$LOOPX_DIR/proofs" && echo ok > "$LOOPX_DIR/proofs/p.txt"
cat > "$LOOPX_DIR/proof_artifacts/p.json" <<'JSON'
{{"schema_version":"1.0","id":"p","artifact_type":"external-verifier","machine_checkable":true,"target":"t","proof_path":"proofs/p.txt","checker":{{"name":"c","status":"passed"}}}}
JSON
loopx append-iteration --mode bounded-research --objective claim --decision stop --stop-reason success --evidence-id p >/dev/null"#,
        turns = turns.display()
    )
}

pub fn artifact(id: &str, proof_path: &str) -> serde_json::Value {
    serde_json::json!({
        "schema_version": "1.0", "id": id, "artifact_type": "lean", "machine_checkable": true,
        "target": "lemma B", "proof_path": proof_path,
        "checker": {"name": "lean", "status": "passed"}
    })
}

/// Every file's bytes under `dir`, plus the logical content of the
/// database. SQLite's `-wal`/`-shm` companions are left out as files (a
/// read-only reader may create the shared-memory index), but anything
/// committed into them shows up in the logical dump.
pub fn fingerprint(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    let db = dir.join("loopx.sqlite");
    if let Ok(conn) =
        rusqlite::Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
    {
        let mut dump = Vec::new();
        for table in ["journal", "snapshots"] {
            if let Ok(mut statement) = conn.prepare(&format!("SELECT * FROM {table} ORDER BY 1, 2"))
            {
                let columns = statement.column_count();
                let mut rows = statement.query([]).unwrap();
                while let Ok(Some(row)) = rows.next() {
                    for i in 0..columns {
                        let value: rusqlite::types::Value = row.get(i).unwrap();
                        dump.extend_from_slice(format!("{value:?}|").as_bytes());
                    }
                    dump.push(b'\n');
                }
            }
        }
        out.insert("<database rows>".into(), dump);
    }
    out
}

fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = path.strip_prefix(root).unwrap().display().to_string();
        if name.ends_with("-wal") || name.ends_with("-shm") {
            continue;
        }
        let meta = path.symlink_metadata().unwrap();
        if meta.is_dir() {
            out.insert(format!("{name}/"), Vec::new());
            walk(root, &path, out);
        } else if meta.file_type().is_symlink() {
            out.insert(
                format!("{name} ->"),
                std::fs::read_link(&path)
                    .unwrap()
                    .display()
                    .to_string()
                    .into_bytes(),
            );
        } else {
            out.insert(name, std::fs::read(&path).unwrap());
        }
    }
}

/// Run `git -C root args` as a fixed test identity; must succeed. Its stdout.
pub fn git(root: &Path, args: &[&str]) -> String {
    let output = std::process::Command::new("git")
        .arg("-C")
        .arg(root)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The iteration numbers the journal holds, in order.
pub fn iteration_numbers(dir: &Path) -> Vec<u64> {
    journal_events(dir, "ledger.iteration_appended")
        .iter()
        .map(|event| event["record"]["iteration"].as_u64().unwrap())
        .collect()
}

/// Every ledger journal event of `kind`, in revision order.
pub fn journal_events(dir: &Path, kind: &str) -> Vec<serde_json::Value> {
    journal_texts(dir, kind)
        .iter()
        .map(|event| serde_json::from_str(event).unwrap())
        .collect()
}

/// The journal's events of `kind`, in order, as the text it stores.
pub fn journal_texts(dir: &Path, kind: &str) -> Vec<String> {
    let conn = rusqlite::Connection::open_with_flags(
        dir.join("loopx.sqlite"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let mut statement = conn
        .prepare("SELECT event FROM journal WHERE kind = ?1 ORDER BY revision")
        .unwrap();
    let rows = statement
        .query_map([kind], |row| row.get::<_, String>(0))
        .unwrap();
    rows.map(Result::unwrap).collect()
}

/// A prerequisite this machine lacks (a tmpfs mount, a second user,
/// openssl, the MCP inspector): the test says it skipped, and returns;
/// but where `LOOPX_TESTS_REQUIRED=1` (CI, which installs every one of
/// them) it fails by name, so a missing install step cannot pass quietly.
pub fn skipped_without(prerequisite: &str) {
    if std::env::var("LOOPX_TESTS_REQUIRED").as_deref() == Ok("1") {
        panic!("LOOPX_TESTS_REQUIRED=1 but {prerequisite}");
    }
    eprintln!("skipped: {prerequisite}");
}

/// Every row the loop's store keeps (journal events and receipts, and
/// snapshots, of every stream), as one text: where a secret that reached
/// the store would be found.
pub fn stored_text(dir: &Path) -> String {
    let conn = rusqlite::Connection::open_with_flags(
        dir.join("loopx.sqlite"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let text = |sql: &str| -> String {
        conn.query_row(sql, [], |row| row.get::<_, Option<String>>(0))
            .unwrap()
            .unwrap_or_default()
    };
    text("SELECT group_concat(event || receipt, char(10)) FROM journal")
        + &text("SELECT group_concat(state, char(10)) FROM snapshots")
}

/// Fail the test by name when the binary under test cannot pause at a
/// failpoint: they are compiled in only with the `failpoints` feature, and
/// a crash test without them would wait for a pause that never comes.
pub fn require_failpoints() {
    #[cfg(not(feature = "failpoints"))]
    panic!("this test kills loopx at a failpoint, which only a build with the `failpoints` feature has: run `cargo test --workspace --features loopx/failpoints` (the README's test command)");
}

/// Start `command` held at the failpoint `hold` (`LOOPX_HOLD`), wait until
/// it says so, run `between` (another writer acts), then let it go on: its
/// output. To prove what becomes of a commit prepared before that act.
pub fn held_at(
    mut command: std::process::Command,
    hold: &str,
    between: impl FnOnce(),
) -> std::process::Output {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;
    require_failpoints();
    let mut child = command
        .env("LOOPX_HOLD", hold)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), format!("held: {hold}"));
    between();
    child.stdin.take().unwrap().write_all(b"\n").unwrap();
    let mut output = child.wait_with_output().unwrap();
    std::io::Read::read_to_end(&mut stderr, &mut output.stderr).unwrap();
    output
}

/// Start `command` with `failpoint` armed, wait until it pauses there (it
/// says so on stderr, after whatever else it printed), then SIGKILL it: a
/// crash at exactly that boundary.
pub fn kill_at_failpoint(mut command: std::process::Command, failpoint: &str) {
    use std::io::{BufRead, BufReader};
    require_failpoints();
    let mut child = command
        .env("LOOPX_FAILPOINTS", failpoint)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let said = format!("failpoint: {failpoint}");
    let reached = BufReader::new(child.stderr.take().unwrap())
        .lines()
        .any(|line| line.is_ok_and(|line| line.trim() == said));
    assert!(reached, "the command never reached {failpoint}");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
}

/// A `loopx serve` a test started, stopped when dropped.
pub struct Server {
    pub child: std::process::Child,
    pub port: u16,
    pub token: String,
    /// The start line, parsed (`--json`).
    pub start: serde_json::Value,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `loopx serve <which> --addr 127.0.0.1:0 <extra>` (`which`: `--dir D`
/// or `--all`) with the fixture's private registry, its stdout piped.
pub fn spawn_serve(f: &Fixture, which: &[&str], extra: &[&str]) -> std::process::Child {
    use std::process::Stdio;
    std::process::Command::new(loopx_path())
        .arg("serve")
        .args(which)
        .args(["--addr", "127.0.0.1:0"])
        .args(extra)
        .env("LOOPX_REGISTRY_DIR", &f.registry)
        .env_remove("LOOPX_DIR")
        .env_remove("LOOPX_SERVE_TOKEN")
        // No `.loopx` there, so no loop is served by default.
        .current_dir(f.temp.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// The first line `child` printed.
pub fn first_line(child: &mut std::process::Child) -> String {
    use std::io::{BufRead, BufReader};
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    line
}

/// What a server answered: the status, the head and the body.
pub struct Reply {
    pub status: u16,
    pub head: String,
    pub body: String,
}

impl Reply {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    /// The `name=value` part of the Set-Cookie header, if any.
    pub fn set_cookie(&self) -> Option<String> {
        self.head
            .lines()
            .find_map(|l| l.strip_prefix("set-cookie: "))
            .map(str::to_owned)
    }
}

impl Server {
    /// `loopx serve --dir D --json` on the fixture's loop.
    pub fn start(f: &Fixture) -> Self {
        Self::started(spawn_serve(f, &["--dir", f.d()], &["--json"]))
    }

    /// A server started with `--json`; its token read from the file the
    /// start line names.
    pub fn started(mut child: std::process::Child) -> Self {
        let line = first_line(&mut child);
        let start: serde_json::Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"));
        let port = start["port"].as_u64().unwrap() as u16;
        let token = std::fs::read_to_string(start["token_file"].as_str().unwrap())
            .unwrap()
            .trim()
            .to_owned();
        Server {
            child,
            port,
            token,
            start,
        }
    }

    /// One HTTP/1.1 request; `headers` are extra header lines.
    pub fn exchange(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Reply {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\nContent-Length: {}\r\n",
            self.port,
            body.len()
        );
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        stream
            .write_all(format!("{head}\r\n{body}").as_bytes())
            .unwrap();
        let mut raw = String::new();
        stream.read_to_string(&mut raw).unwrap();
        let status = raw
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let (head, body) = raw
            .split_once("\r\n\r\n")
            .map(|(h, b)| (h.to_owned(), b.to_owned()))
            .unwrap_or_default();
        Reply { status, head, body }
    }

    /// One request as a script holding the token makes it (with this
    /// origin, for a write, and a JSON body).
    pub fn send(&self, method: &str, path: &str, body: &str) -> Reply {
        let origin = format!("http://127.0.0.1:{}", self.port);
        self.exchange(
            method,
            path,
            &[
                ("X-Loopx-Token", &self.token),
                ("Origin", &origin),
                ("Content-Type", "application/json"),
            ],
            body,
        )
    }

    /// [`send`](Self::send): the status and the JSON body.
    pub fn request(&self, method: &str, path: &str, body: &str) -> (u16, serde_json::Value) {
        let reply = self.send(method, path, body);
        (reply.status, reply.json())
    }
}

/// Whether this machine can contain a process as the trusted-local tests
/// expect (root, bubblewrap, the cgroup v1 memory, pids and cpu
/// hierarchies); says it skipped (or, required, fails) when it cannot.
pub fn containable() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let bwrap = std::process::Command::new("bwrap")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let v1 = ["memory", "pids", "cpu"].iter().all(|c| {
        Path::new("/sys/fs/cgroup")
            .join(c)
            .join("cgroup.procs")
            .exists()
    });
    if root && bwrap && v1 {
        return true;
    }
    skipped_without(
        "containment needs root, bubblewrap and the cgroup v1 memory, pids and cpu hierarchies",
    );
    false
}

/// The pins `loopx attest` printed on `stdout`, as (variable, value).
pub fn attested_pins(stdout: &[u8]) -> Vec<(String, String)> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|line| line.strip_prefix("export "))
        .filter_map(|line| line.split_once('='))
        .map(|(name, value)| (name.to_owned(), value.trim_matches('\'').to_owned()))
        .collect()
}
