//! `loopx serve`: the HTTP JSON API and the server-rendered dashboard, over
//! the same owners as the CLI.
//!
//! Loopback only unless `--allow-remote`. Every request must name an
//! expected Host (so a rebinding DNS name cannot reach the API); every write
//! needs the per-server token and, from a browser, a same-origin Origin. The
//! store stays the authority: forms send intents (with an operation id and
//! the revision they were read at), never state.

mod api;
mod page;

use crate::loop_dir::LoopDir;
use anyhow::{bail, Context as _, Result};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use loopx_store::sqlite::Access;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

pub struct App {
    pub dir: PathBuf,
    pub token: String,
    /// Host header values this server answers to.
    pub hosts: Vec<String>,
    pub remote: bool,
}

impl App {
    /// Open the loop for one request.
    pub fn open(&self, access: Access) -> Result<LoopDir> {
        LoopDir::open(&self.dir, access)
    }
}

/// 32 hex digits from the kernel's random source.
fn token() -> Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

pub struct Options {
    pub dir: PathBuf,
    pub addr: SocketAddr,
    pub allow_remote: bool,
    pub token: Option<String>,
    pub open_browser: bool,
}

pub fn serve(options: Options) -> Result<()> {
    // Fail before binding if there is no loop.
    LoopDir::open(&options.dir, Access::ReadOnly)?;
    let loopback = options.addr.ip().is_loopback();
    if !loopback && !options.allow_remote {
        bail!("{} is not a loopback address: pass --allow-remote (and keep the printed token secret) to serve beyond this machine", options.addr);
    }
    let token = match options.token {
        Some(token) if token.len() < 16 => bail!("--token must be at least 16 characters"),
        Some(token) => token,
        None => token()?,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(options.addr)
            .await
            .with_context(|| format!("cannot listen on {}", options.addr))?;
        let addr = listener.local_addr()?;
        let port = addr.port();
        let mut hosts = vec![
            format!("127.0.0.1:{port}"),
            format!("localhost:{port}"),
            format!("[::1]:{port}"),
        ];
        hosts.push(addr.to_string());
        let app = Arc::new(App {
            dir: options.dir.canonicalize()?,
            token: token.clone(),
            hosts,
            remote: !loopback,
        });
        let url = if loopback {
            format!("http://{addr}/")
        } else {
            format!("http://{addr}/?token={token}")
        };
        // The first line is for people and for tests that need the port.
        println!("loopx serve: {url} (token {token})");
        if options.open_browser {
            open_browser(&url);
        }
        axum::serve(listener, router(app))
            .with_graceful_shutdown(async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await?;
        Ok(())
    })
}

fn open_browser(url: &str) {
    for opener in ["xdg-open", "open"] {
        if crate::drive::which(opener).is_some() {
            let _ = std::process::Command::new(opener)
                .arg(url)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn();
            return;
        }
    }
    eprintln!("loopx dashboard: no browser opener found; open {url} yourself");
}

pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/", get(page::overview))
        .route("/fragment/live", get(page::live))
        .route("/iterations/{n}", get(page::iteration))
        .route("/api/status", get(api::status))
        .route("/api/goal", get(api::goal))
        .route("/api/should-run", get(api::should_run))
        .route("/api/iterations", get(api::iterations))
        .route("/api/iterations/{n}", get(api::iteration))
        .route(
            "/api/outcomes/{id}/requirements",
            post(api::add_requirement),
        )
        .route("/api/objective/revise", post(api::revise_objective))
        .layer(axum::middleware::from_fn_with_state(app.clone(), guard))
        .with_state(app)
}

fn refuse(status: StatusCode, message: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        serde_json::json!({"status": "failed", "error": message}).to_string(),
    )
        .into_response()
}

fn header_value<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn query_token(request: &Request) -> Option<String> {
    request
        .uri()
        .query()?
        .split('&')
        .find_map(|pair| pair.strip_prefix("token="))
        .map(str::to_owned)
}

/// Host, token and Origin checks, before any handler runs.
async fn guard(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    let host = header_value(headers, "host").unwrap_or("");
    if !app.remote && !app.hosts.iter().any(|h| h == host) {
        return refuse(
            StatusCode::MISDIRECTED_REQUEST,
            "unexpected Host header: this server answers only to its loopback address",
        );
    }
    let token = header_value(headers, "x-loopx-token")
        .map(str::to_owned)
        .or_else(|| query_token(&request));
    let token_ok = token.as_deref() == Some(app.token.as_str());
    let writes = request.method() != Method::GET && request.method() != Method::HEAD;
    if (writes || app.remote) && !token_ok {
        return refuse(StatusCode::FORBIDDEN, "missing or wrong token: send the token loopx serve printed in the X-Loopx-Token header");
    }
    if writes {
        let same_origin = format!("http://{host}");
        match header_value(headers, "origin") {
            Some(origin) if origin != same_origin => {
                return refuse(
                    StatusCode::FORBIDDEN,
                    "cross-origin write refused (Origin does not match this server)",
                )
            }
            _ => {}
        }
        if header_value(headers, "sec-fetch-site").is_some_and(|site| site == "cross-site") {
            return refuse(StatusCode::FORBIDDEN, "cross-site write refused");
        }
    }
    next.run(request).await
}
