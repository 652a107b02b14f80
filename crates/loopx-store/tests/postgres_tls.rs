//! The PostgreSQL backend over TLS, against a real server (see
//! `support/pg_server.rs`) given a certificate made here with the openssl
//! CLI: each `sslmode` connects, encrypted or not, or refuses, as libpq's
//! does, and a refusal names what to check.

#[path = "support/pg_server.rs"]
mod pg_server;

use loopx_store::{Locator, StoreError};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The certificates the server was given: `ca.pem` signed its
/// certificate (which names `localhost` only); `other-ca.pem` did not.
struct Certs {
    dir: PathBuf,
}

impl Certs {
    fn ca(&self) -> String {
        self.dir.join("ca.pem").display().to_string()
    }

    fn other_ca(&self) -> String {
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
fn tls_server() -> Option<&'static Certs> {
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
fn database(host: &str) -> Option<(String, String, &'static Certs)> {
    let certs = tls_server()?;
    let admin = pg_server::database()?;
    let url = admin.replace("@127.0.0.1:", &format!("@{host}:"));
    Some((url, admin, certs))
}

/// Whether loopx's connection to the database of `admin` is encrypted.
fn encrypted(admin: &str) -> bool {
    let server = pg_server::server().unwrap();
    let database = admin.rsplit('/').next().unwrap();
    let sql = format!(
        "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE a.application_name = 'loopx' AND a.datname = '{database}'"
    );
    let rows = server.query(admin, &sql);
    assert_eq!(rows.lines().count(), 1, "one loopx connection: {rows:?}");
    rows.trim() == "t"
}

fn connect(url: &str) -> Result<loopx_store::postgres::PostgresStore, StoreError> {
    Locator::parse(url).unwrap().open_postgres().unwrap()
}

#[test]
fn verify_full_connects_encrypted_to_a_certificate_of_a_trusted_ca_naming_the_host() {
    let Some((url, admin, certs)) = database("localhost") else {
        return;
    };
    let store = connect(&format!(
        "{url}?sslmode=verify-full&sslrootcert={}",
        certs.ca()
    ))
    .unwrap();
    assert_eq!(store.schema_version().unwrap(), 0);
    assert!(encrypted(&admin));
}

#[test]
fn verify_full_refuses_a_certificate_that_does_not_name_the_host_and_verify_ca_accepts_it() {
    let Some((url, admin, certs)) = database("127.0.0.1") else {
        return;
    };
    let error = connect(&format!(
        "{url}?sslmode=verify-full&sslrootcert={}",
        certs.ca()
    ))
    .err()
    .unwrap()
    .to_string();
    assert!(
        error.contains("certificate") && error.contains("names the host connected to"),
        "{error}"
    );
    assert!(!error.contains(pg_server::PASSWORD), "{error}");
    let store = connect(&format!(
        "{url}?sslmode=verify-ca&sslrootcert={}",
        certs.ca()
    ))
    .unwrap();
    assert_eq!(store.schema_version().unwrap(), 0);
    assert!(encrypted(&admin));
}

#[test]
fn a_certificate_of_an_untrusted_ca_is_refused() {
    let Some((url, _, certs)) = database("localhost") else {
        return;
    };
    for query in [
        format!("sslmode=verify-ca&sslrootcert={}", certs.other_ca()),
        format!("sslmode=require&sslrootcert={}", certs.other_ca()),
        // No sslrootcert: the built-in public roots, which never signed it.
        "sslmode=verify-full".to_owned(),
    ] {
        let error = connect(&format!("{url}?{query}"))
            .err()
            .unwrap()
            .to_string();
        assert!(
            error.contains("certificate") && error.contains("sslrootcert"),
            "{query}: {error}"
        );
    }
}

#[test]
fn require_and_prefer_encrypt_without_checking_and_disable_does_not_encrypt() {
    for (query, tls) in [
        ("sslmode=require", true),
        ("", true),
        ("sslmode=prefer", true),
        ("sslmode=disable", false),
    ] {
        let Some((url, admin, _)) = database("127.0.0.1") else {
            return;
        };
        let url = if query.is_empty() {
            url
        } else {
            format!("{url}?{query}")
        };
        let store = connect(&url).unwrap();
        assert_eq!(store.schema_version().unwrap(), 0);
        assert_eq!(encrypted(&admin), tls, "{query}");
    }
}

#[test]
fn a_bad_sslmode_or_root_certificate_is_a_bad_locator_naming_it() {
    let Some((url, _, _)) = database("127.0.0.1") else {
        return;
    };
    for (query, expected) in [
        (
            "sslmode=verify_full",
            "sslmode in the URL is \"verify_full\"; use one of disable, prefer, require, verify-ca, verify-full",
        ),
        (
            "sslmode=verify-ca&sslrootcert=/no/such/ca.pem",
            "sslrootcert /no/such/ca.pem cannot be read",
        ),
    ] {
        let error = connect(&format!("{url}?{query}")).err().unwrap();
        assert!(
            matches!(&error, StoreError::BadLocator { reason, .. } if reason.contains(expected)),
            "{query}: {error}"
        );
        assert!(!error.to_string().contains(pg_server::PASSWORD));
    }
}
