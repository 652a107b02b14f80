//! serve and dashboard.

use super::Reply;
use anyhow::Result;
use clap::Args;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Where every command looks for a loop when told nowhere else.
const DEFAULT_DIR: &str = ".loopx";

/// Serve the HTTP JSON API and the web dashboard for the loop in --dir
/// (default: LOOPX_DIR, else `.loopx` when it exists here, as every other
/// command), or with --all (or where there is no loop to default to) for
/// every loop registered on this machine (`dashboard` also opens a
/// browser).
///
/// The all-loops page lists each loop `loopx init` created here, `loopx
/// drive` ran or `loopx arm` armed, one row each with its verdict, last
/// activity, iterations and cost, and serves each one's own
/// dashboard under /loops/<id>/, all behind one credential: the token in
/// serve.token beside the registry (not any loop's own). Registry files
/// and loop directories that are not this user's are never read.
///
/// Binds to loopback by default; any other address needs --allow-remote.
/// Every request, reads included, needs a credential: the token kept in the
/// loop's `serve.token` (mode 0600; made on first use, reused after; delete
/// it to rotate) in the X-Loopx-Token header, or the session cookie a
/// one-time login link sets (printed at start, single use, valid two
/// minutes; `dashboard` opens it). Writes from a browser must come from the
/// dashboard's own origin. The first stdout line names the URL and the
/// token file (with --json: one JSON object with url, port, token_file and
/// login_url), never the token.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The loop directory to serve (default: LOOPX_DIR, else `.loopx` when
    /// it exists); without any of them, every registered loop.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Every registered loop, even where LOOPX_DIR names one.
    #[arg(long, conflicts_with = "dir")]
    pub all: bool,
    #[command(flatten)]
    pub registry: super::hook::RegistryArgs,
    /// Address to listen on (port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:7878")]
    pub addr: SocketAddr,
    /// Allow a non-loopback address (plain HTTP: anyone on the path can
    /// read the traffic).
    #[arg(long)]
    pub allow_remote: bool,
    /// Use this token instead of the loop's serve.token (at least 16
    /// characters); no token file is read or written.
    #[arg(long, env = "LOOPX_SERVE_TOKEN")]
    pub token: Option<String>,
}

pub fn serve(
    args: &ServeArgs,
    open_browser: bool,
    json: bool,
    store: Option<&str>,
) -> Result<Reply> {
    crate::serve::serve(crate::serve::Options {
        // LOOPX_DIR and `.loopx` are looked for here rather than by clap
        // so that --all can override them while still refusing an
        // explicit --dir.
        dir: match args.all {
            true => None,
            false => args
                .dir
                .clone()
                .or_else(|| std::env::var_os(loopx_app::driver::env::LOOP_DIR).map(PathBuf::from))
                .or_else(|| Some(PathBuf::from(DEFAULT_DIR)).filter(|dir| dir.is_dir())),
        },
        registry_dir: args.registry.registry_dir.clone(),
        addr: args.addr,
        allow_remote: args.allow_remote,
        token: args.token.clone(),
        open_browser,
        json,
        store: store.map(str::to_owned),
    })?;
    Ok(Reply::ok(
        serde_json::json!({"status": "ok", "action": "serve"}),
        "",
    ))
}
