//! `loopx drive` consults should-run: when the frontier holds nothing this
//! driver may run (every todo leased to another agent, or deferred), it
//! starts no turn, says why in `status`, and resumes when another process
//! changes the state.

mod common;

use common::{iteration_numbers, Fixture};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Drive {
    f: Fixture,
    root: PathBuf,
    agent: PathBuf,
}

impl Drive {
    /// A loop with one todo `t1`, and an agent that records one iteration.
    fn new() -> Self {
        let f = Fixture::new();
        f.init(5, &[]);
        let root = f.temp.path().join("project");
        std::fs::create_dir_all(&root).unwrap();
        let agent = f.temp.path().join("agent");
        std::fs::write(
            &agent,
            "#!/bin/sh\nloopx append-iteration --mode bounded-research --objective turn --decision continue >/dev/null\n",
        )
        .unwrap();
        std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
        let d = Drive { f, root, agent };
        d.todo(&["add", "--title", "the only work"], None);
        d
    }

    /// `loopx todo ARGS`, as `agent` (the owner without one); must succeed.
    fn todo(&self, args: &[&str], agent: Option<&str>) {
        let mut command = self.f.loopx();
        command.arg("todo").args(args).args(["--dir", self.f.d()]);
        if let Some(agent) = agent {
            command.args(["--agent-id", agent]);
        }
        command.assert().success();
    }

    fn start(&self) -> Child {
        Command::new(common::loopx_path())
            .args(["drive", "--dir", self.f.d(), "--root"])
            .arg(&self.root)
            .arg("--cmd")
            .arg(&self.agent)
            .args(["--max-iterations", "1"])
            .env("LOOPX_REGISTRY_DIR", &self.f.registry)
            .env_remove("LOOPX_DIR")
            .env_remove("AUTOLOOP_DRIVER")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    }

    /// Wait until `status` shows the driver waiting for a reason that
    /// contains `why`; the status text line and JSON reason.
    fn wait_for_status(&self, why: &str) -> (String, String) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let json = self.f.json(&["status", "--dir", self.f.d()]);
            let reason = json["driver"]["waiting"]["reason"]
                .as_str()
                .unwrap_or("")
                .to_owned();
            if reason.contains(why) {
                let output = self
                    .f
                    .loopx()
                    .args(["status", "--dir", self.f.d()])
                    .output()
                    .unwrap();
                return (String::from_utf8_lossy(&output.stdout).into_owned(), reason);
            }
            assert!(
                Instant::now() < deadline,
                "status never showed the driver waiting for {why:?}: {json}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Driver journal entries of `kind`.
    fn driver_events(&self, kind: &str) -> usize {
        let conn = rusqlite::Connection::open_with_flags(
            self.f.dir.join("loopx.sqlite"),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .unwrap();
        conn.query_row(
            "SELECT count(*) FROM journal WHERE stream = 'driver' AND kind = ?1",
            [kind],
            |row| row.get::<_, i64>(0),
        )
        .unwrap() as usize
    }

    /// The driver ends by itself within a bound; its exit code.
    fn finish(&self, mut child: Child) -> i32 {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status.code().unwrap_or(-1);
            }
            if Instant::now() > deadline {
                child.kill().unwrap();
                panic!("drive did not resume and finish after the state changed");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// While waiting, the driver started nothing: no intent, no iteration.
    fn assert_no_turn_started(&self) {
        assert_eq!(self.driver_events("driver.intended"), 0);
        assert!(iteration_numbers(&self.f.dir).is_empty());
    }
}

#[test]
fn every_todo_leased_to_another_agent_holds_the_driver_until_the_lease_is_released() {
    let d = Drive::new();
    d.todo(&["claim", "t1"], Some("other"));
    let child = d.start();
    let (text, reason) = d.wait_for_status("every open todo is leased");
    assert!(
        text.contains("waiting: every open todo is leased"),
        "status text does not say why: {text}"
    );
    assert!(reason.starts_with("waiting: "), "{reason}");
    // Still waiting a while later, having started nothing.
    std::thread::sleep(Duration::from_millis(1500));
    d.assert_no_turn_started();
    d.todo(&["release", "t1"], Some("other"));
    assert_eq!(d.finish(child), 0);
    assert_eq!(iteration_numbers(&d.f.dir), vec![1]);
    assert_eq!(d.driver_events("driver.intended"), 1);
    d.f.assert_valid();
}

#[test]
fn every_todo_deferred_holds_the_driver_until_there_is_work() {
    let d = Drive::new();
    d.todo(&["defer", "t1", "--for", "2h"], Some("other"));
    let child = d.start();
    let (text, _) = d.wait_for_status("every open todo is deferred");
    assert!(
        text.contains("waiting: every open todo is deferred"),
        "status text does not say why: {text}"
    );
    std::thread::sleep(Duration::from_millis(1500));
    d.assert_no_turn_started();
    d.todo(&["add", "--title", "work that can run now"], None);
    assert_eq!(d.finish(child), 0);
    assert_eq!(iteration_numbers(&d.f.dir), vec![1]);
    d.f.assert_valid();
}

#[test]
fn a_waiting_driver_stops_when_the_arbiter_says_done() {
    let d = Drive::new();
    d.todo(&["claim", "t1"], Some("other"));
    let child = d.start();
    d.wait_for_status("every open todo is leased");
    std::fs::write(d.f.dir.join("STOP_REQUESTED"), "").unwrap();
    assert_eq!(d.finish(child), 0);
    d.assert_no_turn_started();
}
