//! Workspace snapshots with real git repositories and the real binary:
//! `drive` commits the workspace before and after each turn on loopx's
//! refs, `rollback` restores one, and a restart refuses a workspace that
//! changed underneath. The agents are shell commands that edit files.

mod common;

use common::{fingerprint, git, iteration_numbers, Fixture};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Output};

/// An agent turn: a tracked file grows, an untracked and an ignored file
/// appear (numbered by the turn), and the iteration is recorded.
const EDITING_AGENT: &str = r#"n=$(ls turn-*.txt 2>/dev/null | wc -l); n=$((n+1))
echo "line $n" >> tracked.txt
printf 'turn %s\000binary' "$n" > turn-$n.txt
echo noise > build-$n.log
loopx append-iteration --mode bounded-research --objective "edit" --decision continue >/dev/null"#;

struct Project {
    f: Fixture,
    root: PathBuf,
}

impl Project {
    /// A git repository with one commit (a tracked file, a `.gitignore`
    /// for logs), its loop directory inside it at `.loopx`.
    fn new() -> Self {
        let project = Self::bare();
        git(&project.root, &["init", "-q"]);
        std::fs::write(project.root.join("tracked.txt"), "start\n").unwrap();
        std::fs::write(project.root.join("gone-later.txt"), "tracked\n").unwrap();
        std::fs::write(project.root.join(".gitignore"), "*.log\n").unwrap();
        // The loop directory stays untracked (and not ignored): snapshots
        // must leave it out by themselves.
        git(
            &project.root,
            &["add", "tracked.txt", "gone-later.txt", ".gitignore"],
        );
        git(&project.root, &["commit", "-q", "-m", "start"]);
        project
    }

    /// A plain directory (no repository) with its loop inside.
    fn bare() -> Self {
        let mut f = Fixture::new();
        let root = f.temp.path().join("project");
        std::fs::create_dir_all(&root).unwrap();
        f.dir = root.join(".loopx");
        f.init(20, &[]);
        Project { f, root }
    }

    fn drive(&self, agent: &str, turns: u64, extra: &[&str]) -> Output {
        self.f
            .loopx()
            .args(["drive", "--dir", self.f.d(), "--root"])
            .arg(&self.root)
            .args(["--cmd", agent, "--max-iterations", &turns.to_string()])
            .args(extra)
            .output()
            .unwrap()
    }

    fn drive_ok(&self, agent: &str, turns: u64) -> String {
        let output = self.drive(agent, turns, &[]);
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert_eq!(output.status.code(), Some(0), "{stderr}");
        stderr
    }

    fn run(&self, args: &[&str]) -> Output {
        self.f
            .loopx()
            .args(args)
            .args(["--dir", self.f.d()])
            .output()
            .unwrap()
    }

    fn json(&self, args: &[&str]) -> Value {
        let output = self.run(&[args, &["--json"]].concat());
        serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|_| panic!("{args:?}: {}", String::from_utf8_lossy(&output.stderr)))
    }

    /// Every file of the work tree, outside `.git` and the loop directory.
    fn files(&self) -> BTreeMap<String, Vec<u8>> {
        let mut files = fingerprint(&self.root);
        files.retain(|name, _| !name.starts_with(".git/") && !name.starts_with(".loopx"));
        files.remove(".git");
        files
    }

    fn run_id(&self) -> String {
        self.f.json(&["status", "--dir", self.f.d()])["run_id"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    fn snapshot_ref(&self, turn: u64, side: &str) -> String {
        format!("refs/loopx/{}/turns/{turn}/{side}", self.run_id())
    }

    fn paths_in(&self, reference: &str) -> Vec<String> {
        git(&self.root, &["ls-tree", "-r", "--name-only", reference])
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn each_turn_is_committed_before_and_after_with_untracked_files_and_without_the_loop_dir() {
    let p = Project::new();
    // The user's own state: a stash, a staged change, a branch.
    std::fs::write(p.root.join("tracked.txt"), "stashed edit\n").unwrap();
    git(&p.root, &["stash", "-q"]);
    std::fs::write(p.root.join("staged.txt"), "staged\n").unwrap();
    git(&p.root, &["add", "staged.txt"]);
    let branch = git(
        &p.root,
        &["rev-parse", "HEAD", "--symbolic-full-name", "HEAD"],
    );
    let stash = git(&p.root, &["rev-parse", "refs/stash"]);
    let index = std::fs::read(p.root.join(".git/index")).unwrap();
    // A file whose stat data no longer matches the index but whose content
    // does: `git diff` refreshes such an entry into the index it reads.
    std::fs::File::options()
        .write(true)
        .open(p.root.join("gone-later.txt"))
        .unwrap()
        .set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(60))
        .unwrap();

    p.drive_ok(EDITING_AGENT, 2);
    assert_eq!(iteration_numbers(&p.f.dir), vec![1, 2]);

    let before_1 = p.paths_in(&p.snapshot_ref(1, "before"));
    let after_1 = p.paths_in(&p.snapshot_ref(1, "after"));
    let after_2 = p.paths_in(&p.snapshot_ref(2, "after"));
    assert!(before_1.contains(&"staged.txt".to_owned()), "{before_1:?}");
    assert!(!before_1.contains(&"turn-1.txt".to_owned()));
    assert!(
        after_1.contains(&"turn-1.txt".to_owned()),
        "untracked files are in: {after_1:?}"
    );
    assert!(after_2.contains(&"turn-2.txt".to_owned()), "{after_2:?}");
    for paths in [&before_1, &after_1, &after_2] {
        assert!(
            paths
                .iter()
                .all(|p| !p.starts_with(".loopx") && !p.ends_with(".log")),
            "neither the loop dir nor ignored files: {paths:?}"
        );
    }
    // Each after commit sits on the user's HEAD; turn 2 starts where 1 ended.
    let head = git(&p.root, &["rev-parse", "HEAD"]);
    let parent = git(
        &p.root,
        &["rev-parse", &format!("{}^", p.snapshot_ref(1, "after"))],
    );
    assert_eq!(parent, head);
    assert_eq!(
        git(
            &p.root,
            &[
                "rev-parse",
                &format!("{}^{{tree}}", p.snapshot_ref(1, "after"))
            ]
        ),
        git(
            &p.root,
            &[
                "rev-parse",
                &format!("{}^{{tree}}", p.snapshot_ref(2, "before"))
            ]
        )
    );

    // The user's branch, index and stash are byte for byte as they were.
    assert_eq!(
        git(
            &p.root,
            &["rev-parse", "HEAD", "--symbolic-full-name", "HEAD"]
        ),
        branch
    );
    assert_eq!(git(&p.root, &["rev-parse", "refs/stash"]), stash);
    assert_eq!(std::fs::read(p.root.join(".git/index")).unwrap(), index);
    assert!(git(&p.root, &["status", "--porcelain"]).contains("?? turn-2.txt"));

    // The journal, status and the list carry both commits and the stat.
    let status = p.f.json(&["status", "--dir", p.f.d()]);
    let last = &status["driver"]["snapshot"];
    assert_eq!(last["turn"], 2);
    assert_eq!(last["stat"]["files"], 2, "{last}");
    assert_eq!(last["stat"]["insertions"], 1, "{last}");
    let list = p.json(&["snapshot", "list"]);
    assert_eq!(list["total"], 2);
    assert_eq!(
        list["snapshots"][0]["after"].as_str().unwrap(),
        git(&p.root, &["rev-parse", &p.snapshot_ref(1, "after")]).trim()
    );
    let page = p.json(&["snapshot", "list", "--limit", "1"]);
    assert_eq!(page["snapshots"].as_array().unwrap().len(), 1);
    let next = page["next_cursor"].as_u64().unwrap();
    let rest = p.json(&[
        "snapshot",
        "list",
        "--limit",
        "1",
        "--cursor",
        &next.to_string(),
    ]);
    assert_eq!(rest["snapshots"][0]["turn"], 2);
    assert_eq!(rest["next_cursor"], Value::Null);
    let diff = p.json(&["snapshot", "diff", "1"]);
    assert!(
        diff["patch"].as_str().unwrap().contains("+line 1"),
        "{diff}"
    );
    let show = p.json(&["snapshot", "show", "2"]);
    assert_eq!(show["after_ref"], p.snapshot_ref(2, "after"));
    let turns = p.f.json(&["status", "--dir", p.f.d()]);
    assert!(turns["driver"]["snapshot"]["before"].is_string());
}

#[test]
fn rollback_restores_a_byte_identical_tree_and_refuses_changes_loopx_did_not_make() {
    let p = Project::new();
    let initial = p.files();
    p.drive_ok(EDITING_AGENT, 1);
    let after_1 = p.files();
    p.drive_ok(&format!("rm gone-later.txt\n{EDITING_AGENT}"), 1);
    let after_2 = p.files();
    assert_ne!(after_1, after_2);
    let ledger = iteration_numbers(&p.f.dir);

    // Bad input changes nothing, in the workspace or the loop.
    let loop_before = fingerprint(&p.f.dir);
    let bad = p.run(&["rollback", "--to", "99"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        stderr(&bad).contains("no snapshot of turn 99"),
        "{}",
        stderr(&bad)
    );
    assert_eq!(p.files(), after_2);
    assert_eq!(fingerprint(&p.f.dir), loop_before);

    // A dry run says what it would do and does nothing.
    let dry = p.json(&["rollback", "--to", "1", "--dry-run"]);
    assert_eq!(dry["dry_run"], true);
    let paths: Vec<&str> = dry["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["path"].as_str().unwrap())
        .collect();
    assert!(
        paths.contains(&"gone-later.txt") && paths.contains(&"turn-2.txt"),
        "{paths:?}"
    );
    assert_eq!(p.files(), after_2);
    assert_eq!(fingerprint(&p.f.dir), loop_before);

    // Restored byte for byte; the ignored file of turn 2 stays, the loop
    // directory keeps both iterations.
    let done = p.json(&["rollback", "--to", "1"]);
    assert_eq!(done["status"], "ok", "{done}");
    let mut expected = after_1.clone();
    expected.insert("build-2.log".into(), b"noise\n".to_vec());
    assert_eq!(p.files(), expected);
    assert_eq!(iteration_numbers(&p.f.dir), ledger);
    assert_eq!(
        common::journal_events(&p.f.dir, "driver.rolled_back").len(),
        1
    );

    // A change loopx did not make is refused, and nothing changes.
    std::fs::write(p.root.join("mine.txt"), "my work\n").unwrap();
    let with_mine = p.files();
    let loop_before = fingerprint(&p.f.dir);
    let refused = p.run(&["rollback", "--to", "0"]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(stderr(&refused).contains("--force"), "{}", stderr(&refused));
    assert_eq!(p.files(), with_mine);
    assert_eq!(fingerprint(&p.f.dir), loop_before);
    let dry = p.run(&["rollback", "--to", "0", "--dry-run", "--force"]);
    assert_eq!(dry.status.code(), Some(0), "{}", stderr(&dry));
    assert_eq!(p.files(), with_mine);

    // --force overrides; what it overwrote is kept on a loopx ref.
    let forced = p.json(&["rollback", "--to", "0", "--force"]);
    let saved = forced["saved"].as_str().unwrap();
    assert_eq!(
        git(&p.root, &["show", &format!("{saved}:mine.txt")]),
        "my work\n"
    );
    let mut expected = initial.clone();
    expected.insert("build-1.log".into(), b"noise\n".to_vec());
    expected.insert("build-2.log".into(), b"noise\n".to_vec());
    assert_eq!(p.files(), expected);
}

#[test]
fn a_restart_on_a_workspace_changed_underneath_is_refused_until_accepted() {
    let p = Project::new();
    p.drive_ok(EDITING_AGENT, 1);
    std::fs::write(p.root.join("tracked.txt"), "edited by hand\n").unwrap();

    let recover = p.json(&["recover"]);
    assert_eq!(recover["workspace"]["verdict"], "changed", "{recover}");
    assert_eq!(recover["workspace"]["files"], true);
    assert_eq!(recover["workspace"]["changes"][0]["path"], "tracked.txt");

    let refused = p.drive(EDITING_AGENT, 1, &[]);
    assert_eq!(refused.status.code(), Some(4), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("changed underneath")
            && stderr(&refused).contains("--accept-workspace"),
        "{}",
        stderr(&refused)
    );
    assert_eq!(iteration_numbers(&p.f.dir), vec![1]);
    // Refused again, as long as nobody accepts it.
    assert_eq!(p.drive(EDITING_AGENT, 1, &[]).status.code(), Some(4));
    assert_eq!(p.files()["tracked.txt"], b"edited by hand\n");

    let accepted = p.drive(EDITING_AGENT, 1, &["--accept-workspace"]);
    assert_eq!(accepted.status.code(), Some(0), "{}", stderr(&accepted));
    assert_eq!(iteration_numbers(&p.f.dir), vec![1, 2]);
    assert_eq!(
        common::journal_events(&p.f.dir, "driver.workspace_accepted").len(),
        1
    );
    // A HEAD moved underneath is a change too.
    git(&p.root, &["commit", "-q", "--allow-empty", "-m", "by hand"]);
    let moved = p.drive(EDITING_AGENT, 1, &[]);
    assert_eq!(moved.status.code(), Some(4), "{}", stderr(&moved));
    assert!(stderr(&moved).contains("HEAD"), "{}", stderr(&moved));
}

#[test]
fn a_driver_killed_before_the_after_snapshot_takes_it_at_restart() {
    let p = Project::new();
    let mut command = Command::new(common::loopx_path());
    command
        .args(["drive", "--dir", p.f.d(), "--root"])
        .arg(&p.root)
        .args(["--cmd", EDITING_AGENT])
        .env("LOOPX_REGISTRY_DIR", &p.f.registry)
        .env_remove("LOOPX_DIR");
    common::kill_at_failpoint(command, "drive.after_settle");
    assert_eq!(iteration_numbers(&p.f.dir), vec![1]);
    // The turn's own edits are its after-snapshot, not a change underneath.
    let restarted = p.drive(EDITING_AGENT, 1, &[]);
    assert_eq!(restarted.status.code(), Some(0), "{}", stderr(&restarted));
    assert!(
        stderr(&restarted).contains("taken now"),
        "{}",
        stderr(&restarted)
    );
    assert!(p
        .paths_in(&p.snapshot_ref(1, "after"))
        .contains(&"turn-1.txt".to_owned()));
    assert_eq!(iteration_numbers(&p.f.dir), vec![1, 2]);
}

#[test]
fn a_repository_without_commits_an_ignored_root_and_a_non_git_root_run_without_snapshots_and_say_so(
) {
    let bare = Project::bare();
    let agent = "loopx append-iteration --mode bounded-research --objective t --decision continue >/dev/null";
    let said = bare.drive_ok(agent, 1);
    assert!(
        said.contains("git snapshots off: the project root is not a git work tree"),
        "{said}"
    );
    let loop_before = fingerprint(&bare.f.dir);
    let asked = bare.drive(agent, 1, &["--git-snapshot", "on"]);
    assert_eq!(asked.status.code(), Some(2), "{}", stderr(&asked));
    assert!(
        stderr(&asked).contains("--git-snapshot off"),
        "{}",
        stderr(&asked)
    );
    assert_eq!(
        fingerprint(&bare.f.dir),
        loop_before,
        "a refusal writes nothing"
    );

    let empty = Project::bare();
    git(&empty.root, &["init", "-q"]);
    let said = empty.drive_ok(agent, 1);
    assert!(said.contains("no commit yet"), "{said}");
    assert!(git(&empty.root, &["for-each-ref", "refs/loopx"]).is_empty());
    // A project under another repository's ignored directory (as the
    // demo's `target/demo-project`): off, said once, and the turn runs.
    let nested = Project::bare();
    let outer = nested.f.temp.path();
    git(outer, &["init", "-q"]);
    std::fs::write(outer.join(".gitignore"), "project/\n").unwrap();
    git(outer, &["add", ".gitignore"]);
    git(outer, &["commit", "-q", "-m", "start"]);
    let said = nested.drive_ok(agent, 1);
    assert!(
        said.contains("ignored by the git repository around it"),
        "{said}"
    );
    assert!(git(outer, &["for-each-ref", "refs/loopx"]).is_empty());
    // Off by request: nothing said, nothing taken.
    let p = Project::new();
    let output = p.drive(agent, 1, &["--git-snapshot", "off"]);
    assert!(!stderr(&output).contains("git snapshots"));
    assert!(git(&p.root, &["for-each-ref", "refs/loopx"]).is_empty());
    assert_eq!(p.json(&["snapshot", "list"])["total"], 0);
}

#[test]
fn rollback_never_follows_a_symlink_out_of_the_work_tree() {
    let p = Project::new();
    p.drive_ok(
        &format!("mkdir -p sub && echo mine > sub/file.txt\n{EDITING_AGENT}"),
        1,
    );
    // Something outside the project, and the project's directory swapped
    // for a link to it.
    let outside = p.f.temp.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("file.txt"), "not yours\n").unwrap();
    std::fs::remove_dir_all(p.root.join("sub")).unwrap();
    std::os::unix::fs::symlink(&outside, p.root.join("sub")).unwrap();

    let done = p.json(&["rollback", "--to", "1", "--force"]);
    assert_eq!(done["status"], "ok", "{done}");
    assert_eq!(
        std::fs::read_to_string(outside.join("file.txt")).unwrap(),
        "not yours\n"
    );
    let sub = std::fs::symlink_metadata(p.root.join("sub")).unwrap();
    assert!(
        sub.is_dir(),
        "the link is replaced by the snapshot's directory"
    );
    assert_eq!(
        std::fs::read_to_string(p.root.join("sub/file.txt")).unwrap(),
        "mine\n"
    );
}

#[test]
fn a_store_file_kept_in_the_project_is_left_out_of_snapshots() {
    let p = Project::new();
    // A loop whose directory is outside the project and whose SQLite
    // state is inside it.
    let other = p.f.temp.path().join("other-loop");
    let locator = format!("sqlite:{}", p.root.join("state.sqlite").display());
    let d = other.to_str().unwrap();
    let with_store = |args: &[&str]| {
        let mut command = p.f.loopx();
        command.args(args).args(["--dir", d, "--store", &locator]);
        command
    };
    with_store(&["init", "--goal", "g", "--success-criteria", "c"])
        .args(["--max-iterations", "5"])
        .assert()
        .success();
    with_store(&["drive", "--root", p.root.to_str().unwrap()])
        .args(["--cmd", EDITING_AGENT, "--max-iterations", "1"])
        .assert()
        .success();
    let status = with_store(&["status", "--json"]).output().unwrap();
    let run_id = serde_json::from_slice::<Value>(&status.stdout).unwrap()["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(p.root.join("state.sqlite").is_file());
    let paths = p.paths_in(&format!("refs/loopx/{run_id}/turns/1/after"));
    assert!(paths.contains(&"turn-1.txt".to_owned()), "{paths:?}");
    assert!(
        paths.iter().all(|path| !path.starts_with("state.sqlite")),
        "{paths:?}"
    );
}

#[test]
fn a_rollback_killed_before_its_record_fails_closed_and_completes_with_force() {
    let p = Project::new();
    p.drive_ok(EDITING_AGENT, 1);
    let after_1 = p.files();
    p.drive_ok(EDITING_AGENT, 1);
    let mut command = Command::new(common::loopx_path());
    command
        .args(["rollback", "--dir", p.f.d(), "--to", "1"])
        .env("LOOPX_REGISTRY_DIR", &p.f.registry);
    common::kill_at_failpoint(command, "rollback.restored");
    // Restored on disk, not on record: loopx does not pretend it was.
    let refused = p.run(&["rollback", "--to", "1"]);
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("did not make"),
        "{}",
        stderr(&refused)
    );
    assert!(common::journal_events(&p.f.dir, "driver.rolled_back").is_empty());
    let forced = p.json(&["rollback", "--to", "1", "--force"]);
    assert_eq!(forced["changes_total"], 0, "{forced}");
    let mut expected = after_1;
    expected.insert("build-2.log".into(), b"noise\n".to_vec());
    assert_eq!(p.files(), expected);
    assert_eq!(
        common::journal_events(&p.f.dir, "driver.rolled_back").len(),
        1
    );
    // Now on record: a drive goes on from it without being told.
    p.drive_ok(EDITING_AGENT, 1);
}

#[test]
fn a_private_index_left_by_a_killed_snapshot_is_removed_later_and_a_fresh_one_kept() {
    let p = Project::new();
    let left = p.root.join(".git/loopx-index-left");
    let fresh = p.root.join(".git/loopx-index-fresh");
    std::fs::write(&left, b"x").unwrap();
    std::fs::write(&fresh, b"x").unwrap();
    let two_hours_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
    std::fs::File::options()
        .write(true)
        .open(&left)
        .unwrap()
        .set_modified(two_hours_ago)
        .unwrap();
    p.drive_ok(EDITING_AGENT, 1);
    assert!(!left.exists());
    assert!(fresh.exists(), "another snapshot's index may be in use");
}

#[test]
fn programs_the_work_tree_configures_never_run_for_loopxs_git() {
    // What an agent could write into the project to have loopx's own git
    // run a command outside its turn: a content filter on every file, an
    // external diff, a textconv, and commit signing by a program of its
    // choosing. Each would leave a mark.
    let p = Project::new();
    let mark = p.f.temp.path().join("ran");
    let touch = format!("touch {}", mark.display());
    for (key, value) in [
        ("filter.evil.clean", format!("{touch}; cat")),
        ("filter.evil.smudge", format!("{touch}; cat")),
        ("filter.evil.process", touch.clone()),
        ("diff.external", touch.clone()),
        ("diff.evil.textconv", touch.clone()),
        ("commit.gpgSign", "true".to_owned()),
        ("gpg.program", touch.clone()),
    ] {
        git(&p.root, &["config", key, &value]);
    }
    std::fs::write(p.root.join(".gitattributes"), "* filter=evil diff=evil\n").unwrap();
    p.drive_ok(EDITING_AGENT, 1);
    assert!(p
        .paths_in(&p.snapshot_ref(1, "after"))
        .contains(&"turn-1.txt".to_owned()));
    // A rollback checks files out through the same git.
    let done = p.json(&["rollback", "--to", "0", "--force"]);
    assert_eq!(done["status"], "ok", "{done}");
    assert!(!p.root.join("turn-1.txt").exists());
    assert!(!mark.exists(), "a program the work tree configured ran");
}
