//! Personal data in text that is about to leave the machine: which kinds
//! it holds and how many of each, never the values.
//!
//! A panel reviewer's brief is sent to an external model API. Before it
//! goes, [`scan`] reports the personal data it carries as [`Findings`], a
//! count per [`Category`], so that a refusal or a warning can say what was
//! found without repeating it. This module owns the rules that recognise
//! each kind; [`crate::redact`]'s outbound pass uses the same rules (through
//! `found_at`) to hide what they find. It does not decide what happens to
//! a brief with findings (the caller refuses, warns or redacts), and it does
//! no IO.
//!
//! The rules are deterministic and conservative: a candidate needs the
//! exact written shape of its kind and, where the kind has one, a valid
//! checksum. What loopx briefs are full of must never count: dates
//! (`2026-12-04`), times, ISO timestamps, versions (`1.18.3`), digests
//! (`sha256:9f86…`), UUIDs, run ids (`run-a3c3d1f8…`), counts, ports
//! (`127.0.0.1:7878`) and paths. So a candidate must stand on its own: it
//! neither continues a word or identifier nor is continued by one, and a
//! dash, dot, slash or colon glued to a letter or digit on its far side
//! counts as continuing (`v1.18.3`, `run-834…`, `:7878`, `12:30`).
//!
//! - **Email address**: `local@domain.tld`, the domain with a dot and a
//!   last label of two or more letters.
//! - **Phone number**: `+` and 8–15 digits, the first not 0, in groups
//!   separated by spaces, dashes, dots or parentheses (`+44 20 7946 0958`,
//!   `+1 (555) 123-4567`); the North-American `(555) 123-4567`,
//!   `555-123-4567` and `555.123.4567`; a national number with a trunk `0`
//!   (not `00`), 9–11 digits in two or more groups, the first of 2–5
//!   digits, separated by one kind of space, dash or dot, or with the area
//!   code in parentheses (`020 7946 0958`, `06 12 34 56 78`, `(030) 1234
//!   5678`).
//! - **Payment card number**: 13–19 digits, together or in groups of 4–6
//!   (the last may be shorter) separated by one kind of space or dash,
//!   Luhn-valid, with an issuer prefix at a length that issuer uses: Visa
//!   `4` (13–19), Mastercard `51`–`55` and `2221`–`2720` (16), American
//!   Express `34`, `37` (15), Discover `6011`, `644`–`649`, `65` (16–19),
//!   JCB `3528`–`3589` (16–19).
//! - **IBAN**: a country code from [`IBAN_LENGTHS`] at that country's
//!   length, two check digits and the account part, upper case, compact
//!   or in groups of four separated by single spaces, whose mod-97
//!   remainder is 1.
//! - **National identity number**, exactly these, each with its checksum:
//!   - Spanish DNI `12345678Z` and NIE `X1234567L` (also with a dash
//!     before the letter): the letter is the number mod 23, NIE's leading
//!     X, Y, Z counting as 0, 1, 2;
//!   - Swedish personnummer and samordningsnummer `YYMMDD-NNNC`,
//!     `YYMMDD+NNNC` or `YYYYMMDD-NNNC`: a real date (the day plus 60 for a
//!     samordningsnummer), Luhn over the last ten digits;
//!   - Norwegian fødselsnummer and D-number, `DDMMYYIIIKK` or `DDMMYY
//!     IIIKK`: a real date (the day plus 40 for a D-number) and both mod-11
//!     check digits;
//!   - Polish PESEL, `YYMMDDZZZZQ`: a real date, the century carried in the
//!     month, and its weighted check digit;
//!   - Finnish HETU, `DDMMYYCZZZQ`: a real date, the century sign `+`, `-`,
//!     `U`–`Y` or `A`–`F`, an individual number from 002 and the check
//!     character mod 31.
//!
//!   Not recognised: the Dutch BSN (nine bare digits pass its 11-test
//!   once in eleven, so counts and ids would) and numbers with no
//!   checksum (US SSN, Danish CPR).
//!
//! It is a hand-written single pass (no regex engine): every candidate
//! reads a bounded stretch of text, so a scan is linear in the input.

use std::collections::BTreeMap;

use crate::redact::run;

/// A kind of personal data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    Email,
    Phone,
    PaymentCard,
    Iban,
    NationalId,
}

impl Category {
    /// What one of these is called in a sentence.
    pub fn name(self) -> &'static str {
        match self {
            Category::Email => "email address",
            Category::Phone => "phone number",
            Category::PaymentCard => "payment card number",
            Category::Iban => "IBAN",
            Category::NationalId => "national identity number",
        }
    }

    fn plural(self) -> &'static str {
        match self {
            Category::Email => "email addresses",
            Category::Phone => "phone numbers",
            Category::PaymentCard => "payment card numbers",
            Category::Iban => "IBANs",
            Category::NationalId => "national identity numbers",
        }
    }
}

/// How many of each category were found; never the matched values.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Findings {
    pub counts: BTreeMap<Category, u32>,
}

impl Findings {
    pub fn is_empty(&self) -> bool {
        self.counts.values().all(|n| *n == 0)
    }

    /// "2 email addresses, 1 IBAN" — categories and counts only; "no
    /// personal data" when there is none.
    pub fn summary(&self) -> String {
        let parts: Vec<String> = self
            .counts
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(category, n)| match n {
                1 => format!("1 {}", category.name()),
                n => format!("{n} {}", category.plural()),
            })
            .collect();
        if parts.is_empty() {
            "no personal data".to_owned()
        } else {
            parts.join(", ")
        }
    }

    fn add(&mut self, category: Category) {
        let n = self.counts.entry(category).or_default();
        *n = n.saturating_add(1);
    }
}

/// The variable whose value approves one outbound text that holds
/// personal data: the SHA-256 of its exact bytes.
pub const APPROVAL_ENV: &str = "AAS_AUTOLOOP_EXTERNAL_PII_APPROVAL_SHA256";

/// An outbound text held back for the personal data in it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the brief about to leave this machine holds personal data ({}), so it was not sent; review it, then approve exactly these bytes with {APPROVAL_ENV}={digest}, or remove the data", findings.summary())]
pub struct Unapproved {
    pub findings: Findings,
    /// The digest that would approve it.
    pub digest: crate::digest::Digest,
}

/// Whether `text` may leave the machine: it holds no personal data, or
/// `approval` is the SHA-256 of its exact bytes. The refusal names the
/// categories and counts, never the values.
pub fn outbound(text: &str, approval: Option<&str>) -> Result<(), Unapproved> {
    let findings = scan(text);
    if findings.is_empty() {
        return Ok(());
    }
    let digest = crate::digest::Digest::of_bytes(text.as_bytes());
    if approval.map(str::trim) == Some(digest.as_str()) {
        return Ok(());
    }
    Err(Unapproved { findings, digest })
}

/// The personal data in `text`, counted by category.
pub fn scan(text: &str) -> Findings {
    let bytes = text.as_bytes();
    let mut findings = Findings::default();
    let mut i = 0;
    while i < bytes.len() {
        i = match found_at(bytes, i) {
            Some(Span::Personal(category, end)) => {
                findings.add(category);
                end
            }
            Some(Span::Shaped(end)) => end,
            None => i + 1,
        };
    }
    findings
}

/// What starts at one position of the text. Both ends lie past the start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Span {
    /// Personal data of this category, ending at this byte.
    Personal(Category, usize),
    /// Something written in the shape of personal data that fails its
    /// check (an IBAN with a wrong check digit, a card number that is not
    /// Luhn-valid), ending at this byte. Reading resumes after it, so that
    /// its inner groups are not taken for something smaller (`0532 0130
    /// 01` inside an IBAN is not a phone number).
    Shaped(usize),
}

/// What starts at `i`, if anything: [`scan`] counts the personal data,
/// outbound redaction replaces it, and both read on after either span.
pub(crate) fn found_at(bytes: &[u8], i: usize) -> Option<Span> {
    if let Some(end) = email(bytes, i) {
        return Some(Span::Personal(Category::Email, end));
    }
    let first = bytes[i];
    if !(first.is_ascii_alphanumeric() || first == b'+' || first == b'(') || joined_before(bytes, i)
    {
        return None;
    }
    if let Some((end, valid)) = iban(bytes, i) {
        return Some(if valid {
            Span::Personal(Category::Iban, end)
        } else {
            Span::Shaped(end)
        });
    }
    if let Some(end) = lettered_national_id(bytes, i) {
        return Some(Span::Personal(Category::NationalId, end));
    }
    let run = DigitRun::read(bytes, i)?;
    let category = if numeric_national_id(&run) {
        Category::NationalId
    } else if payment_card(&run) {
        Category::PaymentCard
    } else if phone(&run) {
        Category::Phone
    } else if written_like_a_card(&run) || run.lead == Some(b'+') {
        return Some(Span::Shaped(run.end));
    } else {
        return None;
    };
    Some(Span::Personal(category, run.end))
}

/// Whether a candidate starting at `i` would be the tail of a longer word,
/// number or identifier.
fn joined_before(bytes: &[u8], i: usize) -> bool {
    let Some(prev) = i.checked_sub(1).map(|p| bytes[p]) else {
        return false;
    };
    let before = i.checked_sub(2).map(|p| bytes[p]);
    match prev {
        b'_' | b'+' | b'@' => true,
        b'-' | b'.' | b'/' | b'\\' => before.is_some_and(|b| b.is_ascii_alphanumeric()),
        // `Tel:` introduces a number; `12:` and `sha256:` continue one.
        b':' | b',' => before.is_some_and(|b| b.is_ascii_digit()),
        b => b.is_ascii_alphanumeric(),
    }
}

/// Whether what ends at `end` goes on into a longer word, number or
/// identifier (a sentence's final dot does not).
fn joined_after(bytes: &[u8], end: usize) -> bool {
    let Some(&next) = bytes.get(end) else {
        return false;
    };
    let after = bytes.get(end + 1);
    match next {
        b'_' | b'@' => true,
        b'-' | b'.' | b'/' | b'\\' | b':' => after.is_some_and(u8::is_ascii_alphanumeric),
        b',' => after.is_some_and(u8::is_ascii_digit),
        b => b.is_ascii_alphanumeric(),
    }
}

/// The value of exactly `n` ASCII digits at `at`.
fn digits_at(bytes: &[u8], at: usize, n: usize) -> Option<u32> {
    let digits = bytes.get(at..at + n)?;
    digits
        .iter()
        .all(u8::is_ascii_digit)
        .then(|| number(digits.iter().map(|b| b - b'0')))
}

/// Decimal digit values read as one number.
fn number(digits: impl IntoIterator<Item = u8>) -> u32 {
    digits
        .into_iter()
        .fold(0u32, |n, d| n.wrapping_mul(10).wrapping_add(u32::from(d)))
}

/// Whether the day exists (February 29th only in leap years).
fn real_date(year: u32, month: u32, day: u32) -> bool {
    let (Ok(year), Ok(month), Ok(day)) =
        (i16::try_from(year), i8::try_from(month), i8::try_from(day))
    else {
        return false;
    };
    jiff::civil::Date::new(year, month, day).is_ok()
}

/// A two-digit year whose century is not written: 2000 is a leap year, so
/// 20YY accepts every February 29th some century has.
fn year_of_two_digits(yy: u32) -> u32 {
    2000 + yy
}

fn luhn_valid(digits: &[u8]) -> bool {
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(position, &d)| {
            let d = u32::from(d);
            match (position % 2 == 1, d * 2) {
                (false, _) => d,
                (true, doubled) if doubled > 9 => doubled - 9,
                (true, doubled) => doubled,
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

// ---------------------------------------------------------------------------
// Email addresses

fn email_local(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'%' | b'+' | b'-')
}

/// `local@domain.tld` starting at `i`, the domain with at least one dot
/// and a letters-only last label of two or more. Only tried where a local
/// part starts, so each is read once.
fn email(bytes: &[u8], i: usize) -> Option<usize> {
    if i > 0 && email_local(bytes[i - 1]) {
        return None;
    }
    let local = run(bytes, i, email_local);
    if local == 0 || bytes.get(i + local) != Some(&b'@') {
        return None;
    }
    let start = i + local + 1;
    let domain = run(bytes, start, |b| {
        b.is_ascii_alphanumeric() || b == b'-' || b == b'.'
    });
    // A sentence may end right after the address: the final dot is prose.
    let text = bytes[start..start + domain]
        .strip_suffix(b".")
        .unwrap_or(&bytes[start..start + domain]);
    let last_dot = text.iter().rposition(|b| *b == b'.')?;
    let tld = &text[last_dot + 1..];
    if last_dot == 0 || tld.len() < 2 || !tld.iter().all(u8::is_ascii_alphabetic) {
        return None;
    }
    Some(start + text.len())
}

// ---------------------------------------------------------------------------
// Numbers written in digit groups: cards, phones, the all-digit national ids

/// The most digits any number-shaped kind has (a 19-digit card). A longer
/// run is something else (a nanosecond timestamp, an all-digit UUID), and
/// stopping there keeps every reading bounded.
const LONGEST_NUMBER: usize = 19;

/// Digits in groups, as written from one starting point: what cards,
/// phone numbers and the all-digit national ids are judged on.
struct DigitRun {
    /// `+` or `(` written before the first digit.
    lead: Option<u8>,
    digits: [u8; LONGEST_NUMBER],
    len: usize,
    /// How many digits each group holds, in order.
    group_sizes: [u8; LONGEST_NUMBER],
    group_count: usize,
    /// What separates each group from the next: one byte of ` -.()+`, or
    /// two when a parenthesis meets another separator (`) `); the second
    /// is 0 when there is one.
    gaps: [[u8; 2]; LONGEST_NUMBER],
    end: usize,
}

impl DigitRun {
    /// The groups from `start` to the first byte that is neither a digit
    /// nor a separator followed by a digit; `None` when there are more
    /// than [`LONGEST_NUMBER`] digits or the run goes on into a word.
    fn read(bytes: &[u8], start: usize) -> Option<DigitRun> {
        let mut run = DigitRun {
            lead: None,
            digits: [0; LONGEST_NUMBER],
            len: 0,
            group_sizes: [0; LONGEST_NUMBER],
            group_count: 0,
            gaps: [[0; 2]; LONGEST_NUMBER],
            end: start,
        };
        let mut at = start;
        if matches!(bytes[at], b'+' | b'(') {
            run.lead = Some(bytes[at]);
            at += 1;
        }
        loop {
            let group_start = at;
            while let Some(&b) = bytes.get(at).filter(|b| b.is_ascii_digit()) {
                if run.len == LONGEST_NUMBER {
                    return None;
                }
                run.digits[run.len] = b - b'0';
                run.len += 1;
                at += 1;
            }
            if at == group_start {
                return None;
            }
            run.group_sizes[run.group_count] = (at - group_start) as u8;
            run.group_count += 1;
            let gap = gap_len(bytes, at);
            if gap == 0 {
                break;
            }
            run.gaps[run.group_count - 1] = [bytes[at], if gap == 2 { bytes[at + 1] } else { 0 }];
            at += gap;
        }
        run.end = at;
        (!joined_after(bytes, at)).then_some(run)
    }

    fn digits(&self) -> &[u8] {
        &self.digits[..self.len]
    }

    fn groups(&self) -> &[u8] {
        &self.group_sizes[..self.group_count]
    }

    fn gaps(&self) -> &[[u8; 2]] {
        &self.gaps[..self.group_count - 1]
    }

    /// The digits from `from` to `to` read as one number.
    fn value(&self, from: usize, to: usize) -> u32 {
        number(self.digits()[from..to].iter().copied())
    }
}

/// The length of the separator at `at` when a digit follows it, else 0.
fn gap_len(bytes: &[u8], at: usize) -> usize {
    let separator = |b: &u8| matches!(b, b' ' | b'-' | b'.' | b'(' | b')' | b'+');
    let digit_at = |i: usize| bytes.get(i).is_some_and(u8::is_ascii_digit);
    let (Some(first), second) = (bytes.get(at).filter(|b| separator(b)), bytes.get(at + 1)) else {
        return 0;
    };
    if digit_at(at + 1) {
        return 1;
    }
    match second.filter(|b| separator(b)) {
        Some(second) if (*first == b')' || *second == b'(') && digit_at(at + 2) => 2,
        _ => 0,
    }
}

/// Whether every gap is the same single byte, one of `allowed`.
fn one_separator(gaps: &[[u8; 2]], allowed: &[u8]) -> bool {
    gaps.iter()
        .all(|gap| *gap == gaps[0] && gap[1] == 0 && allowed.contains(&gap[0]))
}

/// Issuer prefixes (from, to, both with as many digits as the prefix) and
/// the card lengths the issuer uses.
const CARD_ISSUERS: [(u32, u32, usize, usize); 9] = [
    (4, 4, 13, 19),       // Visa
    (51, 55, 16, 16),     // Mastercard
    (2221, 2720, 16, 16), // Mastercard, 2-series
    (34, 34, 15, 15),     // American Express
    (37, 37, 15, 15),     // American Express
    (6011, 6011, 16, 19), // Discover
    (644, 649, 16, 19),   // Discover
    (65, 65, 16, 19),     // Discover
    (3528, 3589, 16, 19), // JCB
];

fn payment_card(run: &DigitRun) -> bool {
    let digits = run.digits();
    let issued = CARD_ISSUERS.iter().any(|&(from, to, shortest, longest)| {
        let prefix_len = from.checked_ilog10().map_or(1, |log| log as usize + 1);
        (shortest..=longest).contains(&digits.len())
            && (from..=to).contains(&run.value(0, prefix_len))
    });
    written_like_a_card(run) && issued && luhn_valid(digits)
}

/// 13–19 digits, together or in groups of 4–6 (the last may be shorter)
/// separated by one kind of space or dash.
fn written_like_a_card(run: &DigitRun) -> bool {
    let (last, leading) = run.groups().split_last().unwrap_or((&0, &[]));
    let grouped = leading.iter().all(|size| (4..=6).contains(size))
        && *last <= 6
        && one_separator(run.gaps(), b" -");
    run.lead.is_none() && (13..=19).contains(&run.len) && (run.group_count == 1 || grouped)
}

fn phone(run: &DigitRun) -> bool {
    international_phone(run) || north_american_phone(run) || national_phone(run)
}

/// `+` and 8–15 digits; a country code never starts with 0.
fn international_phone(run: &DigitRun) -> bool {
    run.lead == Some(b'+') && (8..=15).contains(&run.len) && run.digits()[0] != 0
}

/// `555-123-4567`, `555.123.4567`, `(555) 123-4567`.
fn north_american_phone(run: &DigitRun) -> bool {
    run.groups() == [3, 3, 4]
        && match run.lead {
            None => one_separator(run.gaps(), b"-."),
            _ => area_code_in_parentheses(run, b"-. "),
        }
}

/// A trunk `0` and 9–11 digits in groups: `020 7946 0958`, `(030) 1234
/// 5678`, `06.12.34.56.78`.
fn national_phone(run: &DigitRun) -> bool {
    let groups = run.groups();
    run.digits()[0] == 0
        && run.digits().get(1).is_some_and(|d| *d != 0)
        && (9..=11).contains(&run.len)
        && groups.len() >= 2
        && (2..=5).contains(&groups[0])
        && groups[1..].iter().all(|size| *size >= 2)
        && match run.lead {
            None => one_separator(run.gaps(), b" -."),
            _ => area_code_in_parentheses(run, b" -."),
        }
}

/// `(area) rest`: the run opened with `(`, its first gap closes it
/// (perhaps with a space), and the rest share one separator of `allowed`.
fn area_code_in_parentheses(run: &DigitRun, allowed: &[u8]) -> bool {
    run.lead == Some(b'(')
        && matches!(run.gaps().first(), Some([b')', 0] | [b')', b' ']))
        && one_separator(&run.gaps()[1..], allowed)
}

// ---------------------------------------------------------------------------
// National identity numbers

/// The national ids written with digits only (a dash, plus or space aside).
fn numeric_national_id(run: &DigitRun) -> bool {
    run.lead.is_none()
        && (swedish_personnummer(run) || norwegian_fodselsnummer(run) || polish_pesel(run))
}

/// The national ids with letters in them.
fn lettered_national_id(bytes: &[u8], i: usize) -> Option<usize> {
    spanish_dni(bytes, i)
        .or_else(|| spanish_nie(bytes, i))
        .or_else(|| finnish_hetu(bytes, i))
}

/// `YYMMDD-NNNC`, `YYMMDD+NNNC` (a hundred or older), `YYYYMMDD-NNNC`.
fn swedish_personnummer(run: &DigitRun) -> bool {
    let year = match run.groups() {
        [6, 4] => year_of_two_digits(run.value(0, 2)),
        [8, 4] => run.value(0, 4),
        _ => return false,
    };
    let date = run.len - 10;
    let month = run.value(date + 2, date + 4);
    let day = run.value(date + 4, date + 6);
    // A samordningsnummer (for people not registered in Sweden) adds 60 to the day.
    let day = if day > 60 { day - 60 } else { day };
    matches!(run.gaps(), [[b'-' | b'+', 0]])
        && real_date(year, month, day)
        && luhn_valid(&run.digits()[date..])
}

/// `DDMMYYIIIKK` or `DDMMYY IIIKK`, two mod-11 check digits.
fn norwegian_fodselsnummer(run: &DigitRun) -> bool {
    let written = match run.groups() {
        [11] => true,
        [6, 5] => run.gaps() == [[b' ', 0]],
        _ => false,
    };
    if !written {
        return false;
    }
    let digits = run.digits();
    // A D-number (for people not registered in Norway) adds 40 to the day.
    let day = run.value(0, 2);
    let day = if day > 40 { day - 40 } else { day };
    let first = mod11_check(&digits[..9], &[3, 7, 6, 1, 8, 9, 4, 5, 2]);
    let second = mod11_check(&digits[..10], &[5, 4, 3, 2, 7, 6, 5, 4, 3, 2]);
    real_date(year_of_two_digits(run.value(4, 6)), run.value(2, 4), day)
        && first == Some(digits[9])
        && second == Some(digits[10])
}

/// The mod-11 check digit of `digits` under `weights`; `None` when it
/// would be 10, which no valid number has.
fn mod11_check(digits: &[u8], weights: &[u32]) -> Option<u8> {
    let sum: u32 = digits
        .iter()
        .zip(weights)
        .map(|(d, w)| u32::from(*d) * w)
        .sum();
    match 11 - sum % 11 {
        11 => Some(0),
        10 => None,
        check => Some(check as u8),
    }
}

/// `YYMMDDZZZZQ`, eleven digits, the century carried in the month.
fn polish_pesel(run: &DigitRun) -> bool {
    if run.groups() != [11] {
        return false;
    }
    let (century, month) = match run.value(2, 4) {
        m @ 81..=92 => (1800, m - 80),
        m @ 1..=12 => (1900, m),
        m @ 21..=32 => (2000, m - 20),
        m @ 41..=52 => (2100, m - 40),
        m @ 61..=72 => (2200, m - 60),
        _ => return false,
    };
    let digits = run.digits();
    let sum: u32 = digits[..10]
        .iter()
        .zip([1, 3, 7, 9].iter().cycle())
        .map(|(d, w)| u32::from(*d) * w)
        .sum();
    real_date(century + run.value(0, 2), month, run.value(4, 6))
        && (10 - sum % 10) % 10 == u32::from(digits[10])
}

/// The Spanish control letters, indexed by the number mod 23.
const SPANISH_CONTROL_LETTERS: &[u8; 23] = b"TRWAGMYFPDXBNJZSQVHLCKE";

/// `12345678Z` or `12345678-Z`.
fn spanish_dni(bytes: &[u8], i: usize) -> Option<usize> {
    let number = digits_at(bytes, i, 8)?;
    spanish_control_letter(bytes, i + 8, number)
}

/// `X1234567L`: the leading X, Y or Z stands for 0, 1 or 2.
fn spanish_nie(bytes: &[u8], i: usize) -> Option<usize> {
    let lead = match bytes[i] {
        b'X' => 0,
        b'Y' => 1,
        b'Z' => 2,
        _ => return None,
    };
    let number = lead * 10_000_000 + digits_at(bytes, i + 1, 7)?;
    spanish_control_letter(bytes, i + 8, number)
}

fn spanish_control_letter(bytes: &[u8], at: usize, number: u32) -> Option<usize> {
    let at = if bytes.get(at) == Some(&b'-') {
        at + 1
    } else {
        at
    };
    let expected = SPANISH_CONTROL_LETTERS[(number % 23) as usize];
    (bytes.get(at) == Some(&expected) && !joined_after(bytes, at + 1)).then_some(at + 1)
}

/// The Finnish check characters, indexed by `DDMMYYZZZ` mod 31.
const FINNISH_CHECK_CHARACTERS: &[u8; 31] = b"0123456789ABCDEFHJKLMNPRSTUVWXY";

/// `DDMMYYCZZZQ`: the century sign C, the individual number ZZZ, the check
/// character Q.
fn finnish_hetu(bytes: &[u8], i: usize) -> Option<usize> {
    let date = digits_at(bytes, i, 6)?;
    let century = match bytes.get(i + 6)? {
        b'+' => 1800,
        b'-' | b'U'..=b'Y' => 1900,
        b'A'..=b'F' => 2000,
        _ => return None,
    };
    let individual = digits_at(bytes, i + 7, 3)?;
    let (day, month, year) = (date / 10_000, date / 100 % 100, century + date % 100);
    let expected = FINNISH_CHECK_CHARACTERS[((date * 1000 + individual) % 31) as usize];
    let end = i + 11;
    (individual >= 2
        && real_date(year, month, day)
        && bytes.get(i + 10) == Some(&expected)
        && !joined_after(bytes, end))
    .then_some(end)
}

// ---------------------------------------------------------------------------
// IBANs

/// IBAN lengths, in characters, of the countries recognised.
pub const IBAN_LENGTHS: [(&str, usize); 35] = [
    ("AD", 24),
    ("AT", 20),
    ("BE", 16),
    ("BG", 22),
    ("CH", 21),
    ("CY", 28),
    ("CZ", 24),
    ("DE", 22),
    ("DK", 18),
    ("EE", 20),
    ("ES", 24),
    ("FI", 18),
    ("FR", 27),
    ("GB", 22),
    ("GR", 27),
    ("HR", 21),
    ("HU", 28),
    ("IE", 22),
    ("IS", 26),
    ("IT", 27),
    ("LI", 21),
    ("LT", 20),
    ("LU", 20),
    ("LV", 21),
    ("MC", 27),
    ("MT", 31),
    ("NL", 18),
    ("NO", 15),
    ("PL", 28),
    ("PT", 25),
    ("RO", 24),
    ("SE", 24),
    ("SI", 19),
    ("SK", 24),
    ("SM", 27),
];

/// The longest IBAN any country uses.
const LONGEST_IBAN: usize = 34;

/// An IBAN starting at `i`, compact or in groups of four: where it ends
/// and whether its check holds.
fn iban(bytes: &[u8], i: usize) -> Option<(usize, bool)> {
    let country = bytes.get(i..i + 2)?;
    let &(_, length) = IBAN_LENGTHS
        .iter()
        .find(|(code, _)| code.as_bytes() == country)?;
    let mut chars = [0u8; LONGEST_IBAN];
    let mut at = i;
    for (count, slot) in chars.iter_mut().enumerate().take(length) {
        if count > 0 && count.is_multiple_of(4) && bytes.get(at) == Some(&b' ') {
            at += 1;
        }
        let b = *bytes.get(at)?;
        let fits = match count {
            0 | 1 => b.is_ascii_uppercase(),
            2 | 3 => b.is_ascii_digit(),
            _ => b.is_ascii_digit() || b.is_ascii_uppercase(),
        };
        if !fits {
            return None;
        }
        *slot = b;
        at += 1;
    }
    (!joined_after(bytes, at)).then(|| (at, iban_remainder(&chars[..length]) == 1))
}

/// The IBAN as a number mod 97: the first four characters moved to the
/// end, each letter read as two digits (A = 10 … Z = 35).
fn iban_remainder(iban: &[u8]) -> u32 {
    let (head, rest) = iban.split_at(4);
    rest.iter().chain(head).fold(0, |remainder, &b| {
        if b.is_ascii_digit() {
            (remainder * 10 + u32::from(b - b'0')) % 97
        } else {
            (remainder * 100 + u32::from(b - b'A') + 10) % 97
        }
    })
}

#[cfg(test)]
mod tests;
