//! Arbitrary bytes as a program: `program::parse` with the default limits must
//! never panic; what parses is canonical (serializes back to the same bytes)
//! and, when its type is small, evaluates to a stream of exactly that type.
#![no_main]

use brevis_decoder::exec::eval;
use brevis_format::program::{parse, serialize, serialized_size, Limits};
use libfuzzer_sys::fuzz_target;

/// Largest output (in words) the target evaluates.
const MAX_EVAL_WORDS: u64 = 1 << 16;

fuzz_target!(|data: &[u8]| {
    let limits = Limits::default();
    let Ok(node) = parse(data, &limits) else {
        return;
    };
    assert_eq!(serialize(&node), data, "parse accepted a non-canonical program");
    assert_eq!(serialized_size(&node), data.len());
    let _text = node.to_string();
    let checked = node
        .check(&limits)
        .expect("parse returned a program that fails its own check");
    if checked.ty.count <= MAX_EVAL_WORDS {
        if let Ok(s) = eval(&node) {
            assert_eq!(s.width(), checked.ty.width, "evaluated width differs from the type");
            assert_eq!(
                s.len() as u64,
                checked.ty.count,
                "evaluated length differs from the type"
            );
        }
    }
});
