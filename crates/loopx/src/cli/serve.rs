//! serve and dashboard.

use super::ledger::DirArgs;
use super::Reply;
use anyhow::Result;
use clap::Args;
use std::net::SocketAddr;

/// Serve the HTTP JSON API and the web dashboard for a loop (`dashboard`
/// also opens a browser).
///
/// Binds to loopback by default; any other address needs --allow-remote.
/// Writes need the per-server token printed at start (the page embeds it)
/// and are refused from other origins.
#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub dir: DirArgs,
    /// Address to listen on (port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:7878")]
    pub addr: SocketAddr,
    /// Allow a non-loopback address; every request then needs the token.
    #[arg(long)]
    pub allow_remote: bool,
    /// Use this token instead of a random one (at least 16 characters).
    #[arg(long, env = "LOOPX_SERVE_TOKEN")]
    pub token: Option<String>,
}

pub fn serve(args: &ServeArgs, open_browser: bool) -> Result<Reply> {
    crate::serve::serve(crate::serve::Options {
        dir: args.dir.dir.clone(),
        addr: args.addr,
        allow_remote: args.allow_remote,
        token: args.token.clone(),
        open_browser,
    })?;
    Ok(Reply::ok(
        serde_json::json!({"status": "ok", "action": "serve"}),
        "",
    ))
}
