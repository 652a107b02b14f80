//! `drive --workers N` and the merge queue through the real binary: real
//! git repositories, real worker processes (fake agent scripts), real
//! merges onto the target branch.

mod common;
#[path = "../../loopx-store/tests/support/pg_server.rs"]
mod pg_server;
#[path = "../../loopx-store/tests/support/pg_tls.rs"]
mod pg_tls;

use common::{git, Fixture};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A loop beside a git project (one commit, the loop directory ignored)
/// with `todos` todos `t1`..`tN`.
struct Project {
    f: Fixture,
    root: PathBuf,
}

impl Project {
    fn new(todos: usize) -> Project {
        let f = Fixture::new();
        f.init(100, &[]);
        let root = f.temp.path().join("project");
        std::fs::create_dir_all(&root).unwrap();
        git(&root, &["init", "-q", "-b", "main"]);
        std::fs::write(root.join("README"), "project\n").unwrap();
        git(&root, &["add", "-A"]);
        git(&root, &["commit", "-qm", "first"]);
        for n in 1..=todos {
            let (ok, _, stderr) = f.run_in_dir(&[
                "todo",
                "add",
                &format!("work item {n}"),
                "--id",
                &format!("t{n}"),
            ]);
            assert!(ok, "{stderr}");
        }
        Project { f, root }
    }

    /// An agent script: `body` runs in the worker's worktree with
    /// LOOPX_TODO_ID and LOOPX_AGENT_ID set; every start is noted in
    /// `starts` (`<todo> <agent>`).
    fn agent(&self, body: &str) -> String {
        let path = self.f.temp.path().join("agent.sh");
        let starts = self.starts_file();
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\ncat >/dev/null\necho \"$LOOPX_TODO_ID $LOOPX_AGENT_ID\" >> '{}'\n{body}\n",
                starts.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path.display().to_string()
    }

    fn starts_file(&self) -> PathBuf {
        self.f.temp.path().join("starts")
    }

    fn starts(&self) -> Vec<String> {
        std::fs::read_to_string(self.starts_file())
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn drive(&self, agent: &str, extra: &[&str]) -> Command {
        let mut command = Command::new(common::loopx_path());
        command
            .env("LOOPX_REGISTRY_DIR", &self.f.registry)
            .args(["drive", "--dir", self.f.d(), "--cmd", agent, "--root"])
            .arg(&self.root)
            .args(extra);
        command
    }

    /// [`Project::drive`] to its end, which must be a success: its stderr.
    fn drive_ok(&self, agent: &str, extra: &[&str]) -> String {
        let output = self.drive(agent, extra).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(output.status.success(), "{stderr}");
        stderr
    }

    /// How many times `main` says todo `todo` landed.
    fn landings(&self, todo: &str) -> usize {
        git(&self.root, &["log", "--oneline", "main"])
            .lines()
            .filter(|l| l.contains(&format!("land todo {todo}")))
            .count()
    }

    fn queue(&self) -> Value {
        self.f.json(&["queue", "list", "--dir", self.f.d()])
    }

    fn entry(&self, todo: &str) -> Value {
        self.queue()["entries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["todo_id"] == todo)
            .cloned()
            .unwrap_or(Value::Null)
    }

    fn todo_status(&self, todo: &str) -> String {
        let list = self.f.json(&["todo", "list", "--dir", self.f.d()]);
        (list["todos"].as_array().unwrap().iter())
            .find(|t| t["id"] == todo)
            .map(|t| t["status"].as_str().unwrap().to_owned())
            .unwrap()
    }

    fn main_tip(&self) -> String {
        git(&self.root, &["rev-parse", "main"]).trim().to_owned()
    }

    fn loopx_branches(&self) -> Vec<String> {
        git(
            &self.root,
            &[
                "for-each-ref",
                "--format=%(refname:short)",
                "refs/heads/loopx/",
            ],
        )
        .lines()
        .map(str::to_owned)
        .collect()
    }
}

#[test]
fn four_workers_land_eight_independent_todos_and_no_todo_is_worked_twice() {
    let p = Project::new(8);
    let agent = p.agent("sleep 0.3\necho \"by $LOOPX_AGENT_ID\" > \"out-$LOOPX_TODO_ID.txt\"");
    p.drive_ok(&agent, &["--workers", "4"]);
    let starts = p.starts();
    assert_eq!(starts.len(), 8, "one turn per todo: {starts:?}");
    let mut todos: Vec<&str> = starts
        .iter()
        .map(|s| s.split(' ').next().unwrap())
        .collect();
    todos.sort();
    todos.dedup();
    assert_eq!(todos.len(), 8, "no todo worked twice: {starts:?}");
    let workers: std::collections::BTreeSet<&str> = starts
        .iter()
        .map(|s| s.split(' ').nth(1).unwrap())
        .collect();
    assert!(workers.len() >= 2, "the work was shared: {workers:?}");
    let queue = p.queue();
    assert_eq!(queue["counts"]["landed"], 8, "{queue}");
    for n in 1..=8 {
        let todo = format!("t{n}");
        let file = git(&p.root, &["show", &format!("main:out-{todo}.txt")]);
        assert!(file.starts_with("by agent.w"), "{file}");
        assert_eq!(p.todo_status(&todo), "done");
        let entry = p.entry(&todo);
        assert_eq!(entry["state"], "landed");
        let commit = entry["merge_commit"].as_str().unwrap();
        git(&p.root, &["merge-base", "--is-ancestor", commit, "main"]);
    }
    // The project checkout followed the landings; every worktree and
    // branch of a landed todo is gone.
    assert!(p.root.join("out-t8.txt").is_file());
    assert!(p.loopx_branches().is_empty(), "{:?}", p.loopx_branches());
    let worktrees = git(&p.root, &["worktree", "list", "--porcelain"]);
    assert_eq!(
        worktrees.matches("worktree ").count(),
        2,
        "main and the queue's: {worktrees}"
    );
}

#[test]
fn of_two_conflicting_changes_one_lands_and_the_other_returns_to_the_frontier_with_the_conflict_named(
) {
    let p = Project::new(2);
    let agent = p.agent("sleep 0.5\necho \"$LOOPX_TODO_ID wrote this\" > shared.txt");
    p.drive_ok(&agent, &["--workers", "2", "--max-iterations", "2"]);
    let entries = [p.entry("t1"), p.entry("t2")];
    let landed: Vec<&Value> = entries.iter().filter(|e| e["state"] == "landed").collect();
    let undone: Vec<&Value> = entries
        .iter()
        .filter(|e| e["state"] == "needs-review")
        .collect();
    assert_eq!((landed.len(), undone.len()), (1, 1), "{entries:?}");
    let undone = undone[0];
    let reason = undone["reason"].as_str().unwrap();
    assert_eq!(undone["rejection"], "conflict");
    assert!(
        reason.contains("conflict") && reason.contains("shared.txt"),
        "{reason}"
    );
    let loser = undone["todo_id"].as_str().unwrap();
    assert_eq!(p.todo_status(loser), "open", "back on the frontier");
    let winner = landed[0]["todo_id"].as_str().unwrap();
    assert_eq!(
        git(&p.root, &["show", "main:shared.txt"]).trim(),
        format!("{winner} wrote this")
    );
    // Its worktree and branch are kept for the next attempt.
    let worktree = Path::new(p.f.d()).join(undone["worktree"].as_str().unwrap());
    assert_eq!(
        std::fs::read_to_string(worktree.join("shared.txt"))
            .unwrap()
            .trim(),
        format!("{loser} wrote this")
    );
    assert_eq!(
        p.loopx_branches(),
        vec![undone["branch"].as_str().unwrap().to_owned()]
    );
    let note = p.f.json(&["todo", "list", "--dir", p.f.d()]);
    assert!(note.to_string().contains("undid its merge"), "{note}");
}

#[test]
fn a_failing_check_on_the_merged_result_undoes_the_merge_and_retry_and_discard_are_the_operators() {
    let p = Project::new(1);
    // The goal's check: no file named `broken` in the merged result.
    let update = json!({
        "outcome_id": "ship",
        "objective": "Ship it",
        "add_requirements": [{"id": "clean", "description": "nothing broken"}],
        "link_todos": ["t1"],
        "source": {"ref": "msg-1", "summary": "the user asked"}
    });
    let document = p.f.json_file("outcome.json", &update);
    let (ok, _, stderr) =
        p.f.run_in_dir(&["goal-acceptance", "refine-outcome", "--document", &document]);
    assert!(ok, "{stderr}");
    let checks = p.f.json_file(
        "checks.json",
        &json!({"outcome_id": "ship", "criteria": [
            {"id": "clean", "validation_argv": ["sh", "-c", "test ! -e broken"]}
        ]}),
    );
    let (ok, proposal, stderr) =
        p.f.run_in_dir(&["goal-acceptance", "prepare-checks", "--file", &checks]);
    assert!(ok, "{stderr}");
    let basis = proposal["basis"].as_str().unwrap();
    let (ok, _, stderr) = p.f.run_in_dir(&[
        "goal-acceptance",
        "apply-checks",
        "--file",
        &checks,
        "--basis",
        basis,
    ]);
    assert!(ok, "{stderr}");
    let before = p.main_tip();
    let agent = p.agent("echo oops > broken");
    p.drive_ok(&agent, &["--workers", "2", "--max-iterations", "1"]);
    assert_eq!(
        p.main_tip(),
        before,
        "the merge was undone: main did not move"
    );
    let entry = p.entry("t1");
    assert_eq!(entry["state"], "needs-review", "{entry}");
    assert_eq!(entry["rejection"], "check_failed");
    assert!(
        entry["reason"].as_str().unwrap().contains("clean of ship"),
        "{entry}"
    );
    assert_eq!(p.todo_status("t1"), "open");

    // Retry puts it back in line as it is; a bad id changes nothing.
    let fingerprint = common::fingerprint(&p.f.dir);
    let (_, stderr) = p.f.refused_in_dir(&["queue", "retry", "nope"]);
    assert!(stderr.contains("nope"), "{stderr}");
    assert_eq!(
        common::fingerprint(&p.f.dir),
        fingerprint,
        "a refusal writes nothing"
    );
    let (ok, receipt, stderr) = p.f.run_in_dir(&["queue", "retry", "t1"]);
    assert!(ok, "{stderr}");
    assert_eq!(receipt["state"], "queued");
    // Discarding removes its worktree and branch; the todo stays open.
    let worktree = Path::new(p.f.d()).join(entry["worktree"].as_str().unwrap());
    assert!(worktree.join("broken").is_file());
    let (ok, receipt, stderr) =
        p.f.run_in_dir(&["queue", "discard", "t1", "--reason", "wrong approach"]);
    assert!(ok, "{stderr}");
    assert_eq!(receipt["state"], "discarded");
    assert!(!worktree.exists());
    assert!(p.loopx_branches().is_empty());
    assert_eq!(p.todo_status("t1"), "open");
    assert_eq!(p.queue()["counts"]["discarded"], 1);
}

#[test]
fn a_worker_killed_mid_turn_is_taken_over_from_its_worktree_after_its_lease_lapses() {
    let p = Project::new(1);
    let marker = p.f.temp.path().join("first-turn");
    // The first turn leaves work in progress and hangs; the next finishes
    // what it finds.
    let agent = p.agent(&format!(
        "if [ ! -e '{m}' ]; then touch '{m}'; echo half > work.txt; exec sleep 120; fi\necho \"$(cat work.txt) and done\" > work.txt",
        m = marker.display()
    ));
    let mut first = p
        .drive(&agent, &["--workers", "2", "--iteration-timeout", "4"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !marker.exists() {
        assert!(Instant::now() < deadline, "the first turn never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    first.kill().unwrap();
    first.wait().unwrap();
    let held_by = p.starts()[0].split(' ').nth(1).unwrap().to_owned();

    // Another driver (its workers other agents) waits out the lease, ends
    // the agent the killed run left, and takes the todo over.
    let started = Instant::now();
    let output = p
        .drive(
            &agent,
            &[
                "--workers",
                "2",
                "--iteration-timeout",
                "4",
                "--agent-id",
                "other",
            ],
        )
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("left open"),
        "the killed turn was settled: {stderr}"
    );
    assert!(started.elapsed() < Duration::from_secs(60));
    let starts = p.starts();
    assert_eq!(starts.len(), 2, "{starts:?}");
    assert!(
        starts[1].starts_with("t1 other.w"),
        "taken over by another worker: {starts:?}"
    );
    assert_ne!(held_by, starts[1].split(' ').nth(1).unwrap());
    assert_eq!(
        git(&p.root, &["show", "main:work.txt"]).trim(),
        "half and done",
        "continued from what the killed turn left"
    );
    assert_eq!(p.todo_status("t1"), "done");
    let events = common::journal_events(&p.f.dir, "driver.settled");
    let interrupted = events
        .iter()
        .filter(|e| e.to_string().contains("interrupted"))
        .count();
    assert_eq!(interrupted, 1, "the killed turn settled once: {events:?}");
    // Nothing of the killed run is left running.
    let sleeping = Command::new("pgrep")
        .args(["-f", "sleep 120"])
        .output()
        .unwrap();
    assert!(sleeping.stdout.is_empty(), "the left agent was ended");
}

#[test]
fn workers_are_refused_before_anything_starts_without_a_commit_to_branch_from() {
    let p = Project::new(1);
    let bare = p.f.temp.path().join("empty");
    std::fs::create_dir_all(&bare).unwrap();
    git(&bare, &["init", "-q", "-b", "main"]);
    let agent = p.agent("true");
    let fingerprint = common::fingerprint(&p.f.dir);
    let output =
        p.f.loopx()
            .args([
                "drive",
                "--dir",
                p.f.d(),
                "--cmd",
                &agent,
                "--workers",
                "2",
                "--root",
            ])
            .arg(&bare)
            .output()
            .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("at least one commit"), "{stderr}");
    assert!(p.starts().is_empty(), "no agent ran");
    assert_eq!(
        common::fingerprint(&p.f.dir),
        fingerprint,
        "nothing was written"
    );
}

#[test]
fn two_hosts_with_their_own_checkouts_share_one_goal_through_postgres_over_tls_and_a_bare_remote() {
    let Some((url, _admin, certs)) = pg_tls::database("localhost") else {
        common::skipped_without("no PostgreSQL server binaries");
        return;
    };
    let store = format!("{url}?sslmode=verify-full&sslrootcert={}", certs.ca());
    let temp = tempfile::tempdir().unwrap();
    let at = |name: &str| temp.path().join(name);
    // The shared remote, and each host's own clone of it.
    git(
        temp.path(),
        &["init", "-q", "--bare", "-b", "main", "remote.git"],
    );
    let seed = at("seed");
    std::fs::create_dir_all(&seed).unwrap();
    git(&seed, &["init", "-q", "-b", "main"]);
    std::fs::write(seed.join("README"), "shared\n").unwrap();
    git(&seed, &["add", "-A"]);
    git(&seed, &["commit", "-qm", "first"]);
    let remote = at("remote.git").display().to_string();
    git(&seed, &["push", "-q", &remote, "main"]);
    for host in ["host-a", "host-b"] {
        git(temp.path(), &["clone", "-q", &remote, host]);
        std::fs::create_dir_all(at(&format!("{host}-loop"))).unwrap();
    }
    let registry = at("registry");
    // `--dir` goes after the command's name.
    let ok = |host: &str, args: &[&str]| {
        let mut command = Command::new(common::loopx_path());
        let output = command
            .env("LOOPX_REGISTRY_DIR", &registry)
            .env("LOOPX_STORE", &store)
            .args(args)
            .arg("--dir")
            .arg(at(&format!("{host}-loop")))
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        output
    };
    ok(
        "host-a",
        &[
            "init",
            "--goal",
            "shared goal",
            "--success-criteria",
            "files",
            "--max-iterations",
            "100",
        ],
    );
    for n in 1..=6 {
        ok(
            "host-a",
            &[
                "todo",
                "add",
                &format!("item {n}"),
                "--id",
                &format!("t{n}"),
            ],
        );
    }
    let starts = at("starts");
    let agent = at("agent.sh");
    std::fs::write(
        &agent,
        format!(
            "#!/bin/sh\ncat >/dev/null\necho \"$LOOPX_TODO_ID $LOOPX_AGENT_ID\" >> '{}'\nsleep 1\necho \"$LOOPX_AGENT_ID\" > \"out-$LOOPX_TODO_ID.txt\"\n",
            starts.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    let drivers: Vec<_> = ["host-a", "host-b"]
        .iter()
        .map(|host| {
            let mut command = Command::new(common::loopx_path());
            command
                .env("LOOPX_REGISTRY_DIR", &registry)
                .env("LOOPX_STORE", &store)
                .args([
                    "drive",
                    "--cmd",
                    &agent.display().to_string(),
                    "--workers",
                    "2",
                ])
                .args(["--push", "origin", "--host-id", host, "--dir"])
                .arg(at(&format!("{host}-loop")))
                .arg("--root")
                .arg(at(host))
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for driver in drivers {
        let output = driver.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{stderr}");
        assert!(!stderr.contains(pg_server::PASSWORD), "{stderr}");
    }
    // Every todo worked once, by workers of both hosts.
    let lines: Vec<String> = std::fs::read_to_string(&starts)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let mut todos: Vec<&str> = lines.iter().map(|l| l.split(' ').next().unwrap()).collect();
    todos.sort();
    todos.dedup();
    assert_eq!((lines.len(), todos.len()), (6, 6), "{lines:?}");
    for host in ["host-a", "host-b"] {
        assert!(
            lines.iter().any(|l| l.ends_with(&format!("@{host}"))),
            "{host} worked: {lines:?}"
        );
    }
    // All six landed on the remote's main, one merge at a time.
    let landed = git(&at("remote.git"), &["ls-tree", "--name-only", "main"]);
    for n in 1..=6 {
        assert!(landed.contains(&format!("out-t{n}.txt")), "{landed}");
    }
    let queue: Value =
        serde_json::from_slice(&ok("host-b", &["queue", "list", "--json"]).stdout).unwrap();
    assert_eq!(queue["counts"]["landed"], 6, "{queue}");
    let branches = git(
        &at("remote.git"),
        &["for-each-ref", "--format=%(refname)", "refs/heads/loopx/"],
    );
    assert!(
        branches.trim().is_empty(),
        "landed branches leave the remote: {branches}"
    );
    // Each host drove its own workspace: neither was refused for the other's.
    let todos_json: Value =
        serde_json::from_slice(&ok("host-b", &["todo", "list", "--json"]).stdout).unwrap();
    assert!(
        todos_json["todos"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["status"] == "done"),
        "{todos_json}"
    );
}

#[test]
fn while_workers_run_status_and_the_dashboard_show_each_workers_todo_and_the_queue() {
    let p = Project::new(2);
    let go = p.f.temp.path().join("go");
    let agent = p.agent(&format!(
        "while [ ! -e '{}' ]; do sleep 0.05; done\necho done > \"out-$LOOPX_TODO_ID.txt\"",
        go.display()
    ));
    let mut driver = p
        .drive(&agent, &["--workers", "2", "--host-id", "box"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while p.starts().len() < 2 {
        assert!(Instant::now() < deadline, "both workers never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = p.f.json(&["status", "--dir", p.f.d()]);
    let workers = &status["workers"];
    let working = workers["working"].as_array().unwrap();
    assert_eq!(working.len(), 2, "{workers}");
    let mut held: Vec<(String, String)> = (working.iter())
        .map(|w| {
            (
                w["todo_id"].as_str().unwrap().to_owned(),
                w["worker"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    held.sort();
    assert_eq!(held[0].0, "t1");
    assert_eq!(held[1].0, "t2");
    assert!(held.iter().all(|(_, w)| w.ends_with("@box")), "{held:?}");
    assert_eq!(workers["hosts"][0]["host"], "box");
    assert_eq!(workers["hosts"][0]["running"], true);
    let server = common::Server::start(&p.f);
    let page = server.exchange(
        "GET",
        "/fragment/live",
        &[("X-Loopx-Token", &server.token)],
        "",
    );
    assert_eq!(page.status, 200, "{}", page.body);
    for (todo, worker) in &held {
        assert!(
            page.body.contains(&format!("data-worker=\"{worker}\"")),
            "{}",
            page.body
        );
        assert!(page.body.contains(todo.as_str()));
    }
    assert!(page.body.contains("Merge queue: 0 queued"), "{}", page.body);
    std::fs::write(&go, "").unwrap();
    assert!(driver.wait().unwrap().success());
    let status = p.f.json(&["status", "--dir", p.f.d()]);
    assert_eq!(status["workers"]["queue"]["landed"], 2, "{status}");
    assert!(status["workers"]["working"].as_array().unwrap().is_empty());
    let page = server.exchange(
        "GET",
        "/fragment/live",
        &[("X-Loopx-Token", &server.token)],
        "",
    );
    assert!(page.body.contains("2 landed"), "{}", page.body);
    let text =
        p.f.loopx()
            .args(["status", "--dir", p.f.d()])
            .output()
            .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("workers     hosts [box (stopped)]"), "{text}");
}

#[test]
fn a_stop_request_stops_every_worker_from_taking_more_and_the_run_lands_what_was_running() {
    let p = Project::new(4);
    let go = p.f.temp.path().join("go");
    let agent = p.agent(&format!(
        "while [ ! -e '{}' ]; do sleep 0.05; done\necho done > \"out-$LOOPX_TODO_ID.txt\"",
        go.display()
    ));
    let driver = p
        .drive(&agent, &["--workers", "2"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while p.starts().len() < 2 {
        assert!(Instant::now() < deadline, "both workers never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (ok, _, stderr) = p.f.run_in_dir(&["request-stop", "--reason", "enough"]);
    assert!(ok, "{stderr}");
    std::fs::write(&go, "").unwrap();
    let output = driver.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("done arbiter"), "{stdout}");
    assert_eq!(
        p.starts().len(),
        2,
        "no worker took a todo after the stop: {:?}",
        p.starts()
    );
    let queue = p.queue();
    assert_eq!(
        queue["counts"]["landed"], 2,
        "what was running landed: {queue}"
    );
    let open: Vec<String> = ["t1", "t2", "t3", "t4"]
        .iter()
        .filter(|t| p.todo_status(t) == "open")
        .map(|t| t.to_string())
        .collect();
    assert_eq!(open.len(), 2, "{open:?}");
}

#[test]
fn what_a_killed_run_left_of_finished_entries_is_pruned_when_the_next_run_starts() {
    let p = Project::new(1);
    let agent = p.agent("echo done > out.txt");
    p.drive_ok(&agent, &["--workers", "1"]);
    // What a run killed after a landing would leave: its worktree and
    // branch, with no entry in flight owning them.
    let branch = p.entry("t1")["branch"]
        .as_str()
        .unwrap()
        .replace("/t1", "/gone");
    let orphan = Path::new(p.f.d()).join("worktrees/gone");
    git(
        &p.root,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            &branch,
            orphan.to_str().unwrap(),
            "main",
        ],
    );
    let stray = Path::new(p.f.d()).join("worktrees/half-made");
    std::fs::create_dir_all(&stray).unwrap();
    let stderr = p.drive_ok(&agent, &["--workers", "2"]);
    assert!(stderr.contains("pruned"), "{stderr}");
    assert!(!orphan.exists() && !stray.exists());
    assert!(p.loopx_branches().is_empty(), "{:?}", p.loopx_branches());
    assert!(
        Path::new(p.f.d()).join("worktrees/.merge").exists(),
        "the queue's own is kept"
    );
    // A branch outside loopx's namespace is never touched.
    git(&p.root, &["branch", "mine"]);
    let output = p.drive(&agent, &["--workers", "2"]).output().unwrap();
    assert!(output.status.success());
    assert!(git(&p.root, &["branch", "--list", "mine"]).contains("mine"));
}

#[test]
fn with_the_panel_on_a_reviewer_of_another_family_accepts_or_rejects_each_merged_change() {
    let p = Project::new(2);
    std::fs::write(p.f.dir.join("panel.json"), r#"{"providers": ["codex"]}"#).unwrap();
    let bin = p.f.temp.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    // A stand-in codex: rejects todo t2's change, accepts anything else,
    // answering for the merge its brief names.
    let reviewer = bin.join("codex");
    std::fs::write(
        &reviewer,
        r#"#!/bin/sh
[ "$1" = --version ] && { echo '0.0.0 (stand-in)'; exit 0; }
fp=$(printf '%s' "$*" | grep -o 'sha256:[0-9a-f]\{64\}' | head -n1)
if printf '%s' "$*" | grep -q 'finished todo t2'; then v=reject; else v=accept; fi
echo "{\"schema\":\"merge_review.v1\",\"merge_fingerprint\":\"$fp\",\"reviewer\":{\"provider\":\"codex\"},\"verdict\":\"$v\",\"reasoning\":\"read the diff\"}"
"#,
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&reviewer, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let agent = p.agent("echo \"$LOOPX_TODO_ID\" > \"out-$LOOPX_TODO_ID.txt\"");
    let output = p
        .drive(
            &agent,
            &["--workers", "2", "--panel", "on", "--max-iterations", "2"],
        )
        .env("PATH", &path)
        .env("LOOPX_INJECTED_PROVIDERS", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(p.entry("t1")["state"], "landed", "{stderr}");
    let t2 = p.entry("t2");
    assert_eq!(t2["state"], "needs-review", "{t2}");
    assert_eq!(t2["rejection"], "review_rejected");
    assert!(
        t2["reason"]
            .as_str()
            .unwrap()
            .contains("codex's merge review rejected it: read the diff"),
        "{t2}"
    );
    assert_eq!(p.todo_status("t2"), "open");
    assert!(git(&p.root, &["ls-tree", "--name-only", "main"]).contains("out-t1.txt"));
    assert!(!git(&p.root, &["ls-tree", "--name-only", "main"]).contains("out-t2.txt"));
    let outcomes: Vec<String> = common::journal_events(&p.f.dir, "panel.attempt_finished")
        .iter()
        .map(|e| e["outcome"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(outcomes.len(), 2, "{outcomes:?}");
    assert!(
        outcomes.contains(&"merge_accepted".to_owned()),
        "{outcomes:?}"
    );
    assert!(
        outcomes.contains(&"merge_rejected".to_owned()),
        "{outcomes:?}"
    );
    // What the reviewer was sent: the change itself.
    let prompts: Vec<String> = walk(&p.f.dir.join("panel"))
        .into_iter()
        .filter(|f| f.extension().is_some_and(|e| e == "prompt"))
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect();
    assert_eq!(prompts.len(), 2);
    assert!(
        prompts
            .iter()
            .any(|p| p.contains("+t1") && p.contains("out-t1.txt")),
        "{prompts:?}"
    );
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[test]
fn a_merge_driver_a_worker_configured_never_runs_when_the_queue_merges() {
    let p = Project::new(2);
    let ran = p.f.temp.path().join("merge-driver-ran");
    // Each agent writes the same file differently and asks git to merge
    // it with a program of its own, through the repository's shared config.
    let agent = p.agent(&format!(
        "sleep 0.3\ngit config merge.evil.driver \"touch '{}'; exit 1\"\necho '* merge=evil' > .gitattributes\necho \"$LOOPX_TODO_ID\" > shared.txt",
        ran.display()
    ));
    p.drive_ok(&agent, &["--workers", "2", "--max-iterations", "2"]);
    let states: Vec<Value> = ["t1", "t2"]
        .iter()
        .map(|t| p.entry(t)["state"].clone())
        .collect();
    assert!(
        states.contains(&json!("landed")) && states.contains(&json!("needs-review")),
        "{states:?}"
    );
    assert!(!ran.exists(), "the worker's merge driver ran");
}

#[test]
fn a_driver_killed_mid_merge_lands_the_change_exactly_once_on_restart() {
    for failpoint in ["merge.after_prepared", "merge.after_advance"] {
        let p = Project::new(1);
        let agent = p.agent("echo done > out.txt");
        common::kill_at_failpoint(p.drive(&agent, &["--workers", "2"]), failpoint);
        assert_eq!(p.entry("t1")["state"], "merging", "{failpoint}");
        let stderr = p.drive_ok(&agent, &["--workers", "2"]);
        assert_eq!(p.entry("t1")["state"], "landed", "{failpoint}: {stderr}");
        assert_eq!(p.todo_status("t1"), "done");
        assert_eq!(
            p.starts().len(),
            1,
            "{failpoint}: the work was not done again"
        );
        let landings = p.landings("t1");
        assert_eq!(landings, 1, "{failpoint}: landed exactly once");
        assert_eq!(git(&p.root, &["show", "main:out.txt"]).trim(), "done");
    }
}

#[test]
fn rebase_mode_lands_each_change_on_a_straight_line() {
    let p = Project::new(3);
    let agent = p.agent("sleep 0.2\necho \"$LOOPX_TODO_ID\" > \"out-$LOOPX_TODO_ID.txt\"\ngit add -A && git -c user.name=a -c user.email=a@a commit -qm \"agent: $LOOPX_TODO_ID\"");
    p.drive_ok(&agent, &["--workers", "2", "--merge", "rebase"]);
    assert_eq!(p.queue()["counts"]["landed"], 3);
    let merges = git(&p.root, &["rev-list", "--merges", "main"]);
    assert!(merges.trim().is_empty(), "no merge commit: {merges}");
    let log = git(&p.root, &["log", "--format=%s", "main"]);
    for todo in ["t1", "t2", "t3"] {
        assert!(
            log.contains(&format!("agent: {todo}")),
            "the agent's own commit is kept: {log}"
        );
        let landed = p.entry(todo)["merge_commit"].as_str().unwrap().to_owned();
        git(&p.root, &["merge-base", "--is-ancestor", &landed, "main"]);
    }
}

#[test]
fn a_merge_whose_driver_died_can_be_put_back_in_line_by_the_operator() {
    let p = Project::new(1);
    let agent = p.agent("echo done > out.txt");
    common::kill_at_failpoint(p.drive(&agent, &["--workers", "1"]), "merge.after_prepared");
    assert_eq!(p.entry("t1")["state"], "merging");
    let (ok, receipt, stderr) = p.f.run_in_dir(&["queue", "retry", "t1"]);
    assert!(ok, "{stderr}");
    assert_eq!(receipt["state"], "queued");
    p.drive_ok(&agent, &["--workers", "1"]);
    assert_eq!(p.entry("t1")["state"], "landed");
    let landings = p.landings("t1");
    assert_eq!(landings, 1);
}
