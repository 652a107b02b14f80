//! A throwaway PostgreSQL server for tests: one per test binary, on
//! loopback, in a temporary data directory, and a fresh database per test.
//!
//! Owns finding the server binaries (`LOOPX_PG_BIN`, else `pg_config
//! --bindir`, else `/usr/lib/postgresql/*/bin`), running them as an
//! unprivileged user when the tests run as root (`runuser -u postgres`,
//! since `initdb` refuses root), and stopping the server when the test
//! process ends (a watchdog shell waits for this process to exit, so a
//! panic or an abort stops it too). It owns nothing about loopx.
//!
//! Without the binaries, `database()` returns `None` and the PostgreSQL half
//! of a test is skipped with a note on stderr, unless `LOOPX_PG_REQUIRED=1`
//! (CI sets it), which turns the absence into a failure.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

/// The password every test URL carries, so that tests can assert it never
/// shows (the server trusts loopback, so it is never checked).
pub const PASSWORD: &str = "pw-s3cret-Zq9";

pub struct Server {
    bin: PathBuf,
    port: u16,
    root: PathBuf,
}

static SERVER: OnceLock<Option<Server>> = OnceLock::new();

/// A fresh, empty database on the shared server, as a URL with a password,
/// or `None` when the server binaries are not installed.
pub fn database() -> Option<String> {
    let server = SERVER.get_or_init(start).as_ref()?;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let name = format!(
        "t{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    );
    let status = Command::new(server.bin.join("createdb"))
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &server.port.to_string(),
            "-U",
            "postgres",
            &name,
        ])
        .status()
        .expect("run createdb");
    assert!(status.success(), "createdb {name} failed");
    Some(server.url(&name))
}

/// The shared server, if there is one (for tests that stop and start it).
pub fn server() -> Option<&'static Server> {
    SERVER.get_or_init(start).as_ref()
}

impl Server {
    pub fn url(&self, database: &str) -> String {
        format!(
            "postgres://postgres:{PASSWORD}@127.0.0.1:{}/{database}",
            self.port
        )
    }

    /// Run `sql` on the database `url` with `psql`; must succeed.
    pub fn psql(&self, url: &str, sql: &str) {
        let status = Command::new(self.bin.join("psql"))
            .args(["-q", "-v", "ON_ERROR_STOP=1", url, "-c", sql])
            .stdout(Stdio::null())
            .status()
            .expect("run psql");
        assert!(status.success(), "psql {sql:?} failed");
    }

    /// Run the query `sql` on the database `url` with `psql`; its rows,
    /// one a line, fields separated by `|`.
    pub fn query(&self, url: &str, sql: &str) -> String {
        let out = Command::new(self.bin.join("psql"))
            .args(["-q", "-At", "-v", "ON_ERROR_STOP=1", url, "-c", sql])
            .output()
            .expect("run psql");
        assert!(out.status.success(), "psql {sql:?} failed");
        String::from_utf8(out.stdout).expect("psql prints UTF-8")
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `pg_ctl stop -m fast` / `start`: for the restart-mid-run fault.
    pub fn stop(&self) {
        assert!(self.pg_ctl(&["-m", "fast", "-w", "stop"]).success());
    }

    pub fn start(&self) {
        assert!(self
            .pg_ctl(&["-w", "-l", "log", "start", "-o", &self.options()])
            .success());
    }

    fn options(&self) -> String {
        format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200",
            self.port,
            self.root.display()
        )
    }

    fn pg_ctl(&self, args: &[&str]) -> std::process::ExitStatus {
        let mut all = vec!["-D".to_owned(), "data".to_owned()];
        all.extend(args.iter().map(|a| a.to_string()));
        as_server_user(&self.bin.join("pg_ctl"), &all, &self.root)
            .stdout(Stdio::null())
            .status()
            .expect("run pg_ctl")
    }
}

fn start() -> Option<Server> {
    let Some(bin) = binaries() else {
        assert!(
            std::env::var("LOOPX_PG_REQUIRED").as_deref() != Ok("1"),
            "LOOPX_PG_REQUIRED=1 but no PostgreSQL server binaries were found (set LOOPX_PG_BIN)"
        );
        eprintln!(
            "note: no PostgreSQL server binaries (set LOOPX_PG_BIN); skipping the PostgreSQL half"
        );
        return None;
    };
    let root = std::env::temp_dir().join(format!("loopx-pg-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).expect("create the server directory");
    if is_root() {
        let status = Command::new("chown")
            .args(["postgres:", &root.display().to_string()])
            .status()
            .expect("chown");
        assert!(status.success());
    }
    let status = as_server_user(
        &bin.join("initdb"),
        &["-D", "data", "-A", "trust", "-U", "postgres", "--no-sync"].map(String::from),
        &root,
    )
    .stdout(Stdio::null())
    .status()
    .expect("run initdb");
    assert!(status.success(), "initdb failed in {}", root.display());
    let port = free_port();
    let server = Server { bin, port, root };
    server.start();
    // Stop the server and remove its files when this test process ends,
    // however it ends.
    let watchdog = format!(
        "while kill -0 {pid} 2>/dev/null; do sleep 0.5; done; {stop}; rm -rf '{root}'",
        pid = std::process::id(),
        stop = stop_command(&server),
        root = server.root.display()
    );
    // Deliberately never waited for: it outlives this process.
    #[allow(clippy::zombie_processes)]
    let _watchdog = Command::new("sh")
        .args(["-c", &watchdog])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the server watchdog");
    Some(server)
}

fn stop_command(server: &Server) -> String {
    let pg_ctl = server.bin.join("pg_ctl");
    let data = server.root.join("data");
    let inner = format!(
        "'{}' -D '{}' -m immediate stop",
        pg_ctl.display(),
        data.display()
    );
    if is_root() {
        format!("runuser -u postgres -- {inner}")
    } else {
        inner
    }
}

fn as_server_user(program: &Path, args: &[String], dir: &Path) -> Command {
    let mut command = if is_root() {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(program);
        command
    } else {
        Command::new(program)
    };
    command.args(args).current_dir(dir);
    command
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

fn binaries() -> Option<PathBuf> {
    if let Ok(dir) = std::env::var("LOOPX_PG_BIN") {
        return Some(PathBuf::from(dir));
    }
    let has_initdb = |dir: &Path| dir.join("initdb").is_file().then(|| dir.to_owned());
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output() {
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if let Some(dir) = has_initdb(&dir) {
            return Some(dir);
        }
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|entry| has_initdb(&entry.ok()?.path().join("bin")))
        .collect();
    found.sort();
    found.pop()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port()
}
