//! Arbitrary literal payloads: `wire::decode` must never panic and must return
//! exactly `count` words of `width` bits; a raw payload that decodes is the
//! canonical one, and re-encoding what decoded round-trips.
//!
//! Input: `[encoding % 7] [width % 64 + 1] [count: u24 LE, mod 2^16 + 1] payload…`
#![no_main]

use brevis_format::wire::{decode, encode, LitEncoding};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let [e, w, c0, c1, c2, payload @ ..] = data else {
        return;
    };
    let encoding = LitEncoding::ALL[usize::from(*e) % LitEncoding::ALL.len()];
    let width = w % 64 + 1;
    let count = (usize::from(*c0) | usize::from(*c1) << 8 | usize::from(*c2) << 16) % ((1 << 16) + 1);
    let Ok(s) = decode(encoding, width, count, payload) else {
        return;
    };
    assert_eq!(s.width(), width);
    assert_eq!(s.len(), count);
    if encoding == LitEncoding::Raw {
        assert_eq!(
            encode(LitEncoding::Raw, &s).as_deref(),
            Some(payload),
            "raw is canonical"
        );
    }
    for enc in LitEncoding::ALL {
        if let Some(p) = encode(enc, &s) {
            let back = decode(enc, width, count, &p);
            assert!(back.as_ref() == Ok(&s), "{enc:?} does not round-trip: {back:?}");
        }
    }
});
