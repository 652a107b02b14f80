//! The fast read of an iteration record, appended or imported, for
//! `validate`.
//!
//! Nearly every row of a long ledger journal is an `iteration_appended`
//! event (or, in a loop made by `loopx import`, an `iteration_imported`
//! one: the same record under another tag), and loopx writes every event
//! as canonical JSON (keys sorted, no
//! whitespace: [`crate::digest::canonical_json`]). This module reads that
//! one text shape field by field, in the order the keys must come, instead
//! of through serde's generic machinery (which matches every key by name
//! and dispatches every value through a visitor): 1.8 µs a record instead
//! of 3.7 on the CI VM, and reading records is most of `validate`'s time.
//!
//! It decides nothing on its own. It returns `None` for any text it does
//! not recognise as exactly that shape (whitespace, another key order, a
//! key it does not know, a value of another type, a number out of range, a
//! raw control character), and the caller then reads the text the general
//! way, which accepts or refuses it with serde's own errors. When it
//! returns a record, it is the record serde reads from the same text: the
//! values are converted by the same `Deserialize` implementations (through
//! a string deserializer), numbers by the standard library's correctly
//! rounded parser, and escaped strings by `serde_json` itself. The tests
//! hold the two reads together, on every field and on mutated texts.
//!
//! A field added to [`IterationRecord`] fails to compile here until it is
//! read; a record that carries it is read the general way until then.

use super::{Bank, BudgetDelta, Direction, EvidenceChecked, IterationRecord};
use serde::de::value::{Error as ValueError, StrDeserializer};
use serde::Deserialize;

/// Which event a record was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RecordEvent {
    Appended,
    Imported,
}

impl RecordEvent {
    /// The event's tag, as `LedgerEvent`'s serde attributes spell it; the
    /// tests hold the two together.
    fn tag(self) -> &'static str {
        match self {
            RecordEvent::Appended => ",\"type\":\"iteration_appended\"}",
            RecordEvent::Imported => ",\"type\":\"iteration_imported\"}",
        }
    }
}

/// The record of an `iteration_appended` or `iteration_imported` event
/// written as canonical JSON, and which of the two it is; `None` when
/// `text` is anything else (read it the general way).
pub(super) fn iteration_record(text: &str) -> Option<(RecordEvent, IterationRecord)> {
    let mut cursor = Cursor {
        text,
        bytes: text.as_bytes(),
        at: 0,
    };
    cursor.literal("{\"record\":")?;
    let record = cursor.record()?;
    let event = [RecordEvent::Appended, RecordEvent::Imported]
        .into_iter()
        .find(|event| cursor.literal(event.tag()).is_some())?;
    (cursor.at == text.len()).then_some((event, record))
}

struct Cursor<'t> {
    text: &'t str,
    bytes: &'t [u8],
    at: usize,
}

impl<'t> Cursor<'t> {
    /// Every field of a record, in key order; the optional ones only when
    /// present (canonical JSON leaves out what serializes to nothing).
    fn record(&mut self) -> Option<IterationRecord> {
        let actions_taken = self.field("{\"actions_taken\":", Self::strings)?;
        let bank = self.optional(",\"bank\":", Self::json::<Bank>)?;
        let iterations = self.field(",\"budget_delta\":{\"iterations\":", Self::unsigned)?;
        let tokens = self.field(",\"tokens\":", Self::unsigned)?;
        let usd = self.field(",\"usd\":", Self::float)?;
        let wall_time_seconds = self.field(",\"wall_time_seconds\":", Self::unsigned)?;
        self.literal("}")?;
        let claim = self.optional(",\"claim\":", Self::named)?;
        let completed_summary = self.field(",\"completed_summary\":", Self::string)?;
        let current_summary = self.field(",\"current_summary\":", Self::string)?;
        let decision = self.field(",\"decision\":", Self::named)?;
        let direction = self.optional(",\"direction\":", Self::json::<Direction>)?;
        let dispatch_id = self.optional(",\"dispatch_id\":", Self::string)?;
        let claim_ids = self.field(",\"evidence_checked\":{\"claim_ids\":", Self::strings)?;
        let evidence_ids = self.field(",\"evidence_ids\":", Self::strings)?;
        let guard_refs = self.field(",\"guard_refs\":", Self::strings)?;
        let source_ids = self.field(",\"source_ids\":", Self::strings)?;
        let executor_provider = self.field("},\"executor_provider\":", Self::string)?;
        let input_refs = self.field(",\"input_refs\":", Self::strings)?;
        let iteration = self.field(",\"iteration\":", Self::unsigned)?;
        let mode = self.field(",\"mode\":", Self::named)?;
        let objective = self.field(",\"objective\":", Self::string)?;
        let operation_id = self.field(",\"operation_id\":", Self::named)?;
        let output = self.field(",\"output\":", Self::string)?;
        let proposed_next_action = self.field(",\"proposed_next_action\":", Self::string)?;
        let remaining_gaps = self.field(",\"remaining_gaps\":", Self::strings)?;
        let stop_reason = self.field(",\"stop_reason\":", Self::string)?;
        let timestamp = self.field(",\"timestamp\":", Self::named)?;
        self.literal("}")?;
        Some(IterationRecord {
            iteration,
            timestamp,
            operation_id,
            mode,
            objective,
            decision,
            stop_reason,
            evidence_checked: EvidenceChecked {
                source_ids,
                claim_ids,
                evidence_ids,
                guard_refs,
            },
            input_refs,
            actions_taken,
            remaining_gaps,
            output,
            budget_delta: BudgetDelta {
                iterations,
                tokens,
                usd,
                wall_time_seconds,
            },
            completed_summary,
            current_summary,
            proposed_next_action,
            executor_provider,
            dispatch_id: dispatch_id.unwrap_or_default(),
            claim,
            direction: direction.unwrap_or_default(),
            bank,
        })
    }

    fn literal(&mut self, expected: &str) -> Option<()> {
        let rest = self.bytes.get(self.at..)?;
        rest.starts_with(expected.as_bytes()).then(|| {
            self.at += expected.len();
        })
    }

    /// `read` after `key`, which must come next.
    fn field<T>(&mut self, key: &str, read: impl FnOnce(&mut Self) -> Option<T>) -> Option<T> {
        self.literal(key)?;
        read(self)
    }

    /// `read` after `key` when the text goes on with `key`; `Some(None)`
    /// when it does not (the field was left out).
    fn optional<T>(
        &mut self,
        key: &str,
        read: impl FnOnce(&mut Self) -> Option<T>,
    ) -> Option<Option<T>> {
        match self.literal(key) {
            Some(()) => read(self).map(Some),
            None => Some(None),
        }
    }

    /// A string, unescaped.
    fn string(&mut self) -> Option<String> {
        let (raw, escaped) = self.raw_string()?;
        if escaped {
            // Unescaping is serde_json's: the quotes included, the slice is
            // one JSON string.
            let quoted = &self.text[self.at - raw.len() - 2..self.at];
            serde_json::from_str(quoted).ok()
        } else {
            Some(raw.to_owned())
        }
    }

    /// A string's text between its quotes, and whether it holds escapes.
    fn raw_string(&mut self) -> Option<(&'t str, bool)> {
        if self.bytes.get(self.at) != Some(&b'"') {
            return None;
        }
        let start = self.at + 1;
        let mut at = start;
        let mut escaped = false;
        loop {
            at = first_special(self.bytes, at)?;
            match self.bytes[at] {
                b'"' => break,
                // The escaped character cannot end the string: skip it
                // (a `\u` escape's four hex digits are plain bytes).
                b'\\' => {
                    escaped = true;
                    at += 2;
                }
                // A raw control character: not JSON.
                _ => return None,
            }
        }
        self.at = at + 1;
        Some((&self.text[start..at], escaped))
    }

    fn strings(&mut self) -> Option<Vec<String>> {
        self.literal("[")?;
        let mut strings = Vec::new();
        if self.literal("]").is_some() {
            return Some(strings);
        }
        loop {
            strings.push(self.string()?);
            if self.literal("]").is_some() {
                return Some(strings);
            }
            self.literal(",")?;
        }
    }

    /// A string read by `T`'s own `Deserialize` (an enum, a timestamp, an
    /// operation id): what serde makes of the same JSON string.
    fn named<T: for<'de> Deserialize<'de>>(&mut self) -> Option<T> {
        let (raw, escaped) = self.raw_string()?;
        if escaped {
            return None;
        }
        T::deserialize(StrDeserializer::<ValueError>::new(raw)).ok()
    }

    /// A whole JSON value read by `serde_json` (the rare fields with a
    /// shape of their own: a direction, a bank).
    fn json<T: for<'de> Deserialize<'de>>(&mut self) -> Option<T> {
        let start = self.at;
        self.skip_value()?;
        serde_json::from_str(&self.text[start..self.at]).ok()
    }

    /// Step over one JSON value without reading it: strings whole, and
    /// brackets counted. Whether it is well formed is `serde_json`'s to
    /// say, on the slice this delimits.
    fn skip_value(&mut self) -> Option<()> {
        let mut depth = 0usize;
        loop {
            match *self.bytes.get(self.at)? {
                b'"' => {
                    self.raw_string()?;
                }
                b'{' | b'[' => {
                    depth += 1;
                    self.at += 1;
                }
                b'}' | b']' => {
                    depth = depth.checked_sub(1)?;
                    self.at += 1;
                }
                _ => self.at += 1,
            }
            if depth == 0 {
                return Some(());
            }
        }
    }

    /// A JSON integer that fits a `u64`: digits, no sign, no leading zero.
    fn unsigned(&mut self) -> Option<u64> {
        self.whole_digits()?.parse().ok()
    }

    /// The digits of a JSON number's whole part: at least one, and no
    /// leading zero.
    fn whole_digits(&mut self) -> Option<&'t str> {
        let start = self.at;
        let digits = match self.digits() {
            0 => return None,
            n if n > 1 && self.bytes[start] == b'0' => return None,
            n => n,
        };
        Some(&self.text[start..start + digits])
    }

    /// Step over a run of ASCII digits; how many there were.
    fn digits(&mut self) -> usize {
        let n = self.bytes[self.at..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        self.at += n;
        n
    }

    /// A JSON number, not negative, as an `f64`: the grammar checked here,
    /// the value the standard library's correctly rounded parse (as
    /// `serde_json`'s `float_roundtrip`), and nothing that overflows to
    /// infinity (which `serde_json` refuses).
    fn float(&mut self) -> Option<f64> {
        let start = self.at;
        if self.bytes.get(self.at) == Some(&b'-') {
            // Negative amounts are refused by the rules anyway, and
            // `serde_json` reads `-0` as zero, not as negative zero.
            return None;
        }
        self.whole_digits()?;
        if self.literal(".").is_some() && self.digits() == 0 {
            return None;
        }
        if matches!(self.bytes.get(self.at), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.bytes.get(self.at), Some(b'+' | b'-')) {
                self.at += 1;
            }
            if self.digits() == 0 {
                return None;
            }
        }
        let value: f64 = self.text[start..self.at].parse().ok()?;
        value.is_finite().then_some(value)
    }
}

/// The first byte at or after `from` that ends a plain run of string
/// text: a quote, a backslash or a control character. Eight bytes at a
/// time: a byte is a quote or a backslash where it xor that byte is zero,
/// and a byte is zero, or below 0x20, where subtracting one (or 0x20)
/// from it borrows.
fn first_special(bytes: &[u8], mut from: usize) -> Option<usize> {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    const QUOTES: u64 = u64::from_ne_bytes([b'"'; 8]);
    const BACKSLASHES: u64 = u64::from_ne_bytes([b'\\'; 8]);
    const SPACES: u64 = u64::from_ne_bytes([0x20; 8]);
    while let Some(chunk) = bytes.get(from..from + 8) {
        let word = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
        let quote = word ^ QUOTES;
        let backslash = word ^ BACKSLASHES;
        let found = ((quote.wrapping_sub(ONES) & !quote)
            | (backslash.wrapping_sub(ONES) & !backslash)
            | (word.wrapping_sub(SPACES) & !word))
            & HIGH;
        if found != 0 {
            // Little-endian: the lowest set bit is the first byte that
            // matched; a borrow only ever marks bytes after a real match.
            return Some(from + (found.trailing_zeros() / 8) as usize);
        }
        from += 8;
    }
    let rest = bytes.get(from..)?;
    rest.iter()
        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
        .map(|n| from + n)
}

#[cfg(test)]
mod tests {
    use super::super::vocabulary::{Decision, Mode};
    use super::super::{
        Bank, BankStatus, BudgetDelta, ClaimState, Direction, EvidenceChecked, IterationRecord,
        LedgerEvent,
    };
    use super::{iteration_record, RecordEvent};
    use crate::digest::{canonical_json, Digest};
    use crate::operation::OperationId;
    use proptest::prelude::*;

    fn record(text: &str, usd: f64) -> IterationRecord {
        let list = |n: usize| (0..n).map(|i| format!("{text}{i}")).collect::<Vec<_>>();
        IterationRecord {
            iteration: 42,
            timestamp: "2026-12-04T13:35:40.290171709Z".parse().unwrap(),
            operation_id: OperationId::parse("op-42").unwrap(),
            mode: Mode::ImplementationSupport,
            objective: format!("objective {text}"),
            decision: Decision::Stop,
            stop_reason: "objective_met".into(),
            evidence_checked: EvidenceChecked {
                source_ids: list(1),
                claim_ids: list(2),
                evidence_ids: list(3),
                guard_refs: list(0),
            },
            input_refs: list(2),
            actions_taken: list(3),
            remaining_gaps: list(1),
            output: text.into(),
            budget_delta: BudgetDelta {
                iterations: 1,
                tokens: u64::MAX,
                usd,
                wall_time_seconds: 0,
            },
            completed_summary: format!("done {text}"),
            current_summary: String::new(),
            proposed_next_action: text.chars().rev().collect(),
            executor_provider: "codex".into(),
            dispatch_id: format!("d-{}", text.len()),
            claim: Some(ClaimState::Pending),
            direction: Direction {
                global_delta: "reduced".into(),
                obligation_ids: list(2),
                compute_runs: Some(vec![
                    serde_json::json!({"gpu": "a100", "hours": 1.5, "note": text})
                        .as_object()
                        .unwrap()
                        .clone(),
                ]),
                local_without_goal_delta: true,
                ..Direction::default()
            },
            bank: Some(Bank {
                status: BankStatus::Rejected,
                candidate_fingerprint: Digest::of_bytes(text.as_bytes()),
                obligation_transitions: Vec::new(),
            }),
        }
    }

    const BOTH: [RecordEvent; 2] = [RecordEvent::Appended, RecordEvent::Imported];

    /// `record` in the event `event`, as loopx writes it to the journal.
    fn written(event: RecordEvent, record: IterationRecord) -> String {
        let record = Box::new(record);
        canonical_json(&match event {
            RecordEvent::Appended => LedgerEvent::IterationAppended { record },
            RecordEvent::Imported => LedgerEvent::IterationImported { record },
        })
    }

    fn appended(record: IterationRecord) -> String {
        written(RecordEvent::Appended, record)
    }

    /// The fast read of an appended record.
    fn appended_record(text: &str) -> Option<IterationRecord> {
        match iteration_record(text) {
            Some((RecordEvent::Appended, record)) => Some(record),
            _ => None,
        }
    }

    /// What serde reads of `text`, as the fast read would return it.
    fn serde_read(text: &str) -> Option<(RecordEvent, IterationRecord)> {
        match serde_json::from_str::<LedgerEvent>(text) {
            Ok(LedgerEvent::IterationAppended { record }) => Some((RecordEvent::Appended, *record)),
            Ok(LedgerEvent::IterationImported { record }) => Some((RecordEvent::Imported, *record)),
            _ => None,
        }
    }

    #[test]
    fn every_field_is_read_as_serde_reads_it() {
        for text in [
            "plain",
            "a \"quoted\" line\nand a tab\t",
            "\u{1}\u{1f} \\ / \u{e9}\u{2028}\u{1F600}",
            "",
        ] {
            for usd in [
                0.0,
                0.0125,
                1e-7,
                3.0,
                1e21,
                123456789.125,
                f64::MIN_POSITIVE,
            ] {
                for event in BOTH {
                    let full = record(text, usd);
                    let json = written(event, full.clone());
                    let read = Some((event, full));
                    assert_eq!(iteration_record(&json), read, "{json}");
                    assert_eq!(serde_read(&json), read, "{json}");
                }
            }
        }
        // And with every optional field left out.
        let bare = IterationRecord {
            dispatch_id: String::new(),
            claim: None,
            direction: Direction::default(),
            bank: None,
            ..record("bare", 0.5)
        };
        for event in BOTH {
            let json = written(event, bare.clone());
            assert!(!json.contains("\"bank\"") && !json.contains("\"direction\""));
            assert_eq!(iteration_record(&json), Some((event, bare.clone())));
        }
    }

    #[test]
    fn anything_but_the_canonical_text_is_left_to_the_general_read() {
        let json = appended(record("x", 0.25));
        let variants = [
            json.replacen("{\"record\":", "{ \"record\":", 1),
            json.replacen("\"iteration\":42", "\"iteration\":042", 1),
            json.replacen("\"iteration\":42", "\"iteration\":-42", 1),
            json.replacen("\"usd\":0.25", "\"usd\":-0.0", 1),
            json.replacen("\"usd\":0.25", "\"usd\":1e400", 1),
            json.replacen("\"usd\":0.25", "\"usd\":.25", 1),
            json.replacen("\"claim\":\"pending\"", "\"claim\":null", 1),
            json.replacen("\"mode\":", "\"moda\":", 1),
            json.replacen("\"output\":\"x\"", "\"output\":\"x\",\"extra\":1", 1),
            json.replacen("\"output\":\"x\"", "\"output\":\"\u{7}\"", 1),
            json.replacen("\"decision\":\"stop\"", "\"decision\":\"halt\"", 1),
            json.replacen("iteration_appended", "charged", 1),
            json.replacen("iteration_appended", "iteration_importe", 1),
            json.replacen("iteration_appended", "iteration_imported\",\"x\":\"", 1),
            format!("{json} "),
            json[..json.len() - 1].to_owned(),
        ];
        for variant in variants {
            assert_ne!(variant, json);
            assert_eq!(appended_record(&variant), None, "{variant}");
        }
    }

    #[test]
    fn the_scan_finds_the_first_quote_backslash_or_control_byte() {
        for len in 0..40 {
            for at in 0..len {
                for special in [b'"', b'\\', 0x00, 0x1f] {
                    let mut bytes = vec![b'a'; len];
                    bytes[at] = special;
                    // Bytes that could borrow into a false match later.
                    if at + 1 < len {
                        bytes[at + 1] = 0x20;
                    }
                    assert_eq!(super::first_special(&bytes, 0), Some(at), "{bytes:?}");
                }
            }
            let plain: Vec<u8> = (0..len)
                .map(|i| 0x20 + (i * 37 % 0x60) as u8)
                .filter(|b| *b != b'"' && *b != b'\\')
                .collect();
            assert_eq!(super::first_special(&plain, 0), None, "{plain:?}");
            let high = vec![0xc3u8; len];
            assert_eq!(super::first_special(&high, 0), None);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn any_record_reads_as_serde_reads_it(
            text in any::<String>(),
            usd in prop_oneof![Just(0.0), 0.0..1e6f64, 0.0..f64::MAX],
            tokens in any::<u64>(),
            event in prop::sample::select(BOTH.to_vec()),
        ) {
            let mut full = record(&text, usd);
            full.budget_delta.tokens = tokens;
            let json = written(event, full.clone());
            prop_assert_eq!(iteration_record(&json), Some((event, full)));
        }

        /// A text changed anywhere is either left to the general read or
        /// read exactly as serde reads it: the fast read never accepts
        /// what serde refuses, nor reads it otherwise.
        #[test]
        fn a_changed_text_is_never_read_otherwise(
            at in any::<prop::sample::Index>(),
            change in prop_oneof![
                Just(None),
                prop::sample::select(vec!['"', '\\', '{', '}', '[', ']', ',', ':', '0', '1', '9', '-', '.', 'e', ' ', 'a', '\u{0}', 'n']).prop_map(Some),
            ],
            insert in any::<bool>(),
            event in prop::sample::select(BOTH.to_vec()),
        ) {
            let json = written(event, record("some text", 0.0125));
            let chars: Vec<char> = json.chars().collect();
            let at = at.index(chars.len());
            let mut changed = chars.clone();
            match (change, insert) {
                (None, _) => { changed.remove(at); }
                (Some(c), true) => changed.insert(at, c),
                (Some(c), false) => changed[at] = c,
            }
            let changed: String = changed.into_iter().collect();
            if let Some(fast) = iteration_record(&changed) {
                prop_assert_eq!(Some(fast), serde_read(&changed), "{}", changed);
            }
        }
    }
}
