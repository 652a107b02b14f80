//! The PostgreSQL backend over TLS, against a real server (see
//! `support/pg_server.rs`) given a certificate made here with the openssl
//! CLI: each `sslmode` connects, encrypted or not, or refuses, as libpq's
//! does, and a refusal names what to check.

#[path = "support/pg_server.rs"]
mod pg_server;
#[path = "support/pg_tls.rs"]
mod pg_tls;

use pg_tls::database;

use loopx_store::{Locator, StoreError};

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
