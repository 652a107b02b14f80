//! A loop whose state lives in PostgreSQL, on the real binary: nothing of
//! it in the loop directory, the schema gate and `loopx migrate`, no
//! password in any output, and lease admission across many processes
//! (never a double claim, an expired lease taken over exactly once, a
//! claimer killed mid-commit losing nothing), each race run against SQLite
//! too. The server is a throwaway one (see `support/pg_server.rs`); without
//! server binaries the PostgreSQL half is skipped unless
//! `LOOPX_PG_REQUIRED=1`.

mod common;
#[path = "../../loopx-store/tests/support/pg_server.rs"]
mod pg_server;

use common::Fixture;
use serde_json::Value;
use std::collections::BTreeMap;
use std::process::{Command, Stdio};

/// A loop fixture with its store: `None` is the directory's SQLite file.
struct Loop {
    f: Fixture,
    store: Option<String>,
}

impl Loop {
    fn new(store: Option<String>) -> Self {
        let l = Loop {
            f: Fixture::new(),
            store,
        };
        l.ok(None, &["init", "--goal", "g", "--success-criteria", "c"]);
        l
    }

    fn command(&self, agent: Option<&str>, args: &[&str]) -> assert_cmd::Command {
        let mut command = self.f.loopx();
        command.args(args).args(["--dir", self.f.d()]);
        match &self.store {
            Some(url) => command.env("LOOPX_STORE", url),
            None => command.env_remove("LOOPX_STORE"),
        };
        if let Some(agent) = agent {
            command.env("LOOPX_AGENT_ID", agent);
        }
        command
    }

    /// Run; returns (success, stdout, stderr), asserting that no output
    /// ever shows the password.
    fn run(&self, agent: Option<&str>, args: &[&str]) -> (bool, String, String) {
        let out = self.command(agent, args).output().unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        assert!(
            !stdout.contains(pg_server::PASSWORD) && !stderr.contains(pg_server::PASSWORD),
            "{args:?} printed the password: {stdout}{stderr}"
        );
        (out.status.success(), stdout, stderr)
    }

    fn ok(&self, agent: Option<&str>, args: &[&str]) -> String {
        let (ok, stdout, stderr) = self.run(agent, args);
        assert!(ok, "{args:?} failed: {stderr}");
        stdout
    }

    fn json(&self, args: &[&str]) -> Value {
        let mut args = args.to_vec();
        args.push("--json");
        serde_json::from_str(&self.ok(None, &args)).unwrap()
    }

    /// A shell line running `loopx ARGS` on this loop.
    fn shell(&self, args: &str) -> String {
        format!(
            "{} {args} --dir {}",
            common::loopx_path().display(),
            self.f.d()
        )
    }

    fn spawn_shell(&self, script: &str, agent: &str) -> std::process::Child {
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(script)
            .env("LOOPX_REGISTRY_DIR", &self.f.registry)
            .env("LOOPX_AGENT_ID", agent)
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        match &self.store {
            Some(url) => command.env("LOOPX_STORE", url),
            None => command.env_remove("LOOPX_STORE"),
        };
        command.spawn().unwrap()
    }

    fn holders(&self) -> BTreeMap<String, String> {
        self.json(&["todo", "list"])["todos"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|todo| {
                Some((
                    todo["id"].as_str()?.to_owned(),
                    todo["lease"]["holder"].as_str()?.to_owned(),
                ))
            })
            .collect()
    }
}

/// Both backends: SQLite always, PostgreSQL when a server can be started.
fn backends() -> Vec<Option<String>> {
    let mut all = vec![None];
    if let Some(url) = pg_server::database() {
        all.push(Some(url));
    }
    all
}

#[test]
fn a_postgres_loop_keeps_no_state_in_its_directory_and_never_shows_the_password() {
    let Some(url) = pg_server::database() else {
        return;
    };
    let l = Loop::new(Some(url));
    l.ok(None, &["todo", "add", "--title", "one"]);
    l.ok(Some("a"), &["todo", "claim", "t1"]);
    l.ok(None, &["status"]);
    l.ok(None, &["status", "--json"]);
    let valid = l.ok(None, &["validate"]);
    assert!(valid.starts_with("valid"), "{valid}");
    let names: Vec<String> = std::fs::read_dir(&l.f.dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|name| !name.starts_with("loopx.sqlite")),
        "the loop directory holds a SQLite file: {names:?}"
    );
    // A refusal names the store without its password and changes nothing.
    let before = l.f.fingerprint();
    let (ok, _, stderr) = l.run(Some("b"), &["todo", "claim", "t1"]);
    assert!(!ok && stderr.contains("leased to a"), "{stderr}");
    let (ok, _, stderr) = l.run(None, &["backup", "--to", "/tmp/never-written.sqlite"]);
    assert!(!ok && stderr.contains("pg_dump"), "{stderr}");
    assert!(
        stderr.contains("postgres://postgres@127.0.0.1:"),
        "{stderr}"
    );
    assert_eq!(l.f.fingerprint(), before);

    // A second host, whose loop directory does not exist yet: told the
    // loop is in the store and to make the directory, not to `init`.
    let elsewhere = l.f.temp.path().join("second-host/.loopx");
    let out =
        l.f.loopx()
            .args(["status", "--dir", elsewhere.to_str().unwrap()])
            .env("LOOPX_STORE", l.store.as_deref().unwrap())
            .output()
            .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && stderr.contains("does not exist on this host, but the store")
            && stderr.contains(&format!("mkdir -p {}", elsewhere.display()))
            && stderr.contains("not `loopx init`: the loop exists")
            && !stderr.contains(pg_server::PASSWORD),
        "{stderr}"
    );
    assert!(!elsewhere.exists(), "a read created the directory");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let out =
        l.f.loopx()
            .args(["status", "--json", "--dir", elsewhere.to_str().unwrap()])
            .env("LOOPX_STORE", l.store.as_deref().unwrap())
            .output()
            .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_schema_that_is_not_this_builds_is_refused_with_the_command_that_fixes_it() {
    let Some(server) = pg_server::server() else {
        return;
    };
    let url = pg_server::database().unwrap();
    let f = Fixture::new();
    std::fs::create_dir_all(&f.dir).unwrap();
    let loopx = |args: &[&str]| {
        let out = f
            .loopx()
            .env("LOOPX_STORE", &url)
            .args(args)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!text.contains(pg_server::PASSWORD), "{text}");
        (out.status.success(), text)
    };
    // An empty database: every command but init and migrate refuses.
    let (ok, text) = loopx(&["status", "--dir", f.d()]);
    assert!(!ok && text.contains("schema version 0"), "{text}");
    assert!(
        text.contains("run `loopx migrate --store postgres://postgres@"),
        "{text}"
    );
    let (ok, text) = loopx(&["migrate", "--json"]);
    assert!(ok, "{text}");
    let view: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        (view["from_version"].as_u64(), view["to_version"].as_u64()),
        (
            Some(0),
            Some(u64::from(loopx_store::postgres::SCHEMA_VERSION))
        )
    );
    let (ok, text) = loopx(&["migrate"]);
    assert!(ok && text.contains("up to date"), "{text}");
    let (ok, text) = loopx(&[
        "init",
        "--dir",
        f.d(),
        "--goal",
        "g",
        "--success-criteria",
        "c",
    ]);
    assert!(ok, "{text}");
    // A schema from a newer loopx: refused, nothing changed.
    server.psql(&url, "UPDATE loopx_schema_version SET version = 99");
    let before = f.fingerprint();
    for args in [vec!["status", "--dir", f.d()], vec!["migrate"]] {
        let (ok, text) = loopx(&args);
        assert!(
            !ok && text.contains("schema version 99"),
            "{args:?}: {text}"
        );
        assert!(text.contains("upgrade loopx"), "{text}");
    }
    assert_eq!(f.fingerprint(), before);
    // migrate refuses a SQLite locator with what to do instead.
    let out = f
        .loopx()
        .args(["migrate", "--store", "sqlite:/tmp/x.sqlite"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("next writer migrates it"));
}

/// `claimers` processes, each trying to claim every one of `todos` todos
/// in the same order: every todo is claimed exactly once.
fn race(store: Option<String>, claimers: usize, todos: usize) {
    let l = Loop::new(store);
    for n in 1..=todos {
        l.ok(None, &["todo", "add", "--title", &format!("work {n}")]);
    }
    let script: String = (1..=todos)
        .map(|n| {
            format!(
                "{} >/dev/null 2>&1 && echo t{n}\n",
                l.shell(&format!("todo claim t{n}"))
            )
        })
        .collect();
    let children: Vec<_> = (0..claimers)
        .map(|c| {
            (
                format!("agent{c}"),
                l.spawn_shell(&script, &format!("agent{c}")),
            )
        })
        .collect();
    let mut claims: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (agent, child) in children {
        let out = child.wait_with_output().unwrap();
        for todo in String::from_utf8_lossy(&out.stdout).lines() {
            claims
                .entry(todo.to_owned())
                .or_default()
                .push(agent.clone());
        }
    }
    let holders = l.holders();
    assert_eq!(holders.len(), todos, "every todo is claimed: {holders:?}");
    for (todo, agents) in &claims {
        assert_eq!(agents.len(), 1, "{todo} was claimed by {agents:?}");
        assert_eq!(
            &holders[todo], &agents[0],
            "{todo}: the holder is the claimer"
        );
    }
    assert_eq!(claims.len(), todos);
    let valid = l.ok(None, &["validate"]);
    assert!(valid.starts_with("valid"), "{valid}");
}

#[test]
fn eight_claimers_never_double_claim_a_todo() {
    for store in backends() {
        race(store, 8, 6);
    }
}

#[test]
fn thirty_two_claimers_never_double_claim_a_todo() {
    for store in backends() {
        race(store, 32, 4);
    }
}

#[test]
fn an_expired_lease_is_taken_over_exactly_once() {
    for store in backends() {
        let l = Loop::new(store);
        l.ok(None, &["todo", "add", "--title", "one"]);
        l.ok(Some("gone"), &["todo", "claim", "t1", "--ttl", "1"]);
        std::thread::sleep(std::time::Duration::from_millis(1500));
        let script = format!(
            "{} >/dev/null 2>&1 && echo took\n",
            l.shell("todo claim t1")
        );
        let children: Vec<_> = (0..16)
            .map(|c| l.spawn_shell(&script, &format!("agent{c}")))
            .collect();
        let took: usize = children
            .into_iter()
            .map(|child| {
                String::from_utf8_lossy(&child.wait_with_output().unwrap().stdout)
                    .lines()
                    .count()
            })
            .sum();
        assert_eq!(took, 1, "the expired lease was taken over {took} times");
        assert_ne!(l.holders()["t1"], "gone");
    }
}

#[test]
fn a_claimer_killed_inside_its_commit_loses_nothing() {
    for store in backends() {
        let failpoint = if store.is_some() {
            "postgres.commit.before_commit"
        } else {
            "sqlite.commit.before_commit"
        };
        let l = Loop::new(store);
        l.ok(None, &["todo", "add", "--title", "one"]);
        l.ok(None, &["todo", "add", "--title", "two"]);
        let mut victim = Command::new(common::loopx_path());
        victim
            .args(["todo", "claim", "t1", "--dir", l.f.d()])
            .env("LOOPX_REGISTRY_DIR", &l.f.registry)
            .env("LOOPX_AGENT_ID", "victim");
        match &l.store {
            Some(url) => victim.env("LOOPX_STORE", url),
            None => victim.env_remove("LOOPX_STORE"),
        };
        common::kill_at_failpoint(victim, failpoint);
        // Its claim never happened; everyone else carries on.
        assert!(!l.holders().contains_key("t1"));
        l.ok(Some("b"), &["todo", "claim", "t1"]);
        l.ok(Some("c"), &["todo", "claim", "t2"]);
        assert_eq!(l.holders().len(), 2);
        let valid = l.ok(None, &["validate"]);
        assert!(valid.starts_with("valid"), "{valid}");
    }
}

#[test]
fn an_armed_postgres_loop_is_read_through_its_store_not_taken_for_missing() {
    let Some(url) = pg_server::database() else {
        return;
    };
    let l = Loop::new(Some(url.clone()));
    let root = l.f.temp.path().to_str().unwrap().to_owned();
    l.ok(None, &["arm", "--root", &root]);
    let out =
        l.f.loopx()
            .env("LOOPX_STORE", &url)
            .args(["active", "--json"])
            .output()
            .unwrap();
    let view: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(view["loops"][0]["state"], "unfinished", "{view}");
}
