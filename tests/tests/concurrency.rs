//! Decoding is free of shared state: the same archive decoded from many threads
//! at once, and many archives in parallel, give identical bytes (a bounded stress test).

use brevis_decoder::{decode_all, Archive, DecodeLimits};
use brevis_tests::{compress, safetensors_file, tensor_bytes};
use safetensors::tensor::Dtype;

#[test]
fn many_threads_decode_the_same_and_different_archives_identically() {
    let inputs: Vec<Vec<u8>> = [Dtype::BF16, Dtype::F16, Dtype::F32, Dtype::I8]
        .iter()
        .enumerate()
        .map(|(i, &dt)| safetensors_file(&[("w", dt, vec![300, 70], tensor_bytes(dt, 21_000, i as u64 + 1))]))
        .collect();
    let archives: Vec<Vec<u8>> = inputs.iter().map(|f| compress(&[("m.safetensors", f)]).0).collect();
    std::thread::scope(|scope| {
        for t in 0..8 {
            let (archives, inputs) = (&archives, &inputs);
            scope.spawn(move || {
                for round in 0..6 {
                    // Every thread decodes archive 0 (the same bytes at once), then its own.
                    for k in [0, (t + round) % archives.len()] {
                        let files = decode_all(&archives[k], &DecodeLimits::default()).unwrap();
                        assert!(files[0].data == inputs[k], "thread {t} round {round} archive {k}");
                        let a = Archive::open(&archives[k], DecodeLimits::default()).unwrap();
                        let (f, s) = a.find_segment("w").unwrap();
                        assert!(a.read_segment(f, s).unwrap() == inputs[k][inputs[k].len() - s.len as usize..]);
                    }
                }
            });
        }
    });
}
