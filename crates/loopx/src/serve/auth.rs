//! Who may talk to `loopx serve`: the long-lived token and its 0600 file,
//! the one-time login links and the browser sessions they open, and the
//! constant-time comparison every secret goes through.
//!
//! The token is for scripts (the `X-Loopx-Token` header). A browser never
//! sees it: it follows a one-time link (`/login?once=…`, single use, valid
//! for [`LOGIN_TTL`]) that trades itself for a session cookie. The session
//! value is random per login and lives only in this server's memory, so a
//! cookie leaked from a browser profile dies with the server and never
//! reveals the token a script could reuse against the next one.

use anyhow::{bail, Context as _, Result};
use loopx_app::platform;
use std::io::{Read as _, Write as _};
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The token file's name inside the loop directory.
pub const TOKEN_FILE: &str = "serve.token";
/// How long a one-time login link stays valid.
pub const LOGIN_TTL: Duration = Duration::from_secs(120);
/// Outstanding login links and open sessions are bounded so a client that
/// holds the token cannot grow the server's memory without end; the
/// oldest goes first.
const MAX_LOGINS: usize = 16;
const MAX_SESSIONS: usize = 32;
/// A token read from a file or given with `--token`.
pub const MIN_TOKEN_LEN: usize = 16;

/// `bytes` random bytes from the kernel, as hex.
pub fn random_hex(bytes: usize) -> Result<String> {
    loopx_app::platform::secret_hex(bytes)
        .context("cannot draw a secret from the kernel's random source")
}

/// Equal secrets, compared without an early exit so the time taken says
/// nothing about how much of a guess was right. (The length is not
/// secret: every secret here has a fixed, public length.)
pub fn same_secret(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The loop's serve token: read from `dir/serve.token`, or created there
/// (mode 0600, exclusively, never through a symlink) if absent.
///
/// The file is reused across restarts so scripts that read it keep working
/// and two servers on one loop agree; delete it to rotate. An existing file
/// that is a symlink, not ours, or readable by anyone else is refused, not
/// repaired: whoever could read it may already hold the token.
pub fn load_or_create_token(dir: &Path) -> Result<String> {
    let path = dir.join(TOKEN_FILE);
    match read_token(&path) {
        Ok(token) => return Ok(token),
        Err(ReadError::Missing) => {}
        Err(ReadError::Refused(message)) => bail!("{message}"),
    }
    let token = random_hex(32)?;
    // Written whole under a private name, then linked into place: a
    // concurrent server sees either no file or the complete token, and
    // `link` fails rather than replace a file another server published.
    let temporary = dir.join(format!(".{TOKEN_FILE}.tmp-{}", std::process::id()));
    let _ = std::fs::remove_file(&temporary);
    let written = (|| -> std::io::Result<()> {
        let mut file = platform::create_private(&temporary)?;
        file.write_all(format!("{token}\n").as_bytes())?;
        file.sync_all()
    })();
    let linked = written.and_then(|()| std::fs::hard_link(&temporary, &path));
    let _ = std::fs::remove_file(&temporary);
    match linked {
        Ok(()) => Ok(token),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => match read_token(&path) {
            Ok(token) => Ok(token),
            Err(ReadError::Missing) => bail!("{} vanished while it was being read; start again", path.display()),
            Err(ReadError::Refused(message)) => bail!("{message}"),
        },
        Err(e) => Err(e).with_context(|| {
            format!(
                "cannot create the token file {}: make the loop directory writable, or pass --token (or LOOPX_SERVE_TOKEN)",
                path.display()
            )
        }),
    }
}

enum ReadError {
    Missing,
    Refused(String),
}

fn read_token(path: &Path) -> Result<String, ReadError> {
    let shown = path.display();
    let delete = format!("delete {shown} and start again to make a new one");
    let mut file = match platform::open_untrusted(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(ReadError::Missing),
        Err(e) => {
            return Err(ReadError::Refused(format!(
                "cannot open the token file {shown} ({e}; a symlink is refused): {delete}"
            )))
        }
    };
    let meta = file
        .metadata()
        .map_err(|e| ReadError::Refused(format!("cannot stat {shown}: {e}")))?;
    if !meta.is_file() {
        return Err(ReadError::Refused(format!(
            "the token file {shown} is not a regular file: {delete}"
        )));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let me = platform::effective_uid();
        if meta.uid() != me {
            return Err(ReadError::Refused(format!(
                "the token file {shown} belongs to uid {}, not to this user (uid {me}): {delete}",
                meta.uid()
            )));
        }
        if meta.mode() & 0o077 != 0 {
            return Err(ReadError::Refused(format!(
                "the token file {shown} has mode {:o}; others may have read the token, so it is not reused: {delete}",
                meta.mode() & 0o777
            )));
        }
    }
    let mut text = String::new();
    (&mut file)
        .take(1024)
        .read_to_string(&mut text)
        .map_err(|e| ReadError::Refused(format!("cannot read {shown}: {e}: {delete}")))?;
    let token = text.trim_end_matches(['\n', '\r']);
    if token.len() < MIN_TOKEN_LEN || !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(ReadError::Refused(format!(
            "the token file {shown} does not hold a token (at least {MIN_TOKEN_LEN} printable characters on one line): {delete}"
        )));
    }
    Ok(token.to_owned())
}

/// One-time login links and the sessions they opened, in memory.
#[derive(Default)]
pub struct Sessions {
    logins: Mutex<Vec<(String, Instant)>>,
    sessions: Mutex<Vec<String>>,
}

impl Sessions {
    /// A fresh one-time secret for `/login?once=`.
    pub fn new_login(&self) -> Result<String> {
        let once = random_hex(32)?;
        let mut logins = self.logins.lock().unwrap_or_else(|e| e.into_inner());
        logins.retain(|(_, at)| at.elapsed() < LOGIN_TTL);
        if logins.len() >= MAX_LOGINS {
            logins.remove(0);
        }
        logins.push((once.clone(), Instant::now()));
        Ok(once)
    }

    /// Spend a one-time secret: a new session value if it was valid and
    /// unused, `None` otherwise. Every candidate is compared, so the scan
    /// takes as long whichever one matches.
    pub fn redeem(&self, once: &str) -> Result<Option<String>> {
        let mut logins = self.logins.lock().unwrap_or_else(|e| e.into_inner());
        logins.retain(|(_, at)| at.elapsed() < LOGIN_TTL);
        let mut found = None;
        for (i, (candidate, _)) in logins.iter().enumerate() {
            if same_secret(candidate, once) {
                found = Some(i);
            }
        }
        let Some(i) = found else { return Ok(None) };
        logins.remove(i);
        drop(logins);
        let session = random_hex(32)?;
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        if sessions.len() >= MAX_SESSIONS {
            sessions.remove(0);
        }
        sessions.push(session.clone());
        Ok(Some(session))
    }

    pub fn is_session(&self, value: &str) -> bool {
        let sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        sessions
            .iter()
            .fold(false, |any, s| same_secret(s, value) | any)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_compare_equal_only_when_identical() {
        assert!(same_secret("abcdef", "abcdef"));
        assert!(!same_secret("abcdef", "abcdeg"));
        assert!(!same_secret("abcdef", "abcde"));
        assert!(!same_secret("", "a"));
    }

    #[test]
    fn a_login_link_opens_one_session_once() {
        let sessions = Sessions::default();
        let once = sessions.new_login().unwrap();
        let session = sessions.redeem(&once).unwrap().expect("first use");
        assert!(sessions.is_session(&session));
        assert!(!sessions.is_session(&once));
        assert_eq!(sessions.redeem(&once).unwrap(), None, "second use");
    }

    #[test]
    fn the_token_file_is_private_reused_and_never_followed() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let token = load_or_create_token(dir.path()).unwrap();
        let path = dir.path().join(TOKEN_FILE);
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(load_or_create_token(dir.path()).unwrap(), token);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let error = load_or_create_token(dir.path()).unwrap_err().to_string();
        assert!(
            error.contains("mode 644") && error.contains("delete"),
            "{error}"
        );
        std::fs::remove_file(&path).unwrap();
        let elsewhere = dir.path().join("elsewhere");
        std::os::unix::fs::symlink(&elsewhere, &path).unwrap();
        let error = load_or_create_token(dir.path()).unwrap_err().to_string();
        assert!(error.contains("symlink"), "{error}");
        assert!(!elsewhere.exists(), "nothing was written through the link");
    }
}
