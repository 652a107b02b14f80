//! TLS for the PostgreSQL backend, with libpq's meanings: `sslmode`
//! (`disable`, `prefer` — the default —, `require`, `verify-ca`,
//! `verify-full`) and `sslrootcert` (a PEM file of the CAs to trust) in the
//! URL's query, else `PGSSLMODE` and `PGSSLROOTCERT` in the environment.
//!
//! - `disable`: no TLS.
//! - `prefer`, `require`: encrypted (`prefer` falls back to plain text
//!   when the server offers no TLS) but, as in libpq, the certificate is
//!   not checked, unless a root certificate is given: then as `verify-ca`.
//! - `verify-ca`: the server's certificate must chain to a trusted CA.
//! - `verify-full`: that, and it must name the host connected to.
//!
//! Trusted CAs: the `sslrootcert` file, else the Mozilla roots built into
//! this binary (`webpki-roots`; what public managed services chain to).
//!
//! tokio-postgres knows only `disable`, `prefer` and `require`, so both
//! settings are taken out of the URL here ([`TlsSettings::split`]) and the
//! verification is rustls's, configured per mode ([`TlsSettings::connector`]).
//! Not here: connecting, or what a failure means to the caller.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::path::PathBuf;
use std::sync::Arc;
use tokio_postgres_rustls::MakeRustlsConnect;

/// The environment variables libpq reads, read here the same way.
pub const MODE_ENV: &str = "PGSSLMODE";
pub const ROOT_CERT_ENV: &str = "PGSSLROOTCERT";

/// How much the connection is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    const NAMES: &'static str = "disable, prefer, require, verify-ca, verify-full";

    fn parse(text: &str) -> Option<SslMode> {
        Some(match text {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            _ => return None,
        })
    }

    /// What tokio-postgres is told: whether TLS is tried, and required.
    fn negotiation(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => "require",
        }
    }
}

/// The TLS a URL (and the environment) asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    pub mode: SslMode,
    pub root_cert: Option<PathBuf>,
}

impl TlsSettings {
    /// `url` without its `sslmode` and `sslrootcert` (and with the
    /// `sslmode` tokio-postgres understands), and the settings they and
    /// `env` (a lookup of [`MODE_ENV`] and [`ROOT_CERT_ENV`]) give. The
    /// error says what was wrong and what is accepted.
    pub fn split(
        url: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<(String, TlsSettings), String> {
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        let (mut mode, mut root_cert) = (None, None);
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            match key {
                "sslmode" => mode = Some(("sslmode in the URL", percent_decode(value)?)),
                "sslrootcert" => root_cert = Some(percent_decode(value)?),
                _ => kept.push(pair),
            }
        }
        let mode = mode.or_else(|| env(MODE_ENV).map(|m| (MODE_ENV, m)));
        let mode = match mode {
            None => SslMode::Prefer,
            Some((source, text)) => SslMode::parse(&text)
                .ok_or_else(|| format!("{source} is {text:?}; use one of {}", SslMode::NAMES))?,
        };
        let root_cert = root_cert
            .or_else(|| env(ROOT_CERT_ENV))
            .filter(|path| !path.is_empty())
            .map(PathBuf::from);
        kept.push(match mode.negotiation() {
            "disable" => "sslmode=disable",
            "prefer" => "sslmode=prefer",
            _ => "sslmode=require",
        });
        Ok((
            format!("{base}?{}", kept.join("&")),
            TlsSettings { mode, root_cert },
        ))
    }

    /// The rustls connector this mode needs. Reads the root certificate
    /// file, if one is named.
    pub fn connector(&self) -> Result<MakeRustlsConnect, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let check = match (self.mode, &self.root_cert) {
            (SslMode::VerifyFull, _) => Check::Full,
            (SslMode::VerifyCa, _) | (SslMode::Require | SslMode::Prefer, Some(_)) => Check::Chain,
            (SslMode::Disable, _) | (SslMode::Prefer | SslMode::Require, None) => Check::Nothing,
        };
        let roots = match &self.root_cert {
            // Nothing is checked: no file is read either.
            _ if check == Check::Nothing => RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            },
            Some(path) => {
                let mut roots = RootCertStore::empty();
                let certificates = CertificateDer::pem_file_iter(path)
                    .and_then(|found| found.collect::<Result<Vec<_>, _>>())
                    .map_err(|e| {
                        format!(
                            "sslrootcert {} cannot be read as PEM certificates ({e}); name a readable PEM file of the CA certificates to trust",
                            path.display()
                        )
                    })?;
                let (added, _) = roots.add_parsable_certificates(certificates);
                if added == 0 {
                    return Err(format!(
                        "sslrootcert {} holds no usable CA certificate; name a PEM file of the CA certificates to trust",
                        path.display()
                    ));
                }
                roots
            }
            None => RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            },
        };
        let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .build()
            .map_err(|e| format!("the trusted CA certificates cannot be used ({e})"))?;
        let verifier = Arc::new(Verifier { check, webpki });
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS cannot be set up ({e})"))?
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        Ok(MakeRustlsConnect::new(config))
    }
}

impl TlsSettings {
    /// What to check when a connection failed under these settings.
    pub fn hint(&self) -> &'static str {
        match (self.mode, &self.root_cert) {
            (SslMode::Disable, _) | (SslMode::Prefer, None) => "",
            (SslMode::VerifyCa | SslMode::VerifyFull, None) => {
                " and that its certificate chains to a public CA (or name your CA's certificate with sslrootcert=PATH; sslmode=verify-full also needs the certificate to name the host)"
            }
            (SslMode::VerifyFull, Some(_)) => {
                " and that its certificate was signed by a CA in sslrootcert and names the host connected to"
            }
            (_, Some(_)) => " and that its certificate was signed by a CA in sslrootcert",
            (SslMode::Require, None) => " (sslmode=require needs a server that offers TLS)",
        }
    }
}

/// `%XX` escapes decoded, as tokio-postgres decodes the URL's values.
fn percent_decode(text: &str) -> Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("{text:?} has a bad %-escape"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("{text:?} is not UTF-8 once decoded"))
}

/// What of the server's certificate is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Check {
    /// Encrypted, but anyone may be at the other end (libpq's `require`).
    Nothing,
    /// It chains to a trusted CA, whatever host it names.
    Chain,
    /// It chains to a trusted CA and names the host.
    Full,
}

#[derive(Debug)]
struct Verifier {
    check: Check,
    webpki: Arc<WebPkiServerVerifier>,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if self.check == Check::Nothing {
            return Ok(ServerCertVerified::assertion());
        }
        let verified = self.webpki.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        );
        // The name is checked last, once the chain is proven: a name
        // error alone means the chain is good.
        match verified {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if self.check == Check::Chain => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    // The handshake's signatures are always checked, whatever the mode.
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(url: &str, env: &[(&str, &str)]) -> Result<(String, TlsSettings), String> {
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        TlsSettings::split(url, |name| {
            env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn sslmode_and_sslrootcert_are_taken_out_of_the_url() {
        let (url, tls) = split(
            "postgres://u:p@db.example.com:5432/loop?application_name=x&sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem",
            &[],
        )
        .unwrap();
        assert_eq!(
            url,
            "postgres://u:p@db.example.com:5432/loop?application_name=x&sslmode=require"
        );
        assert_eq!(tls.mode, SslMode::VerifyFull);
        assert_eq!(tls.root_cert, Some(PathBuf::from("/etc/ca.pem")));
        for (mode, told) in [
            ("disable", "disable"),
            ("prefer", "prefer"),
            ("require", "require"),
            ("verify-ca", "require"),
        ] {
            let (url, _) = split(&format!("postgres://h/d?sslmode={mode}"), &[]).unwrap();
            assert_eq!(url, format!("postgres://h/d?sslmode={told}"));
        }
    }

    #[test]
    fn without_a_setting_the_mode_is_prefer_and_the_environment_fills_in() {
        let (url, tls) = split("postgres://h/d", &[]).unwrap();
        assert_eq!(url, "postgres://h/d?sslmode=prefer");
        assert_eq!(
            tls,
            TlsSettings {
                mode: SslMode::Prefer,
                root_cert: None
            }
        );
        let env = [(MODE_ENV, "verify-ca"), (ROOT_CERT_ENV, "/ca.pem")];
        let (_, tls) = split("postgres://h/d", &env).unwrap();
        assert_eq!(tls.mode, SslMode::VerifyCa);
        assert_eq!(tls.root_cert, Some(PathBuf::from("/ca.pem")));
        // The URL wins over the environment.
        let (_, tls) = split("postgres://h/d?sslmode=disable&sslrootcert=/mine.pem", &env).unwrap();
        assert_eq!(tls.mode, SslMode::Disable);
        assert_eq!(tls.root_cert, Some(PathBuf::from("/mine.pem")));
    }

    #[test]
    fn an_unknown_mode_is_refused_naming_the_accepted_ones() {
        let error = split("postgres://h/d?sslmode=verify_full", &[]).unwrap_err();
        assert_eq!(
            error,
            "sslmode in the URL is \"verify_full\"; use one of disable, prefer, require, verify-ca, verify-full"
        );
        let error = split("postgres://h/d", &[(MODE_ENV, "allow")]).unwrap_err();
        assert!(error.starts_with("PGSSLMODE is \"allow\""), "{error}");
    }

    #[test]
    fn a_missing_root_certificate_file_is_named() {
        let tls = TlsSettings {
            mode: SslMode::VerifyFull,
            root_cert: Some(PathBuf::from("/no/such/ca.pem")),
        };
        let error = tls.connector().err().unwrap();
        assert!(
            error.starts_with("sslrootcert /no/such/ca.pem cannot be read"),
            "{error}"
        );
    }
}
