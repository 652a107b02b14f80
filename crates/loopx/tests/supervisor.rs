//! The supervisor with real processes: `loopx start` (in the foreground
//! and detached) running the real `loopx drive` over fake agents (shell
//! scripts), `service-status`, `drain` and `stop`, a SIGKILLed driver
//! restarted without running or charging a turn twice, and the exits the
//! supervisor maps (10, 11, 12, 14).

mod common;

use common::{iteration_numbers, Fixture};
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// An agent's append, falling back to `stop` on the loop's last allowed
/// iteration (which may not continue).
const APPEND: &str = r#"loopx append-iteration --mode bounded-research --objective "fake turn" --decision continue >/dev/null 2>&1 || loopx append-iteration --mode bounded-research --objective "fake turn" --decision stop >/dev/null"#;

/// The cost line a claude turn reports.
const COST: &str = r#"echo '{"type":"result","subtype":"success","is_error":false,"total_cost_usd":0.25,"usage":{"input_tokens":1000,"output_tokens":200}}'"#;

/// A loop, a project root, a directory of fake CLIs, and every process a
/// test started: killed, and the loop stopped, when the test ends however
/// it ends.
struct Supervised {
    f: Fixture,
    root: PathBuf,
    bin: PathBuf,
    children: Vec<Child>,
}

impl Drop for Supervised {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = self
            .command(&["stop", "--dir", self.f.d(), "--grace", "2s"])
            .output();
    }
}

impl Supervised {
    fn new(max_iterations: u64, init: &[&str]) -> Self {
        let f = Fixture::new();
        f.init(max_iterations, init);
        let root = f.temp.path().join("project");
        let bin = f.temp.path().join("bin");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&bin).unwrap();
        Supervised {
            f,
            root,
            bin,
            children: Vec::new(),
        }
    }

    /// A fake `claude` on PATH: `body`, then the turn's cost (and nothing
    /// when the driver asks its `--version`).
    fn claude(&self, body: &str) {
        let version = r#"[ "$1" = --version ] && exit 0"#;
        self.script("claude", &format!("{version}\n{body}\n{COST}"));
    }

    fn script(&self, name: &str, body: &str) -> String {
        let path = self.bin.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path.display().to_string()
    }

    fn file(&self, name: &str) -> PathBuf {
        self.f.temp.path().join(name)
    }

    /// `loopx args` with the fake CLIs first on PATH.
    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(common::loopx_path());
        let path = format!("{}:{}", self.bin.display(), std::env::var("PATH").unwrap());
        command
            .args(args)
            .env("PATH", path)
            .env("LOOPX_REGISTRY_DIR", &self.f.registry)
            // Stand-in agents may run in enforce mode (a test build only).
            .env("LOOPX_INJECTED_PROVIDERS", "1")
            .env_remove("LOOPX_DIR")
            .env_remove("AUTOLOOP_DRIVER")
            .stdin(Stdio::null());
        command
    }

    /// The words of `start` on this loop, then `extra`.
    fn start_words<'a>(&'a self, extra: &[&'a str]) -> Vec<&'a str> {
        let mut words = vec![
            "start",
            "--dir",
            self.f.d(),
            "--root",
            self.root.to_str().unwrap(),
        ];
        words.extend(extra);
        words
    }

    /// Run `start` to its end: (exit code, stderr).
    fn start(&self, extra: &[&str]) -> (i32, String) {
        let output = self.command(&self.start_words(extra)).output().unwrap();
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }

    /// Start `start` in the foreground as a child this test holds.
    fn spawn_start(&mut self, extra: &[&str]) -> usize {
        let child = self
            .command(&self.start_words(extra))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        self.children.push(child);
        self.children.len() - 1
    }

    /// `start --provider claude` in the foreground (held), its first
    /// turn's agent working for good: (the held child, the agent's pid,
    /// the driver's pid), once the agent runs.
    fn start_in_a_long_turn(&mut self) -> (usize, i32, i32) {
        let started = slow_agent(self, 1000.0);
        let index = self.spawn_start(&["--provider", "claude"]);
        wait_for(Duration::from_secs(20), "the first turn", || {
            started.exists()
        });
        let driver = self.service_status()["driver_pid"].as_i64().unwrap() as i32;
        (index, pid_in(&started), driver)
    }

    /// Wait for the held child `index` to exit: (exit code, stderr).
    fn finished(&mut self, index: usize, within: Duration) -> (i32, String) {
        let child = &mut self.children[index];
        let deadline = Instant::now() + within;
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "start did not end in {within:?}");
            std::thread::sleep(Duration::from_millis(50));
        };
        let mut stderr = String::new();
        std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
        (status.code().unwrap_or(-1), stderr)
    }

    /// Run `loopx args --json`; it must succeed. What it printed.
    fn json_ok(&self, args: &[&str]) -> Value {
        let mut args = args.to_vec();
        args.push("--json");
        let output = self.command(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{args:?}: {stderr}");
        serde_json::from_slice(&output.stdout).unwrap()
    }

    fn service_status(&self) -> Value {
        self.f.json(&["service-status", "--dir", self.f.d()])
    }

    fn settled_outcomes(&self) -> Vec<Value> {
        common::journal_events(&self.f.dir, "driver.settled")
            .into_iter()
            .map(|event| event["settlement"]["outcome"].clone())
            .collect()
    }

    /// No dispatch has two terminal events or two charges.
    fn assert_nothing_twice(&self) {
        let ids = |kind: &str, pointer: &str| -> Vec<String> {
            common::journal_events(&self.f.dir, kind)
                .iter()
                .filter_map(|e| e.pointer(pointer)?.as_str().map(str::to_owned))
                .collect()
        };
        let intents = ids("driver.intended", "/intent/dispatch_id");
        let mut ends = ids("driver.settled", "/settlement/dispatch_id");
        ends.extend(ids("driver.cancelled", "/dispatch_id"));
        let mut charged = ids("ledger.charged", "/dispatch_id");
        for id in &intents {
            assert!(
                ends.iter().filter(|e| *e == id).count() <= 1,
                "dispatch {id}: {ends:?}"
            );
        }
        let all = charged.len();
        charged.sort();
        charged.dedup();
        assert_eq!(charged.len(), all, "a dispatch was charged twice");
    }

    /// Every dispatch is settled or cancelled: recovery has nothing to do.
    fn assert_nothing_open(&self) {
        let recovery = self.f.json(&["recover", "--dir", self.f.d()]);
        assert_eq!(recovery["plan"]["action"], "clear", "{recovery}");
    }
}

/// Wait until `ready` holds (it must, within `within`).
fn wait_for(within: Duration, what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !ready() {
        assert!(Instant::now() < deadline, "{what} never happened");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn alive(pid: i32) -> bool {
    // A zombie has exited; only its parent's wait is missing.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

fn pid_in(path: &Path) -> i32 {
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// An agent that says it started (its pid in `started`), then works for
/// `seconds` before it records its iteration.
fn slow_agent(s: &Supervised, seconds: f64) -> PathBuf {
    let started = s.file("started");
    s.claude(&format!(
        "echo $$ > {}\nsleep {seconds}\n{APPEND}",
        started.display()
    ));
    started
}

#[test]
fn start_detach_returns_at_once_shows_in_service_status_and_refuses_a_second_start() {
    let s = Supervised::new(10, &[]);
    let started = slow_agent(&s, 30.0);
    let before = Instant::now();
    let reply = s.json_ok(&s.start_words(&["--provider", "claude", "--detach"]));
    let took = before.elapsed();
    assert!(took < Duration::from_secs(1), "--detach took {took:?}");
    let pid = reply["pid"].as_u64().unwrap();
    // Turns run meanwhile.
    wait_for(Duration::from_secs(20), "the first turn", || {
        started.exists()
    });

    let status = s.service_status();
    assert_eq!(status["running"], true, "{status}");
    assert_eq!(status["supervisor"]["pid"].as_u64(), Some(pid));
    assert_eq!(status["supervisor"]["backend"], "detach");
    assert_eq!(status["supervisor"]["restarts"], 0);
    assert_eq!(status["provider"], "claude", "{status}");
    assert!(status["driver_pid"].as_u64().is_some(), "{status}");
    let log = s.f.dir.join("supervisor/supervisor.log");
    let mode = std::fs::metadata(&log).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "the log is private");
    let text = s.command(&["status", "--dir", s.f.d()]).output().unwrap();
    assert!(
        String::from_utf8_lossy(&text.stdout).contains(&format!("supervisor: pid {pid} running")),
        "{}",
        String::from_utf8_lossy(&text.stdout)
    );

    let doctor = s.f.json(&["doctor", "--dir", s.f.d()]);
    let line = doctor["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|check| check["name"] == "supervisor")
        .unwrap_or_else(|| panic!("{doctor}"));
    assert!(
        line["detail"]
            .as_str()
            .unwrap()
            .starts_with(&format!("pid {pid} running")),
        "{line}"
    );

    // One supervisor per loop, in the foreground or detached.
    let (code, stderr) = s.start(&["--provider", "claude"]);
    assert_eq!(code, 10, "{stderr}");
    assert!(stderr.contains(&format!("pid {pid}")), "{stderr}");
    let (code, stderr) = s.start(&["--provider", "claude", "--detach"]);
    assert_eq!(code, 10, "{stderr}");
    assert!(stderr.contains(&format!("pid {pid}")), "{stderr}");
}

#[test]
fn stop_leaves_no_process_of_the_loop_alive_and_settles_the_turn_as_interrupted() {
    let s = Supervised::new(10, &[]);
    let started = slow_agent(&s, 1000.0);
    let reply = s.json_ok(&s.start_words(&["--provider", "claude", "--detach"]));
    let supervisor = reply["pid"].as_i64().unwrap() as i32;
    wait_for(Duration::from_secs(20), "the turn", || started.exists());
    let agent = pid_in(&started);
    let driver = s.service_status()["driver_pid"].as_i64().unwrap() as i32;
    assert!(alive(agent) && alive(driver) && alive(supervisor));

    let stopped = s.json_ok(&["stop", "--dir", s.f.d()]);
    assert_eq!(stopped["alive"], Value::Array(vec![]), "{stopped}");
    assert_eq!(
        stopped["killed"],
        Value::Array(vec![]),
        "no kill was needed: {stopped}"
    );
    for (what, pid) in [
        ("agent", agent),
        ("driver", driver),
        ("supervisor", supervisor),
    ] {
        assert!(!alive(pid), "the {what} ({pid}) outlived `loopx stop`");
    }
    assert_eq!(s.settled_outcomes(), vec![Value::from("interrupted")]);
    s.assert_nothing_twice();
    s.assert_nothing_open();
    let status = s.service_status();
    assert_eq!(status["running"], false);
    assert_eq!(status["supervisor"]["ended"]["code"], 143, "{status}");
    s.f.assert_valid();
}

#[test]
fn a_killed_driver_is_restarted_and_no_turn_runs_or_is_charged_twice() {
    let mut s = Supervised::new(3, &[]);
    let runs = s.file("runs");
    s.claude(&format!(
        "echo run >> {}\nsleep 1\n{APPEND}",
        runs.display()
    ));
    let start = s.spawn_start(&["--provider", "claude", "--restart-backoff", "0"]);
    wait_for(Duration::from_secs(20), "the first turn", || runs.exists());
    let driver = s.service_status()["driver_pid"].as_i64().unwrap() as i32;
    // SAFETY: kill(2) on the driver the supervisor this test holds started.
    unsafe { libc::kill(driver, libc::SIGKILL) };

    let (code, stderr) = s.finished(start, Duration::from_secs(60));
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("killed by signal 9"), "{stderr}");
    assert!(stderr.contains("recovered an open dispatch"), "{stderr}");
    // The orphaned turn finished and was settled, not run again.
    assert_eq!(iteration_numbers(&s.f.dir), vec![1, 2, 3]);
    assert_eq!(
        std::fs::read_to_string(&runs).unwrap().lines().count(),
        3,
        "one run per iteration"
    );
    s.assert_nothing_twice();
    s.assert_nothing_open();
    let status = s.service_status();
    assert_eq!(status["supervisor"]["restarts"], 1, "{status}");
    assert_eq!(status["supervisor"]["ended"]["code"], 0, "{status}");
    s.f.assert_valid();
}

#[test]
fn a_driver_that_keeps_dying_is_restarted_up_to_the_cap_then_exits_12() {
    let s = Supervised::new(10, &[]);
    // Each turn's agent kills its driver.
    s.claude("kill -9 $PPID");
    let (code, stderr) = s.start(&[
        "--provider",
        "claude",
        "--max-restarts",
        "2",
        "--restart-backoff",
        "0",
    ]);
    assert_eq!(code, 12, "{stderr}");
    assert!(stderr.contains("restart cap (2)"), "{stderr}");
    assert_eq!(s.service_status()["supervisor"]["restarts"], 2);
    // Told as they happened: the start, each restart, the give-up.
    let audit = std::fs::read_to_string(s.f.dir.join("notify_audit.jsonl")).unwrap();
    let told: Vec<&str> = audit
        .lines()
        .filter(|line| line.contains("\"supervisor-"))
        .collect();
    assert_eq!(told.len(), 4, "{audit}");
    assert!(told[3].contains("restart cap (2)"), "{}", told[3]);
    s.assert_nothing_twice();
    s.f.assert_valid();
}

#[test]
fn an_empty_failover_order_exits_11_and_several_primaries_without_quota_waits_2() {
    let s = Supervised::new(10, &[]);
    let failover = s.f.dir.join("failover.json");
    std::fs::write(&failover, r#"{"primary_order": []}"#).unwrap();
    let (code, stderr) = s.start(&[]);
    assert_eq!(code, 11, "{stderr}");
    assert!(stderr.contains("empty"), "{stderr}");
    let (code, stderr) = s.start(&["--detach"]);
    assert_eq!(code, 11, "{stderr}");
    std::fs::write(
        &failover,
        r#"{"primary_order": ["claude", "codex"], "max_quota_waits_per_primary": 0}"#,
    )
    .unwrap();
    let (code, stderr) = s.start(&[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("max_quota_waits_per_primary"), "{stderr}");
    // Nothing started: no supervisor record, no driver.
    assert_eq!(s.service_status()["supervisor"], Value::Null);
}

#[test]
fn a_quarantined_candidate_stops_the_supervisor_without_a_restart() {
    let s = Supervised::new(5, &["--goal-focus-mode", "enforce"]);
    std::fs::create_dir_all(s.f.dir.join("notes")).unwrap();
    std::fs::write(s.f.dir.join("notes/b.md"), "lemma B holds\n").unwrap();
    let mut stage: Vec<&str> = common::STAGE_BY_HAND.to_vec();
    stage.extend([
        "--claim-id",
        "c1",
        "--claim-evidence",
        "c1=notes/b.md",
        "--dir",
        s.f.d(),
        "--json",
    ]);
    let staged: Value =
        serde_json::from_slice(&s.f.loopx().args(&stage).output().unwrap().stdout).unwrap();
    let fingerprint = staged["candidate_fingerprint"].as_str().unwrap().to_owned();
    s.f.loopx()
        .args(["goal-focus", "quarantine", "--dir", s.f.d()])
        .args([
            "--candidate-fingerprint",
            &fingerprint,
            "--reason",
            "cleanup failed",
        ])
        .assert()
        .success();
    let agent = s.script("agent", APPEND);
    let (code, stderr) = s.start(&["--cmd", &agent, "--restart-backoff", "0"]);
    assert_eq!(code, 14, "{stderr}");
    assert!(stderr.contains("quarantined"), "{stderr}");
    let status = s.service_status();
    assert_eq!(status["supervisor"]["restarts"], 0, "{status}");
    assert_eq!(
        common::journal_events(&s.f.dir, "supervisor.drive_started").len(),
        1,
        "the driver ran once"
    );
}

#[test]
fn drain_stops_after_the_current_turn_with_the_turn_settled() {
    let s = Supervised::new(10, &[]);
    let started = slow_agent(&s, 2.0);
    s.json_ok(&s.start_words(&["--provider", "claude", "--detach"]));
    wait_for(Duration::from_secs(20), "the first turn", || {
        started.exists()
    });
    let agent = pid_in(&started);
    // Its log, followed from here.
    let follower = s
        .command(&["logs", "--dir", s.f.d(), "--follow"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let (ok, drained, stderr) = s.f.run_in_dir(&["drain"]);
    assert!(ok, "{stderr}");
    assert_eq!(drained["already_requested"], false);
    // The turn in progress is not cut short.
    assert!(alive(agent), "drain ended the running turn");
    wait_for(Duration::from_secs(30), "the supervisor's end", || {
        s.service_status()["running"] == false
    });
    let status = s.service_status();
    assert_eq!(status["supervisor"]["ended"]["code"], 0, "{status}");
    assert!(
        status["supervisor"]["ended"]["reason"]
            .as_str()
            .unwrap()
            .contains("drained"),
        "{status}"
    );
    // That turn and no other: settled, advanced, nothing left open.
    assert_eq!(iteration_numbers(&s.f.dir), vec![1]);
    assert_eq!(s.settled_outcomes(), vec![Value::from("advanced")]);
    s.assert_nothing_twice();
    s.assert_nothing_open();
    // The follower looks twice a second.
    std::thread::sleep(Duration::from_millis(1200));
    // SAFETY: kill(2) on the follower this test started and holds.
    unsafe { libc::kill(follower.id() as i32, libc::SIGINT) };
    let followed = follower.wait_with_output().unwrap();
    let followed = String::from_utf8_lossy(&followed.stdout);
    assert!(
        followed.contains("started") && followed.contains("drained"),
        "{followed}"
    );
    let log = s.json_ok(&["logs", "--dir", s.f.d()]);
    assert!(log["text"].as_str().unwrap().contains("drained"), "{log}");
    // Nothing left to drain.
    let (ok, _, stderr) = s.f.run_in_dir(&["drain"]);
    assert!(!ok && stderr.contains("no supervisor runs"), "{stderr}");
    s.f.assert_valid();
}

#[test]
fn failover_json_gives_the_driver_its_order_and_every_provider_excluded_exits_11() {
    let s = Supervised::new(2, &[]);
    std::fs::write(
        s.f.dir.join("failover.json"),
        r#"{"primary_order": ["claude", "codex"], "max_quota_waits_per_primary": 1}"#,
    )
    .unwrap();
    let signed_out = "echo 'Error: 401 Unauthorized. Please sign in again.'; exit 1";
    s.claude(signed_out);
    s.script(
        "codex",
        &format!("[ \"$1\" = --version ] && exit 0\n{APPEND}"),
    );
    let (code, stderr) = s.start(&[]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("from failover.json"), "{stderr}");
    assert_eq!(iteration_numbers(&s.f.dir), vec![1, 2]);
    let providers: Vec<Value> = common::journal_events(&s.f.dir, "driver.settled")
        .into_iter()
        .map(|event| event["settlement"]["provider"].clone())
        .collect();
    assert_eq!(providers, ["claude", "codex", "codex"].map(Value::from));

    let s = Supervised::new(2, &[]);
    s.claude(signed_out);
    s.script(
        "codex",
        &format!("[ \"$1\" = --version ] && exit 0\n{signed_out}"),
    );
    let (code, stderr) = s.start(&["--provider", "claude,codex"]);
    assert_eq!(code, 11, "{stderr}");
    assert!(stderr.contains("excluded every provider"), "{stderr}");
    assert_eq!(s.service_status()["supervisor"]["restarts"], 0);
}

#[test]
fn a_killed_supervisor_takes_its_driver_down_and_a_new_start_resumes() {
    let mut s = Supervised::new(2, &[]);
    let (first, agent, driver) = s.start_in_a_long_turn();
    s.children[first].kill().unwrap();
    let _ = s.finished(first, Duration::from_secs(5));
    // The kernel told the driver: it ended its turn and settled it.
    wait_for(Duration::from_secs(20), "the driver's end", || {
        !alive(driver) && !alive(agent)
    });
    assert_eq!(s.settled_outcomes(), vec![Value::from("interrupted")]);
    assert_eq!(s.service_status()["running"], false);

    s.claude(APPEND);
    let (code, stderr) = s.start(&["--provider", "claude"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(iteration_numbers(&s.f.dir), vec![1, 2]);
    s.assert_nothing_twice();
    s.assert_nothing_open();
    s.f.assert_valid();
}

#[test]
fn ctrl_c_twice_reaches_the_driver_which_ends_its_turn_at_once() {
    let mut s = Supervised::new(5, &[]);
    let (start, agent, driver) = s.start_in_a_long_turn();
    let supervisor = s.children[start].id() as i32;
    for _ in 0..2 {
        // SAFETY: kill(2) on the supervisor this test started and holds.
        unsafe { libc::kill(supervisor, libc::SIGINT) };
        std::thread::sleep(Duration::from_millis(300));
    }
    let (code, stderr) = s.finished(start, Duration::from_secs(10));
    assert_eq!(code, 130, "{stderr}");
    assert!(stderr.contains("stopped by SIGINT"), "{stderr}");
    assert!(!alive(agent) && !alive(driver), "{stderr}");
    assert_eq!(s.settled_outcomes(), vec![Value::from("interrupted")]);
    s.assert_nothing_open();
}

#[test]
fn replace_stops_the_running_supervisor_settling_its_turn_then_starts_another() {
    let s = Supervised::new(10, &[]);
    let started = slow_agent(&s, 1000.0);
    let old = s.json_ok(&s.start_words(&["--provider", "claude", "--detach"]))["pid"]
        .as_i64()
        .unwrap() as i32;
    wait_for(Duration::from_secs(20), "the first turn", || {
        started.exists()
    });
    let agent = pid_in(&started);
    std::fs::remove_file(&started).unwrap();
    let mut replace = s.start_words(&["--provider", "claude", "--detach"]);
    replace[0] = "replace";
    let new = s.json_ok(&replace)["pid"].as_i64().unwrap() as i32;
    assert_ne!(new, old);
    assert!(
        !alive(old) && !alive(agent),
        "the old supervisor or its turn lives on"
    );
    assert_eq!(s.settled_outcomes(), vec![Value::from("interrupted")]);
    wait_for(Duration::from_secs(20), "the new supervisor's turn", || {
        started.exists()
    });
    let status = s.service_status();
    assert_eq!(status["running"], true, "{status}");
    assert_eq!(status["supervisor"]["pid"].as_i64(), Some(i64::from(new)));
    s.assert_nothing_twice();
}

#[test]
fn the_systemd_backend_is_refused_without_a_user_manager_showing_the_unit() {
    let answers = Command::new("systemctl")
        .args(["--user", "show-environment"])
        .output()
        .is_ok_and(|o| o.status.success());
    if answers {
        // It would start a real unit here.
        return common::skipped_without("a host without a systemd user manager");
    }
    let s = Supervised::new(10, &[]);
    let output = s
        .command(&s.start_words(&["--provider", "claude", "--backend", "systemd", "--json"]))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let refused: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("no systemd user manager answers"),
        "{refused}"
    );
    let argv: Vec<&str> = refused["unit"]["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|word| word.as_str().unwrap())
        .collect();
    let name = refused["unit"]["name"].as_str().unwrap();
    assert!(name.starts_with("loopx-supervisor-") && name.ends_with(".service"));
    assert_eq!(argv[..2], ["systemd-run", "--user"]);
    assert!(
        argv.contains(&format!("--unit={name}").as_str()),
        "{argv:?}"
    );
    assert!(
        argv.contains(&"--property=KillMode=control-group"),
        "{argv:?}"
    );
    // The unit runs this same supervisor in the foreground, recording its backend.
    let command = argv.split(|word| *word == "--").nth(1).unwrap();
    assert!(command[0].ends_with("loopx"), "{command:?}");
    assert_eq!(command[1..4], ["start", "--started-as", "systemd"]);
    assert!(command.contains(&s.f.d()) && command.contains(&"claude"));
    // Nothing was started.
    assert_eq!(s.service_status()["supervisor"], Value::Null);
}

#[test]
fn the_store_reaches_the_driver_in_its_environment_not_on_its_command_line() {
    let s = Supervised::new(2, &[]);
    // Named explicitly, as a PostgreSQL URL with its password would be.
    let store = format!("sqlite:{}", s.f.dir.join("loopx.sqlite").display());
    let (seen, env) = (s.file("driver-cmdline"), s.file("agent-store"));
    s.claude(&format!(
        "tr '\\0' ' ' < /proc/$PPID/cmdline > {}\necho \"$LOOPX_STORE\" > {}\n{APPEND}",
        seen.display(),
        env.display()
    ));
    let mut words = s.start_words(&["--provider", "claude"]);
    words.splice(0..0, ["--store", store.as_str()]);
    let output = s.command(&words).output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let cmdline = std::fs::read_to_string(&seen).unwrap();
    assert!(
        cmdline.contains(" drive ") && !cmdline.contains("sqlite:"),
        "{cmdline}"
    );
    assert_eq!(std::fs::read_to_string(&env).unwrap().trim(), store);
    assert_eq!(iteration_numbers(&s.f.dir), vec![1, 2]);
}

#[test]
fn a_driver_run_by_hand_is_named_and_start_exits_10() {
    let mut s = Supervised::new(10, &[]);
    let started = slow_agent(&s, 1000.0);
    let words = [
        "drive",
        "--dir",
        s.f.d(),
        "--root",
        s.root.to_str().unwrap(),
    ];
    let by_hand = s
        .command(&words)
        .args(["--provider", "claude"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = by_hand.id();
    s.children.push(by_hand);
    wait_for(Duration::from_secs(20), "the turn", || started.exists());
    for extra in [&[][..], &["--detach"]] {
        let mut flags = vec!["--provider", "claude"];
        flags.extend(extra);
        let (code, stderr) = s.start(&flags);
        assert_eq!(code, 10, "{stderr}");
        assert!(
            stderr.contains(&format!("a driver (pid {pid})")),
            "{stderr}"
        );
    }
    assert_eq!(s.service_status()["supervisor"], Value::Null);
    // `stop` stops a driver run by hand too.
    let stopped = s.json_ok(&["stop", "--dir", s.f.d()]);
    assert_eq!(
        stopped["driver_pid"].as_u64(),
        Some(u64::from(pid)),
        "{stopped}"
    );
    assert!(!alive(pid as i32));
}

#[test]
fn a_recovery_that_fails_closed_is_not_restarted_and_exits_16() {
    let s = Supervised::new(10, &[]);
    common::git(&s.root, &["init", "-q"]);
    common::git(&s.root, &["commit", "-q", "--allow-empty", "-m", "start"]);
    // The turn changes the workspace, records nothing, and its driver dies.
    s.claude("echo half-done > work.txt\nkill -9 $PPID");
    let (code, stderr) = s.start(&["--provider", "claude", "--restart-backoff", "0"]);
    assert_eq!(code, 16, "{stderr}");
    assert!(stderr.contains("a person must look"), "{stderr}");
    // Restarted once after the kill; the restart found it needs a person.
    let status = s.service_status();
    assert_eq!(status["supervisor"]["restarts"], 1, "{status}");
    assert_eq!(
        s.f.json(&["recover", "--dir", s.f.d()])["plan"]["action"],
        "fail_closed"
    );
}

#[test]
fn every_supervisor_command_has_help() {
    let f = Fixture::new();
    for command in [
        "start",
        "replace",
        "stop",
        "drain",
        "service-status",
        "logs",
    ] {
        let output = f.loopx().args([command, "--help"]).output().unwrap();
        assert!(output.status.success(), "{command} --help failed");
        assert!(!output.stdout.is_empty());
    }
}
