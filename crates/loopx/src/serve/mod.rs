//! `loopx serve`: the HTTP JSON API and the server-rendered dashboard, over
//! the same owners as the CLI, for one loop at `/`, or (`--all`) for every
//! loop in this user's registry: the list at `/` and each loop's own pages
//! under `/loops/<id>/`, all behind one credential.
//!
//! Loopback only unless `--allow-remote`. Every request must name an
//! expected Host (so a rebinding DNS name cannot reach the API) and carry a
//! credential, reads included, because another local user can connect to
//! loopback too: the token (from a 0600 `serve.token`: the loop's, or with
//! `--all` the one beside the registry) in the `X-Loopx-Token` header, or a
//! session cookie opened by a one-time login link (see [`auth`]). A write with a cookie must also come from this
//! origin. The store stays the authority: forms send intents (with an
//! operation id and the revision they were read at), never state.

mod api;
mod auth;
mod page;

use anyhow::{bail, Result};
use api::Failure;
use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Router;
use loopx_app::all_loops;
use loopx_app::loop_dir::{LoopDir, Place};
use loopx_app::registry::Registry;
use loopx_store::sqlite::Access;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// One loop the server shows.
pub struct App {
    pub dir: PathBuf,
    /// The store the loop's state is in, when not the directory's own file.
    store: Option<String>,
    /// The loop's store, opened once for the server's life: read-only at
    /// start, and read-write from the first write on. A SQLite connection
    /// serves one request at a time, so each sits behind a lock.
    reader: Mutex<LoopDir>,
    writer: OnceLock<Mutex<LoopDir>>,
}

impl App {
    fn new(reader: LoopDir) -> Self {
        App {
            dir: reader.root().to_owned(),
            store: reader.store_override().map(str::to_owned),
            reader: Mutex::new(reader),
            writer: OnceLock::new(),
        }
    }

    /// The loop, for one request; `ReadWrite` only for requests that write.
    pub fn open(&self, access: Access) -> Result<MutexGuard<'_, LoopDir>> {
        let lock = match access {
            Access::ReadOnly => &self.reader,
            _ => match self.writer.get() {
                Some(writer) => writer,
                None => {
                    let place = Place::new(&self.dir, self.store.as_deref());
                    let opened = LoopDir::open(place, Access::ReadWrite)?;
                    self.writer.get_or_init(|| Mutex::new(opened))
                }
            },
        };
        // A request that panicked mid-read leaves nothing half-written in
        // the store (every write is one transaction): the loop stays usable.
        Ok(lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner()))
    }
}

/// Which loops a server shows.
pub enum Loops {
    /// `loopx serve --dir`: one loop, at `/`.
    One(Arc<App>),
    /// `loopx serve --all`: every loop in the registry at `/`, each one's
    /// own dashboard under `/loops/<id>/`, opened on first visit.
    All {
        registry: Registry,
        opened: Mutex<HashMap<String, Arc<App>>>,
    },
}

/// The server: who may talk to it, and the loops it shows. One credential
/// (token or session) opens every loop it shows.
pub struct Server {
    token: String,
    /// Host header values this server answers to.
    pub hosts: Vec<String>,
    pub remote: bool,
    /// `http://addr/`, what login links start with.
    base: String,
    /// Per port, because browsers share cookies between the ports of a
    /// host: two servers must not overwrite each other's session.
    cookie: String,
    sessions: auth::Sessions,
    pub loops: Loops,
    /// The store loops are read from when not each directory's own file.
    store: Option<String>,
}

impl Server {
    /// A fresh one-time login link.
    fn login_url(&self) -> Result<String> {
        Ok(format!(
            "{}login?once={}",
            self.base,
            self.sessions.new_login()?
        ))
    }

    /// `--all`: a page of the registered loops, read now.
    pub fn all_loops(&self, page: &LoopsPage) -> Result<all_loops::AllLoops> {
        let Loops::All { registry, .. } = &self.loops else {
            bail!("this server shows one loop");
        };
        Ok(all_loops::all_loops(
            registry,
            self.store.as_deref(),
            page.start.unwrap_or(0),
            page.limit.unwrap_or(all_loops::LOOPS_PAGE),
        ))
    }

    /// The loop the all-loops row `id` names. The registry is read again on
    /// every request, so a loop whose entry was removed, or whose directory
    /// went away or became a symlink, stops being served at once.
    fn loop_by_id(&self, id: &str) -> Result<Arc<App>> {
        let Loops::All { registry, opened } = &self.loops else {
            bail!("this server shows one loop");
        };
        let dir = all_loops::find(registry, id)?;
        let mut opened = opened.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(app) = opened.get(id).filter(|app| app.dir == dir) {
            return Ok(app.clone());
        }
        let place = Place::new(&dir, self.store.as_deref());
        let app = Arc::new(App::new(LoopDir::open(place, Access::ReadOnly)?));
        opened.insert(id.to_owned(), app.clone());
        Ok(app)
    }
}

/// The loop a request is about: the only one, or the one its
/// `/loops/<id>/` prefix names.
pub struct Loop(pub Arc<App>);

impl FromRequestParts<Arc<Server>> for Loop {
    type Rejection = Failure;

    async fn from_request_parts(
        parts: &mut Parts,
        server: &Arc<Server>,
    ) -> Result<Self, Self::Rejection> {
        if let Loops::One(app) = &server.loops {
            return Ok(Loop(app.clone()));
        }
        let id = parts
            .uri
            .path()
            .strip_prefix("/loops/")
            .and_then(|rest| rest.split('/').next())
            .unwrap_or_default()
            .to_owned();
        let server = server.clone();
        api::blocking(move || server.loop_by_id(&id))
            .await
            .map(Loop)
    }
}

/// An iteration number as a path names it: decimal, from 1 to the
/// largest revision the store can hold. Anything else names no iteration.
/// `?start=N&limit=M`: which loops a page of the all-loops views shows.
#[derive(Debug, Default, serde::Deserialize)]
pub struct LoopsPage {
    pub start: Option<usize>,
    pub limit: Option<usize>,
}

pub fn iteration_number(raw: &str) -> Option<u64> {
    raw.parse::<u64>()
        .ok()
        .filter(|n| (1..=i64::MAX as u64).contains(n))
}

pub struct Options {
    /// `None`: every registered loop (`--all`).
    pub dir: Option<PathBuf>,
    /// Where the registry is, for `--all`.
    pub registry_dir: Option<PathBuf>,
    pub addr: SocketAddr,
    pub allow_remote: bool,
    pub token: Option<String>,
    pub open_browser: bool,
    /// Print the start line as one JSON object.
    pub json: bool,
    /// The store loops are read from when not each directory's own file
    /// (`--store`).
    pub store: Option<String>,
}

pub fn serve(options: Options) -> Result<()> {
    // Fail before binding if there is no loop; this is the store the
    // server reads for its whole life. With --all, the token lives in the
    // user's loopx state directory beside the registry, since no one loop
    // owns the server.
    let (loops, token_dir) = match &options.dir {
        Some(dir) => {
            let place = Place::new(dir, options.store.as_deref());
            let app = App::new(LoopDir::open(place, Access::ReadOnly)?);
            let token_dir = app.dir.clone();
            (Loops::One(Arc::new(app)), token_dir)
        }
        None => {
            let registry = Registry::locate(options.registry_dir.as_deref())?;
            let token_dir = registry.state_dir().to_owned();
            (
                Loops::All {
                    registry,
                    opened: Mutex::new(HashMap::new()),
                },
                token_dir,
            )
        }
    };
    let loopback = options.addr.ip().is_loopback();
    if !loopback && !options.allow_remote {
        bail!("{} is not a loopback address: pass --allow-remote (and keep the token secret) to serve beyond this machine", options.addr);
    }
    let (token, token_file) = match options.token {
        Some(token) if token.len() < auth::MIN_TOKEN_LEN => bail!(
            "--token must be at least {} characters (got {})",
            auth::MIN_TOKEN_LEN,
            token.len()
        ),
        Some(token) => (token, None),
        None => {
            if matches!(loops, Loops::All { .. }) {
                loopx_app::fsutil::create_private_dir(&token_dir)?;
            }
            (
                auth::load_or_create_token(&token_dir)?,
                Some(token_dir.join(auth::TOKEN_FILE)),
            )
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(options.addr)
            .await
            .map_err(|error| {
                let taken = error.kind() == std::io::ErrorKind::AddrInUse;
                anyhow::Error::new(error).context(if taken {
                    format!(
                        "cannot listen on {}: the port is taken (another `loopx serve`?); pass --addr {} for any free port, or --addr with another port",
                        options.addr,
                        std::net::SocketAddr::new(options.addr.ip(), 0)
                    )
                } else {
                    format!("cannot listen on {}", options.addr)
                })
            })?;
        let addr = listener.local_addr()?;
        let port = addr.port();
        let mut hosts = vec![
            format!("127.0.0.1:{port}"),
            format!("localhost:{port}"),
            format!("[::1]:{port}"),
        ];
        hosts.push(addr.to_string());
        let url = format!("http://{addr}/");
        let server = Arc::new(Server {
            token,
            hosts,
            remote: !loopback,
            base: url.clone(),
            cookie: format!("loopx_session_{port}"),
            sessions: auth::Sessions::default(),
            loops,
            store: options.store.clone(),
        });
        let login = server.login_url()?;
        announce(&url, port, token_file.as_deref(), &login, options.json);
        let opened = if options.open_browser {
            open_browser(&login)
        } else {
            None
        };
        axum::serve(listener, router(server))
            .with_graceful_shutdown(async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await?;
        if let Some(dir) = opened {
            let _ = std::fs::remove_dir_all(dir);
        }
        Ok(())
    })
}

/// The start line (the first line of stdout, which tests parse for the
/// port) and how to log in. It names the token file, never the token.
fn announce(url: &str, port: u16, token_file: Option<&Path>, login: &str, json: bool) {
    let ttl = auth::LOGIN_TTL.as_secs();
    let token_text = match token_file {
        Some(path) => format!("token file {}", path.display()),
        None => "token from --token".to_owned(),
    };
    let token_read = match token_file {
        Some(path) => format!(
            "$(cat '{}')",
            path.display().to_string().replace('\'', "'\\''")
        ),
        None => "<the token you passed>".to_owned(),
    };
    let another = format!("curl -s -X POST -H \"X-Loopx-Token: {token_read}\" {url}api/login-url");
    let mut out = std::io::stdout().lock();
    use std::io::Write as _;
    let _ = if json {
        writeln!(
            out,
            "{}",
            serde_json::json!({
                "status": "ok", "action": "serve", "url": url, "port": port,
                "token_file": token_file.map(|p| p.display().to_string()),
                "login_url": login, "login_expires_in_seconds": ttl,
                "another_login": another,
            })
        )
    } else {
        writeln!(
            out,
            "loopx serve: {url} ({token_text})\nlog in once within {ttl}s: {login}\nanother login link: {another}"
        )
    };
    let _ = out.flush();
}

/// Open the one-time login link in a browser without putting it on a
/// command line, which every local user can read in /proc: the opener gets
/// a 0600 file in a fresh 0700 directory that redirects to the link (as
/// Jupyter does). Returns that directory; it is removed when the link
/// expires or the server stops, whichever is first (a server killed
/// outright leaves it, holding only a spent or expired link).
fn open_browser(login: &str) -> Option<PathBuf> {
    let Some(opener) = ["xdg-open", "open"]
        .into_iter()
        .find(|o| loopx_app::platform::which(o).is_some())
    else {
        eprintln!("loopx dashboard: no browser opener found (xdg-open, open); open the login link printed above yourself");
        return None;
    };
    let written = (|| -> Result<PathBuf> {
        use std::io::Write as _;
        let dir = loopx_app::fsutil::create_private_temp_dir("loopx-login")?;
        let file = dir.join("login.html");
        let escaped = maud::html! { (login) }.into_string();
        loopx_app::platform::create_private(&file)?
            .write_all(format!("<!DOCTYPE html><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"0;url={escaped}\"><title>loopx</title><p><a href=\"{escaped}\">Open the loopx dashboard</a></p>\n").as_bytes())?;
        Ok(dir)
    })();
    let dir = match written {
        Ok(dir) => dir,
        Err(e) => {
            eprintln!("loopx dashboard: cannot write the login page ({e:#}); open the login link printed above yourself");
            return None;
        }
    };
    let spawned = std::process::Command::new(opener)
        .arg(format!("file://{}", dir.join("login.html").display()))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    if let Err(e) = spawned {
        eprintln!(
            "loopx dashboard: {opener} failed ({e}); open the login link printed above yourself"
        );
    }
    let expired = dir.clone();
    std::thread::spawn(move || {
        std::thread::sleep(auth::LOGIN_TTL);
        let _ = std::fs::remove_dir_all(expired);
    });
    Some(dir)
}

pub fn router(server: Arc<Server>) -> Router {
    let router = Router::new()
        .route("/login", get(login))
        .route("/api/login-url", post(login_url));
    let router = match &server.loops {
        Loops::One(_) => loop_routes(router, ""),
        Loops::All { .. } => loop_routes(
            router
                .route("/", get(page::all_loops))
                .route("/fragment/loops", get(page::all_loops_live))
                .route("/api/loops", get(api::all_loops))
                // Every link inside a loop's pages is relative to its
                // overview, which therefore ends in a slash.
                .route(
                    "/loops/{loop}",
                    get(
                        |axum::extract::Path(id): axum::extract::Path<String>| async move {
                            Redirect::permanent(&format!("/loops/{id}/"))
                        },
                    ),
                ),
            "/loops/{loop}",
        ),
    };
    router
        .layer(axum::middleware::from_fn_with_state(server.clone(), guard))
        .with_state(server)
}

/// One loop's pages and API under `prefix` (empty for the only loop).
fn loop_routes(router: Router<Arc<Server>>, prefix: &str) -> Router<Arc<Server>> {
    let at = |path: &str| format!("{prefix}{path}");
    router
        .route(&at("/"), get(page::overview))
        .route(&at("/fragment/live"), get(page::live))
        .route(&at("/iterations/{n}"), get(page::iteration))
        .route(&at("/api/status"), get(api::status))
        .route(&at("/api/health"), get(api::health))
        .route(&at("/api/goal"), get(api::goal))
        .route(&at("/api/should-run"), get(api::should_run))
        .route(&at("/api/cost"), get(api::cost))
        .route(&at("/api/turns"), get(api::turns))
        .route(&at("/api/todos"), get(api::todos))
        .route(&at("/api/iterations"), get(api::iterations))
        .route(&at("/api/iterations/{n}"), get(api::iteration))
        .route(
            &at("/api/outcomes/{id}/requirements"),
            post(api::add_requirement),
        )
        .route(&at("/api/objective/revise"), post(api::revise_objective))
}

/// A refusal that names what to do and holds no secret. Pages get a line
/// of text a person can read, the API gets JSON.
fn refuse(status: StatusCode, api: bool, message: &str) -> Response {
    if api {
        let body = serde_json::json!({"status": "failed", "error": message}).to_string();
        (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
    } else {
        let body = maud::html! {
            (maud::DOCTYPE) html lang="en" { head { meta charset="utf-8"; title { "loopx" } } body { p { (message) } } }
        };
        (status, axum::response::Html(body.into_string())).into_response()
    }
}

const NOT_LOGGED_IN: &str = "not logged in: open the one-time login link `loopx serve` printed (or run `loopx dashboard`), or send the token from the serve.token file it named (the loop's, or with --all the one beside the registry) in the X-Loopx-Token header";

fn header_value<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// The value of cookie `name`, from every Cookie header.
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| {
            let (key, value) = pair.trim().split_once('=')?;
            (key == name).then_some(value)
        })
}

enum Credential {
    Token,
    Session,
}

/// Host, credential and Origin checks, before any handler runs.
async fn guard(State(app): State<Arc<Server>>, request: Request, next: Next) -> Response {
    let path = request.uri().path();
    let api = path.starts_with("/api/") || (path.starts_with("/loops/") && path.contains("/api/"));
    let headers = request.headers();
    let host = header_value(headers, "host").unwrap_or("");
    if !app.remote && !app.hosts.iter().any(|h| h == host) {
        return refuse(
            StatusCode::MISDIRECTED_REQUEST,
            api,
            "unexpected Host header: this server answers only to its loopback address",
        );
    }
    // The login link is itself the credential; its handler checks it.
    if request.uri().path() == "/login" {
        return hardened(next.run(request).await);
    }
    let credential = if header_value(headers, "x-loopx-token")
        .is_some_and(|token| auth::same_secret(token, &app.token))
    {
        Credential::Token
    } else if cookie(headers, &app.cookie).is_some_and(|s| app.sessions.is_session(s)) {
        Credential::Session
    } else {
        return refuse(StatusCode::FORBIDDEN, api, NOT_LOGGED_IN);
    };
    let writes = request.method() != Method::GET && request.method() != Method::HEAD;
    if writes {
        let same_origin = format!("http://{host}");
        let origin = header_value(headers, "origin");
        let site = header_value(headers, "sec-fetch-site");
        if origin.is_some_and(|o| o != same_origin) {
            return refuse(
                StatusCode::FORBIDDEN,
                api,
                "cross-origin write refused (Origin does not match this server)",
            );
        }
        if site.is_some_and(|s| s != "same-origin" && s != "none") {
            return refuse(StatusCode::FORBIDDEN, api, "cross-site write refused");
        }
        // A browser sends the cookie whoever made it send the request, so
        // a write on the cookie alone must prove it came from this origin.
        // A script holding the token proves more than that already.
        if matches!(credential, Credential::Session)
            && origin.is_none()
            && site != Some("same-origin")
        {
            return refuse(
                StatusCode::FORBIDDEN,
                api,
                "a write with the session cookie needs a same-origin Origin (or Sec-Fetch-Site: same-origin)",
            );
        }
    }
    hardened(next.run(request).await)
}

/// Never framed (the Apply button cannot be clickjacked), never cached,
/// never leaking its URL in a Referer.
fn hardened(mut response: Response) -> Response {
    let headers = response.headers_mut();
    for (name, value) in [
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::CACHE_CONTROL, "no-store"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

#[derive(serde::Deserialize)]
struct Once {
    once: Option<String>,
}

/// `/login?once=…`: spend a one-time link, set the session cookie, go to
/// the overview.
async fn login(
    State(app): State<Arc<Server>>,
    axum::extract::Query(query): axum::extract::Query<Once>,
) -> Response {
    let session = match query.once.as_deref().map(|once| app.sessions.redeem(once)) {
        Some(Ok(Some(session))) => session,
        Some(Err(e)) => {
            return refuse(StatusCode::INTERNAL_SERVER_ERROR, false, &format!("{e:#}"))
        }
        _ => {
            return refuse(
                StatusCode::FORBIDDEN,
                false,
                &format!(
                    "this login link was already used or has expired (links are single-use and valid for {}s): get another with the command `loopx serve` printed, or run `loopx dashboard`",
                    auth::LOGIN_TTL.as_secs()
                ),
            )
        }
    };
    let cookie = format!(
        "{}={session}; HttpOnly; SameSite=Strict; Path=/",
        app.cookie
    );
    (
        StatusCode::SEE_OTHER,
        [
            (header::SET_COOKIE, cookie),
            (header::LOCATION, "/".to_owned()),
        ],
    )
        .into_response()
}

/// `POST /api/login-url`: a fresh one-time login link, for a browser
/// that was not opened by `loopx dashboard` or whose link expired.
async fn login_url(State(app): State<Arc<Server>>) -> Response {
    match app.login_url() {
        Ok(url) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            serde_json::json!({"status": "ok", "login_url": url, "expires_in_seconds": auth::LOGIN_TTL.as_secs()}).to_string(),
        )
            .into_response(),
        Err(e) => refuse(StatusCode::INTERNAL_SERVER_ERROR, true, &format!("{e:#}")),
    }
}
