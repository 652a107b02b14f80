//! Each category found and counted, checksum failures and the shapes loopx
//! briefs are full of left alone, and the summary that names no value.

use super::*;
use proptest::prelude::*;

/// The counts `scan` finds in `text`, as (category, count) pairs.
fn counts(text: &str) -> Vec<(Category, u32)> {
    scan(text).counts.into_iter().collect()
}

/// Each of `examples` alone, then in prose, is one finding of `category`.
fn each_is_one(category: Category, examples: &[&str]) {
    for example in examples {
        for text in [example.to_string(), format!("Contact: {example}. Thanks")] {
            assert_eq!(counts(&text), [(category, 1)], "in {text:?}");
        }
    }
}

/// None of `examples` is a finding, alone or in prose.
fn none_found(examples: &[&str]) {
    for example in examples {
        for text in [example.to_string(), format!("see {example} here")] {
            let findings = scan(&text);
            assert!(findings.is_empty(), "{text:?}: {}", findings.summary());
        }
    }
}

#[test]
fn email_addresses_are_found() {
    each_is_one(
        Category::Email,
        &[
            "ada@example.org",
            "a.b+tag@mail.example.co.uk",
            "x_y%z@host-1.io",
        ],
    );
}

#[test]
fn international_north_american_and_national_phone_numbers_are_found() {
    each_is_one(
        Category::Phone,
        &[
            "+44 20 7946 0958",
            "+4420794609581",
            "+1 (555) 123-4567",
            "+44 (0)20 7946 0958",
            "+33.1.23.45.67.89",
            "(555) 123-4567",
            "(555)123-4567",
            "555-123-4567",
            "555.123.4567",
            "020 7946 0958",
            "06 12 34 56 78",
            "06.12.34.56.78",
            "030-1234567",
            "(030) 1234 5678",
        ],
    );
}

#[test]
fn luhn_valid_card_numbers_of_known_issuers_are_found() {
    each_is_one(
        Category::PaymentCard,
        &[
            "4111 1111 1111 1111",
            "4111-1111-1111-1111",
            "4111111111111111",
            "5555 5555 5555 4444",
            "2223 0031 2200 3222",
            "3782 822463 10005",
            "6011 1111 1111 1117",
            "3530 1113 3330 0000",
        ],
    );
}

#[test]
fn ibans_with_a_valid_check_are_found_compact_or_grouped() {
    each_is_one(
        Category::Iban,
        &[
            "DE89 3704 0044 0532 0130 00",
            "DE89370400440532013000",
            "GB29 NWBK 6016 1331 9268 19",
            "FR14 2004 1010 0505 0001 3M02 606",
            "NL91ABNA0417164300",
            "BE68539007547034",
            "CH9300762011623852957",
            "ES9121000418450200051332",
            "IT60X0542811101000000123456",
            "AT611904300234573201",
            "PL61109010140000071219812874",
            "SE4550000000058398257466",
            "NO9386011117947",
        ],
    );
}

#[test]
fn national_identity_numbers_of_each_scheme_are_found() {
    each_is_one(
        Category::NationalId,
        &[
            // Spanish DNI and NIE
            "12345678Z",
            "12345678-Z",
            "X1234567L",
            // Swedish personnummer, short, a hundred or older, long
            "811218-9876",
            "811218+9876",
            "19811218-9876",
            // Norwegian fødselsnummer, compact and spaced
            "15058800160",
            "150588 00160",
            // Polish PESEL
            "44051401359",
            // Finnish HETU
            "131052-308T",
        ],
    );
}

#[test]
fn several_findings_in_one_text_are_counted_by_category() {
    let text = "Brief: mail ada@example.org or bob@example.com, call +44 20 7946 0958. \
                Pay DE89 3704 0044 0532 0130 00 or card 4111 1111 1111 1111; \
                ids 12345678Z and 811218-9876 and 44051401359.";
    assert_eq!(
        counts(text),
        [
            (Category::Email, 2),
            (Category::Phone, 1),
            (Category::PaymentCard, 1),
            (Category::Iban, 1),
            (Category::NationalId, 3),
        ]
    );
}

#[test]
fn numbers_with_a_wrong_check_are_not_found() {
    none_found(&[
        "4111 1111 1111 1112",
        "4111111111111112",
        "1111 1111 1111 1111",
        // Not Luhn-valid, and its last groups are not a phone number.
        "5555 0555 1234 5678",
        // A wrong check digit, and `0532 0130 01` inside is not a phone number.
        "DE89 3704 0044 0532 0130 01",
        "DE88370400440532013000",
        "GB29 NWBK 6016 1331 9268 1",
        "12345678A",
        "X1234567A",
        "811218-9875",
        "811318-9876",
        "15058800161",
        "44051401358",
        "131052-308U",
    ]);
}

#[test]
fn what_loopx_briefs_are_full_of_is_not_personal_data() {
    none_found(&[
        "2026-12-04",
        "2026-12-04 14:03",
        "2026-12-04T14:03:09Z",
        "2026-12-04T14:03:09.123456789+01:00",
        "04.12.2026 10:30",
        "04/12/2026",
        "14:03:09",
        "1.18.3",
        "v1.18.3",
        "0.10.2",
        "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "sha256:0123456789012345678901234567890123456789012345678901234567890123",
        "550e8400-e29b-41d4-a716-446655440000",
        "12345678-1234-1234-1234-123456789012",
        "run-a3c3d1f834726a6ff40e",
        "run-4111111111111111",
        "iteration 12 of 40",
        "12 iterations, 1200 tokens, $3.50",
        "port 7878",
        "127.0.0.1:7878",
        "http://localhost:8080/loops/0612345678",
        "crates/loopx-core/src/020/7946/0958.rs",
        "target/debug/deps/loopx_core-4111111111111111",
        "1733353200000",
        "1733353200123456789",
        "1234567890",
        "123456782",
        "issue #1234567",
        "2+2=4, 10-20-30",
        "1,234,567,890",
        "user@localhost",
        "a@b.c",
    ]);
}

#[test]
fn summary_names_categories_and_counts_in_plain_words() {
    let findings = scan("ada@example.org, bob@example.com, DE89 3704 0044 0532 0130 00");
    assert_eq!(findings.summary(), "2 email addresses, 1 IBAN");
    let all = scan(
        "+44 20 7946 0958, 4111 1111 1111 1111, 5555 5555 5555 4444, 12345678Z, \
         NL91ABNA0417164300, BE68539007547034",
    );
    assert_eq!(
        all.summary(),
        "1 phone number, 2 payment card numbers, 2 IBANs, 1 national identity number"
    );
    assert_eq!(scan("nothing here").summary(), "no personal data");
}

#[test]
fn summary_never_repeats_a_matched_value() {
    let values = [
        "ada@example.org",
        "+44 20 7946 0958",
        "4111 1111 1111 1111",
        "DE89 3704 0044 0532 0130 00",
        "12345678Z",
    ];
    let findings = scan(&values.join(" and "));
    assert_eq!(findings.counts.values().sum::<u32>(), 5);
    let summary = findings.summary();
    let serialized = serde_json::to_string(&findings).unwrap();
    for value in values {
        assert!(!summary.contains(value), "{summary}");
        assert!(!serialized.contains(value), "{serialized}");
    }
}

#[test]
fn categories_serialize_in_snake_case() {
    let findings = scan("4111 1111 1111 1111 and 12345678Z");
    assert_eq!(
        serde_json::to_string(&findings).unwrap(),
        r#"{"counts":{"payment_card":1,"national_id":1}}"#
    );
}

#[test]
fn empty_findings_are_empty() {
    assert!(scan("").is_empty());
    assert!(Findings::default().is_empty());
    assert!(!scan("ada@example.org").is_empty());
}

#[test]
fn a_megabyte_of_near_misses_is_scanned() {
    for piece in [
        "1 ", "+1 (", "4111 ", "a@", "a.", "DE89 ", "12345678", "0-", "(0) ", "811218-", "é",
    ] {
        let text = piece.repeat((1 << 20) / piece.len());
        let _ = scan(&text);
    }
}

proptest! {
    #[test]
    fn scan_never_panics_on_any_text(text in any::<String>()) {
        let _ = scan(&text);
    }

    #[test]
    fn scan_never_panics_on_number_like_text(text in "[0-9 +()./:@A-Za-z-]{0,120}") {
        let findings = scan(&text);
        let _ = findings.summary();
    }
}

#[test]
fn outbound_text_with_personal_data_needs_the_digest_of_its_exact_bytes() {
    assert_eq!(outbound("review lemma B at 127.0.0.1:7878", None), Ok(()));
    let brief = "ask jane.doe@example.org about lemma B";
    let refused = outbound(brief, None).unwrap_err();
    let words = refused.to_string();
    assert!(
        words.contains("1 email address") && !words.contains("jane.doe"),
        "{words}"
    );
    let digest = crate::digest::Digest::of_bytes(brief.as_bytes());
    assert!(words.contains(digest.as_str()), "{words}");
    assert_eq!(outbound(brief, Some(digest.as_str())), Ok(()));
    // An approval is for those bytes only.
    assert!(outbound(&format!("{brief}."), Some(digest.as_str())).is_err());
}
