//! `loopx-bench views`: does what the dashboard polls stay flat as a loop
//! runs for thousands of turns?
//!
//! For each size (`--sizes`, default 20, 2,000 and 20,000 turns) a loop is
//! seeded in process through the owners the driver uses: per turn the
//! driver's intent, the agent's iteration record naming the dispatch, and
//! the settlement with its usage ([`seed_turns`], `synchronous=OFF`). A real
//! `loopx serve` then answers, over loopback, each request the page and a
//! script make, timed from connect to the last byte and alternating with
//! `/api/status` (one snapshot read: the floor every answer pays). Reported:
//! the medians, each request's time at the largest size over its time at the
//! smallest (the target is independence: ≤ 1.3), and the bytes each answer
//! sends.
//!
//! What it is not: a load test (one request at a time), or a measure of the
//! goal's size (the seeded goal has no todos; `todos` measures those).

use std::fmt::Write as _;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use loopx_core::driver::classify::Usage;
use loopx_core::driver::{
    DriverOwner, DriverRequest, Intent, Settlement, TurnOutcome, Workspace, STREAM as DRIVER,
};
use loopx_core::ledger::budget::Budget;
use loopx_core::ledger::proof::NoFiles;
use loopx_core::ledger::vocabulary::{Decision, Mode};
use loopx_core::ledger::{
    InitLoop, IterationReport, LedgerContext, LedgerOwner, LedgerRequest, STREAM as LEDGER,
};
use loopx_core::operation::OperationId;
use loopx_store::sqlite::{Access, Durability, SqliteStore};
use loopx_store::Authority;

use crate::measure::Summary;
use crate::{thousands, Result};

/// The target: at the largest size, at most this many times the smallest.
pub const TARGET_RATIO: f64 = 1.3;

/// What is timed: the page's live refresh and the APIs a page or a script
/// polls, and iteration 1 (the oldest: the far end of the journal).
const REQUESTS: [&str; 6] = [
    "/fragment/live",
    "/api/turns",
    "/api/cost",
    "/api/iterations",
    "/api/iterations/1",
    "/api/health",
];

/// The floor every request is timed against.
const FLOOR: &str = "/api/status";

pub struct Options<'a> {
    pub loopx: &'a Path,
    pub sizes: &'a [u64],
    pub runs: usize,
}

pub fn run(options: &Options<'_>, work: &Path) -> Result<String> {
    std::fs::create_dir_all(work)?;
    // (request, size, median ms, floor median ms, bytes)
    let mut measured: Vec<(&str, u64, f64, f64, usize)> = Vec::new();
    for &turns in options.sizes {
        let dir = work.join(format!("turns-{turns}"));
        eprintln!(
            "loopx-bench: views: seeding {turns} turns in {}",
            dir.display()
        );
        let started = Instant::now();
        seed_turns(&dir, turns)?;
        eprintln!(
            "loopx-bench: views: seeded in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        let server = Server::start(options.loopx, &dir)?;
        for request in REQUESTS {
            // Untimed: the first answer warms the server's caches.
            server.get(request)?;
            server.get(FLOOR)?;
            let mut timed = Vec::new();
            let mut floor = Vec::new();
            let mut bytes = 0;
            for _ in 0..options.runs {
                let (took, body) = server.get(request)?;
                timed.push(took);
                bytes = body;
                floor.push(server.get(FLOOR)?.0);
            }
            measured.push((
                request,
                turns,
                Summary::of(&timed).median_ms,
                Summary::of(&floor).median_ms,
                bytes,
            ));
        }
    }
    let mut out = String::from(
        "| request | turns | median ms | `/api/status` ms (same run) | bytes |\n|---|---:|---:|---:|---:|\n",
    );
    for (request, turns, ms, floor, bytes) in &measured {
        let _ = writeln!(
            out,
            "| `{request}` | {} | {ms:.2} | {floor:.2} | {} |",
            thousands(*turns),
            thousands(*bytes as u64)
        );
    }
    // Each request's time at the largest size over its time at each
    // smaller one: the first pages hold fewer turns than a full page, the
    // later ones the same page, so the later ratios isolate the journal's
    // length.
    let mut sizes: Vec<u64> = options.sizes.to_vec();
    sizes.sort_unstable();
    let Some((&largest, smaller)) = sizes.split_last() else {
        return Ok(out);
    };
    let _ = write!(out, "\n| request |");
    for size in smaller {
        let _ = write!(
            out,
            " at {} / at {} turns |",
            thousands(largest),
            thousands(*size)
        );
    }
    let _ = writeln!(
        out,
        " target |\n|---|{}---:|",
        "---:|".repeat(smaller.len())
    );
    for request in REQUESTS {
        let at = |size: u64| {
            measured
                .iter()
                .find(|m| m.0 == request && m.1 == size)
                .map(|m| m.2)
        };
        let _ = write!(out, "| `{request}` |");
        for size in smaller {
            match (at(*size), at(largest)) {
                (Some(small), Some(large)) => {
                    let _ = write!(out, " {:.2} |", large / small);
                }
                _ => out.push_str(" - |"),
            }
        }
        let _ = writeln!(out, " ≤ {TARGET_RATIO} |");
    }
    Ok(out)
}

/// Create `dir` as a loop the driver ran for `turns` turns, each recording
/// one iteration and settling with its usage.
pub fn seed_turns(dir: &Path, turns: u64) -> Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    std::fs::create_dir_all(dir.join("proof_artifacts"))?;
    let database = dir.join("loopx.sqlite");
    let store = SqliteStore::open_with(&database, Access::Create, Durability::Unsafe)?;
    let authority = Authority::new(&store);
    let ledger = |op: &str, request: &LedgerRequest| -> Result<()> {
        let operation_id = OperationId::parse(op)?;
        let now = Timestamp::now();
        let context = LedgerContext {
            now,
            operation_id: &operation_id,
            files: &NoFiles,
        };
        authority
            .execute::<LedgerOwner>(LEDGER, &operation_id, request, &context, now)
            .map_err(|e| e.to_string())?;
        Ok(())
    };
    let driver = |op: &str, request: &DriverRequest| -> Result<()> {
        let operation_id = OperationId::parse(op)?;
        let now = Timestamp::now();
        authority
            .execute::<DriverOwner>(DRIVER, &operation_id, request, &now, now)
            .map_err(|e| e.to_string())?;
        Ok(())
    };
    ledger(
        "bench-init",
        &LedgerRequest::Init(InitLoop::new(
            "Benchmark fixture: a loop driven for many turns",
            "what the dashboard polls stays flat in the number of turns",
            Budget::iterations_only(turns + 1000),
        )),
    )?;
    for i in 1..=turns {
        let dispatch_id = format!("bench-{i:07}");
        let intent = Intent {
            dispatch_id: dispatch_id.clone(),
            iteration: i,
            provider: "claude".into(),
            prompt_digest: String::new(),
            ledger_revision: i,
            iterations_before: i - 1,
            workspace: Workspace {
                root: "/bench".into(),
                head: None,
                changes: None,
            },
            log: format!("driver_logs/{dispatch_id}.log"),
            started_at: Timestamp::now(),
        };
        driver(
            &format!("{dispatch_id}-intend"),
            &DriverRequest::Intend {
                intent: Box::new(intent),
            },
        )?;
        ledger(
            &format!("{dispatch_id}-record"),
            &LedgerRequest::AppendIteration(IterationReport {
                mode: Some(Mode::BoundedResearch),
                objective: format!("Turn {i}: narrow the regression window in the storage layer"),
                decision: Some(Decision::Continue),
                output: format!(
                    "Turn {i}: re-ran the suite and compared medians with the baseline."
                ),
                tokens: 12_000,
                usd: 0.0125,
                next_action: "repeat with a cold page cache".into(),
                executor_provider: "claude".into(),
                dispatch_id: dispatch_id.clone(),
                ..Default::default()
            }),
        )?;
        let usage = Usage {
            tokens: 12_000,
            usd: 0.0125,
            ..Usage::default()
        };
        driver(
            &format!("{dispatch_id}-settle"),
            &DriverRequest::Settle {
                settlement: Box::new(Settlement {
                    dispatch_id: dispatch_id.clone(),
                    iteration: i,
                    provider: "claude".into(),
                    outcome: TurnOutcome::Advanced,
                    exit_status: Some(0),
                    usage,
                    settled_at: Timestamp::now(),
                    note: String::new(),
                }),
            },
        )?;
    }
    drop(store);
    std::fs::File::open(&database)?.sync_all()?;
    Ok(())
}

/// A `loopx serve` on the loop, killed when dropped.
struct Server {
    child: Child,
    port: u16,
    token: String,
}

impl Server {
    fn start(loopx: &Path, dir: &Path) -> Result<Server> {
        let mut child = Command::new(loopx)
            .args(["serve", "--json", "--addr", "127.0.0.1:0", "--dir"])
            .arg(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let mut line = String::new();
        BufReader::new(child.stdout.take().ok_or("no stdout")?).read_line(&mut line)?;
        let start: serde_json::Value =
            serde_json::from_str(&line).map_err(|e| format!("loopx serve said {line:?}: {e}"))?;
        let port = start["port"].as_u64().ok_or("no port")? as u16;
        let token_file = start["token_file"].as_str().ok_or("no token file")?;
        let token = std::fs::read_to_string(token_file)?.trim().to_owned();
        Ok(Server { child, port, token })
    }

    /// GET `path`: how long from connect to the last byte, and the body's
    /// length. Anything but 200 is an error.
    fn get(&self, path: &str) -> Result<(Duration, usize)> {
        let started = Instant::now();
        let mut stream = TcpStream::connect(("127.0.0.1", self.port))?;
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nX-Loopx-Token: {}\r\nConnection: close\r\n\r\n",
            self.port, self.token
        )?;
        let mut reply = Vec::new();
        stream.read_to_end(&mut reply)?;
        let took = started.elapsed();
        let text = String::from_utf8_lossy(&reply);
        if !text.starts_with("HTTP/1.1 200") {
            return Err(format!("GET {path}: {}", text.lines().next().unwrap_or("")).into());
        }
        let body = text
            .split_once("\r\n\r\n")
            .map_or(0, |(_, body)| body.len());
        Ok((took, body))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
