//! Redaction of credentials in free text: the one rule every path that
//! stores or shows agent output outside `driver_logs/` goes through.
//!
//! Agents and provider CLIs echo what they saw: an API error with the key
//! that failed, an `Authorization:` header from a debug dump, a `.env`
//! line, a private key pasted into a note. The journal is append-only, so a
//! secret that reaches it can never be taken out again. [`redact`] replaces
//! the secret part of each common credential form with [`MARK`] and leaves
//! everything else, including the key's name, untouched:
//!
//! - provider keys and tokens by their published prefixes: Anthropic and
//!   OpenAI `sk-…`, GitHub `ghp_ gho_ ghs_ ghu_ ghr_ github_pat_`, AWS
//!   access key ids `AKIA…`/`ASIA…`, Slack `xox?-…`, Google `AIza…`,
//!   GitLab `glpat-…`; found where a word starts or after a `-` or `_`,
//!   since a key is often glued to a name (`evt-sk-ant-…`, `key_sk-…`),
//!   but not after a letter or digit (`task-…` is a word);
//! - `Bearer <token>` and the value of `Authorization:` headers;
//! - PEM `-----BEGIN … PRIVATE KEY-----` blocks, to their END line;
//! - assignments whose name ends in password, secret, token, api key,
//!   access key or private key (`password=…`, `"api_key": "…"`,
//!   `GITHUB_TOKEN=…`, `x-api-key: …`).
//!
//! What leaves the host (a notification, its dry run) goes through
//! [`redact_outbound`] instead: the same rule, plus the secrets the operator
//! configured for a transport (matched literally wherever they appear) and
//! the personal data [`crate::pii`] recognises — e-mail addresses, phone
//! numbers (`+44 20 7946 0958`, `(555) 123-4567`, `020 7946 0958`), payment
//! card numbers, IBANs and national identity numbers, each replaced by the
//! mark of its kind. [`redact_outbound_json`] applies
//! it to every string of a JSON value, object keys included: a key is
//! whatever the caller typed (`--extensions '{"<secret>": 1}'`).
//! [`redact_object`] is the same walk with [`redact`] alone, for a JSON
//! object an agent wrote into what loopx keeps.
//!
//! It is a hand-written single pass over the bytes (no regex engine):
//! linear in the input and allocation-free when nothing matches. It is a
//! safety net, not a guarantee: a secret with no recognisable shape passes.
//! What it must never do is damage ordinary text: digests (`sha256:…`),
//! counts (`tokens: 1200`) and prose are left as they are.

use std::borrow::Cow;

use crate::pii::{self, Category, Span};

/// What a redacted secret is replaced with.
pub const MARK: &str = "[REDACTED]";

const PEM_MARK: &str = "[REDACTED PRIVATE KEY]";

/// `text` with every credential it recognises replaced by [`MARK`].
pub fn redact(text: &str) -> Cow<'_, str> {
    // Key blocks first: a header value or an assignment scanned to the end
    // of its line must not swallow a BEGIN line and leave the key body.
    match pass(text, Pass::KeyBlocks) {
        Cow::Borrowed(_) => pass(text, Pass::Tokens),
        Cow::Owned(once) => Cow::Owned(pass(&once, Pass::Tokens).into_owned()),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Pass {
    KeyBlocks,
    Tokens,
    Personal,
}

fn pass(text: &str, which: Pass) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    let mut out: Option<Vec<u8>> = None;
    // Bytes before `copied` are already in `out` (when it exists).
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        let found = match which {
            Pass::KeyBlocks => pem_block(bytes, i).map(|end| (i, end, PEM_MARK)),
            Pass::Tokens => secret_at(bytes, i, i == copied),
            Pass::Personal => match pii::found_at(bytes, i) {
                Some(Span::Personal(category, end)) => Some((i, end, personal_mark(category))),
                // Shaped like personal data but failing its check: kept,
                // and not read again from inside.
                Some(Span::Shaped(end)) => {
                    i = end;
                    continue;
                }
                None => None,
            },
        };
        let Some((start, end, mark)) = found else {
            i += 1;
            continue;
        };
        let buffer = out.get_or_insert_with(|| Vec::with_capacity(bytes.len()));
        buffer.extend_from_slice(&bytes[copied..start]);
        buffer.extend_from_slice(mark.as_bytes());
        copied = end;
        i = end.max(i + 1);
    }
    match out {
        None => Cow::Borrowed(text),
        Some(mut buffer) => {
            buffer.extend_from_slice(&bytes[copied..]);
            // Every cut is next to an ASCII byte, so the result is UTF-8.
            Cow::Owned(
                String::from_utf8(buffer)
                    .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
            )
        }
    }
}

/// [`redact`] into an owned string.
pub fn redact_owned(text: &str) -> String {
    redact(text).into_owned()
}

/// A secret found at `i`: the byte range to replace and its replacement.
/// `fresh` says that nothing before `i` is left to scan (the text starts
/// there, or a replacement just ended there).
fn secret_at(bytes: &[u8], i: usize, fresh: bool) -> Option<(usize, usize, &'static str)> {
    // Keys are looked for once per run of key characters, from where the
    // run starts (or where the last key in it ended), so each run is
    // scanned once whatever it holds ("sk-sk-sk-…" stays linear).
    if fresh || !key_char(bytes[i - 1]) {
        if let Some((start, end)) = key_in_run(bytes, i) {
            return Some((start, end, MARK));
        }
    }
    if i == 0 || !is_word(bytes[i - 1]) {
        if let Some((start, end)) = bearer(bytes, i) {
            return Some((start, end, MARK));
        }
    }
    if bytes[i] == b'=' || bytes[i] == b':' {
        return assignment(bytes, i).map(|(start, end)| (start, end, MARK));
    }
    None
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn starts_with_ignore_case(bytes: &[u8], at: usize, prefix: &str) -> bool {
    bytes
        .get(at..at + prefix.len())
        .is_some_and(|s| s.eq_ignore_ascii_case(prefix.as_bytes()))
}

/// How many bytes from `at` satisfy `class`.
pub(crate) fn run(bytes: &[u8], at: usize, class: impl Fn(u8) -> bool) -> usize {
    bytes[at.min(bytes.len())..]
        .iter()
        .take_while(|b| class(**b))
        .count()
}

/// Published key prefixes and the shape of the rest.
struct Prefix {
    prefix: &'static str,
    /// The fewest characters after the prefix that make it a key.
    min: usize,
    /// Exactly `min` (AWS key ids have a fixed length).
    exact: bool,
    body: Body,
}

/// The characters of a key after its prefix.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Body {
    /// Letters, digits, `_` and `-`: the body runs to the end of the run.
    KeyChars,
    Alnum,
    UpperAlnum,
}

impl Body {
    fn accepts(self, b: u8) -> bool {
        match self {
            Body::KeyChars => key_char(b),
            Body::Alnum => b.is_ascii_alphanumeric(),
            Body::UpperAlnum => b.is_ascii_uppercase() || b.is_ascii_digit(),
        }
    }
}

fn key_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

const PREFIXES: &[Prefix] = &[
    // Anthropic (sk-ant-api03-…), OpenAI (sk-…, sk-proj-…).
    Prefix {
        prefix: "sk-",
        min: 20,
        exact: false,
        body: Body::KeyChars,
    },
    Prefix {
        prefix: "github_pat_",
        min: 20,
        exact: false,
        body: Body::KeyChars,
    },
    Prefix {
        prefix: "ghp_",
        min: 20,
        exact: false,
        body: Body::Alnum,
    },
    Prefix {
        prefix: "gho_",
        min: 20,
        exact: false,
        body: Body::Alnum,
    },
    Prefix {
        prefix: "ghs_",
        min: 20,
        exact: false,
        body: Body::Alnum,
    },
    Prefix {
        prefix: "ghu_",
        min: 20,
        exact: false,
        body: Body::Alnum,
    },
    Prefix {
        prefix: "ghr_",
        min: 20,
        exact: false,
        body: Body::Alnum,
    },
    Prefix {
        prefix: "AKIA",
        min: 16,
        exact: true,
        body: Body::UpperAlnum,
    },
    Prefix {
        prefix: "ASIA",
        min: 16,
        exact: true,
        body: Body::UpperAlnum,
    },
    Prefix {
        prefix: "AIza",
        min: 30,
        exact: false,
        body: Body::KeyChars,
    },
    Prefix {
        prefix: "glpat-",
        min: 20,
        exact: false,
        body: Body::KeyChars,
    },
];

/// The run of key characters that starts at `start`: where it ends and
/// where its last digit is, measured once and only when a key whose body
/// spans the rest of the run is being checked.
struct Run<'a> {
    bytes: &'a [u8],
    start: usize,
    measured: Option<(usize, Option<usize>)>,
}

impl Run<'_> {
    fn measure(&mut self) -> (usize, Option<usize>) {
        let (bytes, start) = (self.bytes, self.start);
        *self.measured.get_or_insert_with(|| {
            let end = start + run(bytes, start, key_char);
            let last_digit = bytes[start..end]
                .iter()
                .rposition(u8::is_ascii_digit)
                .map(|at| start + at);
            (end, last_digit)
        })
    }

    /// Whether the run holds a digit at or after `from`.
    fn digit_from(&mut self, from: usize) -> bool {
        self.measure().1.is_some_and(|last| last >= from)
    }
}

/// The first key in the run of key characters from `i`: one that starts
/// the run or follows a `-` or `_` inside it, since a key is often glued to
/// a name (`evt-sk-ant-…`, `key_sk-…`, `id-AKIA…`). A key preceded by a
/// letter or digit is part of a word (`task-…`, `risk-…`) and is not one.
fn key_in_run(bytes: &[u8], i: usize) -> Option<(usize, usize)> {
    let mut run = Run {
        bytes,
        start: i,
        measured: None,
    };
    let mut at = i;
    while at < bytes.len() && key_char(bytes[at]) {
        if at == i || matches!(bytes[at - 1], b'-' | b'_') {
            if let Some(end) = prefixed_token(bytes, at, &mut run) {
                return Some((at, end));
            }
        }
        at += 1;
    }
    None
}

/// A key with a published prefix at `i`, inside `run`: where it ends.
fn prefixed_token(bytes: &[u8], i: usize, run_at: &mut Run) -> Option<usize> {
    for p in PREFIXES {
        if !bytes[i..].starts_with(p.prefix.as_bytes()) {
            continue;
        }
        let body = i + p.prefix.len();
        // Real keys are random: a body without a digit is a word
        // ("sk-learn-compatible-…"), not a key.
        let (n, random) = if p.body == Body::KeyChars {
            (run_at.measure().0 - body, run_at.digit_from(body))
        } else {
            let n = run(bytes, body, |b| p.body.accepts(b));
            (n, bytes[body..body + n].iter().any(u8::is_ascii_digit))
        };
        let ends_cleanly = !bytes.get(body + n).copied().is_some_and(is_word);
        if n >= p.min && random && (!p.exact || (n == p.min && ends_cleanly)) {
            return Some(body + n);
        }
    }
    // Slack: xoxb-, xoxp-, xoxa-, xoxo-, xoxs-, xoxr-, xoxe-.
    if bytes[i..].starts_with(b"xox")
        && bytes.get(i + 3).is_some_and(u8::is_ascii_lowercase)
        && bytes.get(i + 4) == Some(&b'-')
    {
        let end = run_at.measure().0;
        if end - (i + 5) >= 10 && run_at.digit_from(i + 5) {
            return Some(end);
        }
    }
    None
}

fn token68(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'+' | b'/' | b'=')
}

/// `Bearer <token>`: the token's range.
fn bearer(bytes: &[u8], i: usize) -> Option<(usize, usize)> {
    if !starts_with_ignore_case(bytes, i, "bearer") {
        return None;
    }
    let spaces = run(bytes, i + 6, |b| b == b' ' || b == b'\t');
    if spaces == 0 {
        return None;
    }
    let start = i + 6 + spaces;
    let n = run(bytes, start, token68);
    let token = &bytes[start..start + n];
    // "Bearer authentication" is prose; a token has digits or symbols.
    let random = token.iter().any(|b| !b.is_ascii_alphabetic());
    (n >= 8 && random && !token.starts_with(b"[REDACTED")).then_some((start, start + n))
}

/// Where `needle` first occurs in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A `-----BEGIN … PRIVATE KEY-----` block at `i`: where it ends (after
/// its END line, or the end of the text when it was cut short).
fn pem_block(bytes: &[u8], i: usize) -> Option<usize> {
    const BEGIN: &[u8] = b"-----BEGIN ";
    const TAIL: &[u8] = b"PRIVATE KEY-----";
    if !bytes[i..].starts_with(BEGIN) {
        return None;
    }
    // A BEGIN line is short; reading at most 128 bytes of it keeps a long
    // line of lookalikes linear.
    let line = &bytes[i..bytes.len().min(i + 128)];
    let header = &line[..run(line, 0, |b| b != b'\n')];
    let header_end = i + find(header, TAIL)? + TAIL.len();
    let end = find(&bytes[header_end..], b"-----END ").and_then(|at| {
        let from = header_end + at;
        find(&bytes[from..], TAIL).map(|close| from + close + TAIL.len())
    });
    Some(end.unwrap_or(bytes.len()))
}

/// Names whose value is a secret, matched at the end of the name.
const SECRET_NAMES: &[&str] = &[
    "password",
    "passwd",
    "secret",
    "token",
    "api_key",
    "api-key",
    "apikey",
    "access_key",
    "access-key",
    "private_key",
    "private-key",
    "credentials",
];

/// The name that ends just before the separator at `sep`, skipping a
/// closing quote and spaces: `api_key` in `"api_key" : "…"`.
fn name_before(bytes: &[u8], sep: usize) -> &[u8] {
    let mut end = sep;
    while end > 0 && bytes[end - 1] == b' ' {
        end -= 1;
    }
    if end > 0 && matches!(bytes[end - 1], b'"' | b'\'') {
        end -= 1;
    }
    let mut start = end;
    while start > 0 && (is_word(bytes[start - 1]) || bytes[start - 1] == b'-') {
        start -= 1;
    }
    &bytes[start..end]
}

/// `name=value` or `name: value` with a secret name: the value's range.
fn assignment(bytes: &[u8], sep: usize) -> Option<(usize, usize)> {
    let name = name_before(bytes, sep).to_ascii_lowercase();
    if name.is_empty() {
        return None;
    }
    let header = name == b"authorization" || name.ends_with(b"-authorization");
    if !header && !SECRET_NAMES.iter().any(|s| name.ends_with(s.as_bytes())) {
        return None;
    }
    // `a==b`, `http://`, `::`: not assignments.
    if bytes
        .get(sep + 1)
        .is_some_and(|b| matches!(b, b'=' | b':' | b'/'))
    {
        return None;
    }
    let start = sep + 1 + run(bytes, sep + 1, |b| b == b' ' || b == b'\t');
    let quote = bytes
        .get(start)
        .copied()
        .filter(|b| matches!(b, b'"' | b'\''));
    let start = start + usize::from(quote.is_some());
    if bytes[start..].starts_with(b"[REDACTED") {
        return None;
    }
    let in_value = |b: u8| match quote {
        Some(q) => b != q && b != b'\n',
        None if header => !matches!(b, b'\n' | b'\r' | b'"' | b'\''),
        None => {
            !b.is_ascii_whitespace()
                && !matches!(b, b',' | b';' | b'&' | b'"' | b'\'' | b'}' | b')' | b']')
        }
    };
    // Decide on a bounded prefix, so that a refused candidate costs at
    // most PROBE bytes ("token:token:token:…" stays linear); only a value
    // that will be replaced is scanned to its end.
    let probe =
        &bytes[start..start + run(&bytes[..bytes.len().min(start + PROBE)], start, in_value)];
    if probe.is_empty() {
        return None;
    }
    let whole = probe.len() < PROBE;
    // `name: value` is also prose ("the token: expired"); an unquoted value
    // after a colon is redacted only when it looks like a credential.
    let plain_colon = bytes[sep] == b':' && quote.is_none() && !header;
    if plain_colon && whole && !looks_like_credential(probe) {
        return None;
    }
    // `tokens=1200` style counts are not secrets.
    if !header && whole && probe.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some((start, start + run(bytes, start, in_value)))
}

/// How much of a candidate value is read before deciding.
const PROBE: usize = 256;

fn looks_like_credential(value: &[u8]) -> bool {
    value.len() >= 8
        && value.iter().any(u8::is_ascii_digit)
        && value.iter().any(u8::is_ascii_alphabetic)
}

/// What an e-mail address is replaced with.
pub const EMAIL_MARK: &str = "[REDACTED EMAIL]";
/// What a phone number is replaced with.
pub const PHONE_MARK: &str = "[REDACTED PHONE]";
/// What a payment card number is replaced with.
pub const CARD_MARK: &str = "[REDACTED CARD]";
/// What an IBAN is replaced with.
pub const IBAN_MARK: &str = "[REDACTED IBAN]";
/// What a national identity number is replaced with.
pub const NATIONAL_ID_MARK: &str = "[REDACTED ID]";

fn personal_mark(category: Category) -> &'static str {
    match category {
        Category::Email => EMAIL_MARK,
        Category::Phone => PHONE_MARK,
        Category::PaymentCard => CARD_MARK,
        Category::Iban => IBAN_MARK,
        Category::NationalId => NATIONAL_ID_MARK,
    }
}

/// Known secrets shorter than this are not matched literally: a
/// three-letter "secret" would blank ordinary words.
const SHORTEST_KNOWN_SECRET: usize = 6;

/// `text` as it may leave the host: every `known` secret (a configured
/// webhook token, a bot key) replaced wherever it appears, then [`redact`],
/// then the personal data [`crate::pii`] recognises.
pub fn redact_outbound(text: &str, known: &[&str]) -> String {
    let mut out = Cow::Borrowed(text);
    for secret in known {
        if secret.len() >= SHORTEST_KNOWN_SECRET && out.contains(secret) {
            out = Cow::Owned(out.replace(secret, MARK));
        }
    }
    let tokens = redact(&out).into_owned();
    pass(&tokens, Pass::Personal).into_owned()
}

/// [`redact_outbound`] applied to every string inside `value`, at any
/// depth, object keys as well as values.
pub fn redact_outbound_json(value: &mut serde_json::Value, known: &[&str]) {
    json_with(value, &|text| redact_outbound(text, known));
}

/// [`redact_outbound_json`] for an object: every key and every value. Keys
/// that redact alike are all kept, each later one numbered (`[REDACTED]
/// (2)`), and a key that needed no redaction is never displaced.
pub fn redact_outbound_object(
    map: &mut serde_json::Map<String, serde_json::Value>,
    known: &[&str],
) {
    object_with(map, &|text| redact_outbound(text, known));
}

/// [`redact`] applied to every string inside an object, at any depth,
/// keys as well as values, as [`redact_outbound_object`] does: the rule
/// for a JSON object an agent wrote into what loopx keeps (a compute run).
pub fn redact_object(map: &mut serde_json::Map<String, serde_json::Value>) {
    object_with(map, &redact_owned);
}

/// `rule` applied to every string inside `value`, object keys included.
fn json_with(value: &mut serde_json::Value, rule: &dyn Fn(&str) -> String) {
    use serde_json::Value;
    match value {
        Value::String(text) => {
            let clean = rule(text);
            if clean != *text {
                *text = clean;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| json_with(item, rule)),
        Value::Object(map) => object_with(map, rule),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// `rule` applied to every key and value of `map`, keeping every entry.
fn object_with(
    map: &mut serde_json::Map<String, serde_json::Value>,
    rule: &dyn Fn(&str) -> String,
) {
    map.values_mut().for_each(|item| json_with(item, rule));
    if map.keys().all(|key| rule(key) == *key) {
        return;
    }
    let mut redacted = Vec::new();
    for (key, value) in std::mem::take(map) {
        let clean = rule(&key);
        if clean == key {
            map.insert(key, value);
        } else {
            redacted.push((clean, value));
        }
    }
    for (clean, value) in redacted {
        let mut key = clean.clone();
        let mut n = 2;
        while map.contains_key(&key) {
            key = format!("{clean} ({n})");
            n += 1;
        }
        map.insert(key, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hides(text: &str, secret: &str) -> String {
        let out = redact(text).into_owned();
        assert!(!out.contains(secret), "{secret:?} survived in {out:?}");
        assert!(out.contains("[REDACTED"), "{out:?}");
        out
    }

    #[test]
    fn anthropic_and_openai_keys_are_redacted() {
        let key = "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789_-abcdEFGH";
        let out = hides(&format!("Error: invalid x-api-key {key} (401)"), key);
        assert_eq!(out, "Error: invalid x-api-key [REDACTED] (401)");
        hides(
            "OPENAI sk-proj-abcdefghijklmnopqrstuvwx1234",
            "abcdefghijklmnop",
        );
        hides("key=sk-abcdefghijklmnopqrstuvwxyz12", "sk-abcdefghij");
    }

    #[test]
    fn github_tokens_are_redacted() {
        for key in [
            "ghp_0123456789abcdefghijABCDEFGHIJ012345",
            "gho_0123456789abcdefghijABCDEFGHIJ012345",
            "ghs_0123456789abcdefghijABCDEFGHIJ012345",
            "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
        ] {
            let out = hides(&format!("remote: {key} is not valid."), key);
            assert_eq!(out, "remote: [REDACTED] is not valid.");
        }
    }

    #[test]
    fn keys_glued_to_a_name_by_a_dash_or_underscore_are_redacted() {
        let key = "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789_-abcdEFGH";
        for (text, expected) in [
            (
                format!("--event-id evt-{key} sent"),
                "--event-id evt-[REDACTED] sent",
            ),
            (format!("--output key_{key}"), "--output key_[REDACTED]"),
            (
                "id-AKIAIOSFODNN7EXAMPLE, token_ghp_0123456789abcdefghijABCDEFGHIJ012345".into(),
                "id-[REDACTED], token_[REDACTED]",
            ),
            (
                "x-glpat-abcdefghij0123456789 slack_xoxb-1234567890-abcdefghijkl".into(),
                "x-[REDACTED] slack_[REDACTED]",
            ),
            // Two keys in one run: the second is found after the first.
            (
                "ghp_0123456789abcdefghijABCDEFGHIJ012345-ghp_9876543210abcdefghijABCDEFGHIJ012345"
                    .into(),
                "[REDACTED]-[REDACTED]",
            ),
        ] {
            assert_eq!(redact(&text), expected, "{text}");
        }
    }

    #[test]
    fn aws_access_key_ids_are_redacted() {
        let out = hides("aws: AKIAIOSFODNN7EXAMPLE denied", "AKIAIOSFODNN7EXAMPLE");
        assert_eq!(out, "aws: [REDACTED] denied");
        hides("ASIAY34FZKBOKMUTVV7A,", "ASIAY34FZKBOKMUTVV7A");
        hides(
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "wJalrXUtnFEMI",
        );
    }

    #[test]
    fn slack_google_and_gitlab_tokens_are_redacted() {
        hides("xoxb-1234567890-abcdefghijkl", "1234567890-abcdefghijkl");
        hides("xoxp-1234567890-abcdefghijkl", "1234567890-abcdefghijkl");
        hides(
            "AIzaSyA-1234567890abcdefghijklmnopqrst",
            "SyA-1234567890abcdefghij",
        );
        hides("glpat-abcdefghij0123456789", "abcdefghij0123456789");
    }

    #[test]
    fn bearer_tokens_and_authorization_headers_are_redacted() {
        let out = hides(
            "curl -H 'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.abc' failed",
            "eyJhbGci",
        );
        assert_eq!(out, "curl -H 'Authorization: [REDACTED]' failed");
        let out = hides("sent bearer abcdef123456789 to the API", "abcdef123456789");
        assert_eq!(out, "sent bearer [REDACTED] to the API");
        let out = hides(
            "authorization: Basic dXNlcjpwYXNz\nnext line",
            "dXNlcjpwYXNz",
        );
        assert_eq!(out, "authorization: [REDACTED]\nnext line");
        hides(r#"{"Authorization":"Token abc123def456"}"#, "abc123def456");
    }

    #[test]
    fn private_key_blocks_are_redacted_whole() {
        let out = hides(
            "Authorization: Bearer x.y.z123; -----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIB\n-----END EC PRIVATE KEY-----\nafter",
            "MHcCAQEEIB",
        );
        assert_eq!(out, "Authorization: [REDACTED]\nafter");
        let block = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA1234\nabcd==\n-----END RSA PRIVATE KEY-----";
        let out = hides(&format!("read key:\n{block}\ndone"), "MIIEpAIBAAKCAQEA1234");
        assert_eq!(out, "read key:\n[REDACTED PRIVATE KEY]\ndone");
        let out = hides(
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEA (truncated",
            "b3BlbnNzaC1rZXktdjEA",
        );
        assert_eq!(out, "[REDACTED PRIVATE KEY]");
        hides(
            "-----BEGIN PRIVATE KEY-----\nQUJD\n-----END PRIVATE KEY-----",
            "QUJD",
        );
        // Public material is not a secret.
        let public = "-----BEGIN PUBLIC KEY-----\nQUJD\n-----END PUBLIC KEY-----";
        assert_eq!(redact(public), public);
        let cert = "-----BEGIN CERTIFICATE-----\nQUJD\n-----END CERTIFICATE-----";
        assert_eq!(redact(cert), cert);
    }

    #[test]
    fn secret_assignments_are_redacted_and_the_name_is_kept() {
        for (text, expected) in [
            ("password=hunter2", "password=[REDACTED]"),
            ("DB_PASSWORD=hunter2 rest", "DB_PASSWORD=[REDACTED] rest"),
            ("GITHUB_TOKEN=abc&x=1", "GITHUB_TOKEN=[REDACTED]&x=1"),
            ("api_key = 'q w e'", "api_key = '[REDACTED]'"),
            (
                r#"{"api_key": "abc", "n": 1}"#,
                r#"{"api_key": "[REDACTED]", "n": 1}"#,
            ),
            ("client_secret: s3cr3tValue", "client_secret: [REDACTED]"),
            ("x-api-key: k3yvalue99", "x-api-key: [REDACTED]"),
            ("access_token=ya29.a0Af", "access_token=[REDACTED]"),
        ] {
            assert_eq!(redact(text), expected, "{text}");
        }
    }

    #[test]
    fn ordinary_text_and_digests_are_left_alone() {
        for text in [
            "",
            "Proved lemma B; 3 gaps remain.",
            "digest sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
            "tokens: 1200, usd: 0.25, max_tokens=4096",
            "The token limit was reached; use a token to sign in.",
            "the token: expired",
            "password: required",
            "ask-me-anything task-scheduler desk-lamp",
            "risk-averse-approach-to-everything-here",
            "sk-learn-compatible-estimator-pipeline",
            "use-sk-learn-compatible-estimators-here",
            "disk-0123456789abcdefghijklmnop task-0123456789abcdefghijklmnop",
            "HAKIAIOSFODNN7EXAMPLE",
            "Bearer authentication is used",
            "a == b and c := d, http://example.com/path?q=1",
            "Bearer tokens are documented in docs/auth.md",
            "-----BEGIN CERTIFICATE-----",
            "--- separator ---",
            "AKIA is a prefix; AKIAshort",
            "café naïve ✓ 日本語 token",
        ] {
            assert_eq!(redact(text), text, "{text}");
            assert!(matches!(redact(text), Cow::Borrowed(_)));
        }
    }

    #[test]
    fn hostile_repetitions_are_scanned_in_linear_time() {
        for unit in [
            "sk-",
            "token:",
            "-----BEGIN ",
            "bearer ",
            "ghp_",
            "password=x:",
            "x-sk-",
            "a_ghp_",
            "-AKIA",
            "_xoxb-",
            "ghp_0123456789abcdefghij-",
        ] {
            // Not a speed test (debug builds on a loaded machine vary
            // tenfold): a quadratic scan of this input would take hours,
            // a linear one well under a second, so the bound only catches
            // the first.
            let text = unit.repeat(50_000);
            let started = std::time::Instant::now();
            let _ = redact(&text);
            assert!(
                started.elapsed() < std::time::Duration::from_secs(20),
                "{unit:?} x 50000 took {:?}",
                started.elapsed()
            );
        }
    }

    #[test]
    fn redaction_is_idempotent_and_keeps_unicode_around_secrets() {
        let text = "é ghp_0123456789abcdefghijABCDEFGHIJ012345 ✓ password=x";
        let once = redact(text).into_owned();
        assert_eq!(once, "é [REDACTED] ✓ password=[REDACTED]");
        assert_eq!(redact(&once), once);
    }

    #[test]
    fn outbound_redaction_hides_configured_secrets_emails_and_phone_numbers() {
        let out = redact_outbound(
            "hook T0pSecretHookValue; mail ada@example.org. call +44 20 7946 0958 or (555) 123-4567 or 555-123-4567",
            &["T0pSecretHookValue"],
        );
        assert_eq!(
            out,
            "hook [REDACTED]; mail [REDACTED EMAIL]. call [REDACTED PHONE] or [REDACTED PHONE] or [REDACTED PHONE]"
        );
    }

    #[test]
    fn outbound_redaction_hides_cards_ibans_and_national_ids_and_keeps_failed_checks() {
        let out = redact_outbound(
            "card 4111 1111 1111 1111, iban DE89 3704 0044 0532 0130 00, dni 12345678Z, \
             typo DE89 3704 0044 0532 0130 01",
            &[],
        );
        assert_eq!(
            out,
            "card [REDACTED CARD], iban [REDACTED IBAN], dni [REDACTED ID], \
             typo DE89 3704 0044 0532 0130 01"
        );
    }

    #[test]
    fn outbound_redaction_leaves_dates_digests_versions_and_counts() {
        for text in [
            "2026-12-03T14:03:09Z and 2026-12-03 14:03",
            "sha256:0123456789abcdef0123456789abcdef",
            "v1.2.3, 12 iterations, 1200 tokens, $3.50, issue #1234567",
            "user@localhost is not an address; a@b.c neither",
            "2+2=4, 10-20-30",
        ] {
            assert_eq!(redact_outbound(text, &[]), text);
        }
    }

    #[test]
    fn outbound_json_redaction_hides_secrets_used_as_keys_and_loses_no_entry() {
        let mut value = serde_json::json!({
            "KnownSecret99": 1,
            "[REDACTED]": 2,
            "nested": {"key_sk-ant-api03-AbCdEfGhIjKlMnOp0123456789": {"ghp_0123456789abcdefghijABCDEFGHIJ012345": 3}},
            "list": [{"token=KnownSecret99": 4}],
            "plain": 5
        });
        redact_outbound_json(&mut value, &["KnownSecret99"]);
        let text = value.to_string();
        for secret in ["KnownSecret99", "AbCdEfGhIjKlMnOp", "ghp_0123"] {
            assert!(!text.contains(secret), "{secret} survived in {text}");
        }
        assert_eq!(value["[REDACTED]"], 2, "{text}");
        assert_eq!(value["[REDACTED] (2)"], 1, "{text}");
        assert_eq!(value["nested"]["key_[REDACTED]"]["[REDACTED]"], 3);
        assert_eq!(value["list"][0]["token=[REDACTED]"], 4);
        assert_eq!(value["plain"], 5);
    }

    #[test]
    fn outbound_json_redaction_reaches_every_nested_string_and_keeps_keys() {
        let mut value = serde_json::json!({
            "password": "x",
            "nested": {"list": ["Bearer abcdefghijklmnop123456", {"deep": "KnownSecret99"}]},
            "n": 3
        });
        redact_outbound_json(&mut value, &["KnownSecret99"]);
        let text = value.to_string();
        assert!(
            !text.contains("abcdefghijklmnop123456") && !text.contains("KnownSecret99"),
            "{text}"
        );
        assert!(
            text.contains("\"password\"") && text.contains("\"n\":3"),
            "{text}"
        );
    }
}
