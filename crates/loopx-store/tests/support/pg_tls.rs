//! A throwaway PostgreSQL server with TLS on (see `pg_server.rs`), given
//! a certificate made here with the openssl CLI: `ca.pem` signed it and it
//! names `localhost` only; `other-ca.pem` signed nothing the server has.
//! The including test declares `pg_server` beside this module.
#![allow(dead_code)]

use crate::pg_server;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The certificates the server was given: `ca.pem` signed its
/// certificate (which names `localhost` only); `other-ca.pem` did not.
pub struct Certs {
    dir: PathBuf,
}

impl Certs {
    pub fn ca(&self) -> String {
        self.dir.join("ca.pem").display().to_string()
    }

    pub fn other_ca(&self) -> String {
        self.dir.join("other-ca.pem").display().to_string()
    }
}

fn openssl(dir: &Path, args: &[&str]) {
    let output = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run openssl");
    assert!(
        output.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A CA: `<name>.pem` and `<name>.key`.
fn make_ca(dir: &Path, name: &str) {
    let key = format!("{name}.key");
    let pem = format!("{name}.pem");
    let subject = format!("/CN=loopx test {name}");
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &key,
            "-out",
            &pem,
            "-days",
            "2",
            "-subj",
            &subject,
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
    );
}

/// The shared server with TLS turned on, once per test binary; `None`
/// without the server binaries.
pub fn tls_server() -> Option<&'static Certs> {
    static CERTS: OnceLock<Option<Certs>> = OnceLock::new();
    CERTS
        .get_or_init(|| {
            let admin = pg_server::database()?;
            let server = pg_server::server()?;
            let dir = std::env::temp_dir().join(format!("loopx-pg-tls-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            make_ca(&dir, "ca");
            make_ca(&dir, "other-ca");
            openssl(
                &dir,
                &[
                    "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost",
                ],
            );
            std::fs::write(
                dir.join("server.ext"),
                "subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n",
            )
            .unwrap();
            openssl(
                &dir,
                &[
                    "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                    "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "server.ext",
                ],
            );
            // The server reads its key only if it owns it and no one else can.
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
            std::fs::set_permissions(dir.join("server.key"), std::fs::Permissions::from_mode(0o600))
                .unwrap();
            let owner = Command::new("id").arg("-u").output().unwrap();
            if String::from_utf8_lossy(&owner.stdout).trim() == "0" {
                for file in ["server.key", "server.pem"] {
                    let status = Command::new("chown")
                        .arg("postgres:")
                        .arg(dir.join(file))
                        .status()
                        .unwrap();
                    assert!(status.success());
                }
            }
            for setting in [
                format!("ssl_cert_file = '{}'", dir.join("server.pem").display()),
                format!("ssl_key_file = '{}'", dir.join("server.key").display()),
                "ssl = on".to_owned(),
            ] {
                server.psql(&admin, &format!("ALTER SYSTEM SET {setting}"));
            }
            server.psql(&admin, "SELECT pg_reload_conf()");
            let deadline = Instant::now() + Duration::from_secs(10);
            while server.query(&admin, "SHOW ssl").trim() != "on" {
                assert!(Instant::now() < deadline, "the server never turned TLS on");
                std::thread::sleep(Duration::from_millis(100));
            }
            Some(Certs { dir })
        })
        .as_ref()
}

/// A fresh database on the TLS server, as `(URL on host, admin URL)`.
pub fn database(host: &str) -> Option<(String, String, &'static Certs)> {
    let certs = tls_server()?;
    let admin = pg_server::database()?;
    let url = admin.replace("@127.0.0.1:", &format!("@{host}:"));
    Some((url, admin, certs))
}
