//! Bad inputs to the encoder: each gives a clear error or a correct archive, never a panic.

use brevis_encoder::containers::{plan, Container};
use brevis_encoder::synth::CandidateSearch;
use brevis_encoder::{compress_files, CompressOptions, InputFile};
use brevis_tests::round_trip;

fn st(header: &str, data_len: usize) -> Vec<u8> {
    let mut v = (header.len() as u64).to_le_bytes().to_vec();
    v.extend_from_slice(header.as_bytes());
    v.extend(std::iter::repeat_n(0u8, data_len));
    v
}

fn plan_error(name: &str, bytes: &[u8]) -> String {
    let e = plan(name, bytes).expect_err("must be refused");
    format!("{e:#}")
}

#[test]
fn malformed_safetensors_are_refused_with_the_reason() {
    let cases: [(&str, Vec<u8>, &str); 6] = [
        (
            "header length beyond the file",
            {
                let mut v = st(r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}"#, 4);
                v[..8].copy_from_slice(&(1u64 << 40).to_le_bytes());
                v
            },
            "header too large",
        ),
        ("invalid JSON", st("{not json}", 0), "invalid JSON in header"),
        (
            "overlapping offsets",
            st(
                r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}"#,
                12,
            ),
            "invalid offset for tensor `b`",
        ),
        (
            "offsets beyond the data",
            st(r#"{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}"#, 8),
            "incomplete metadata",
        ),
        (
            "unknown dtype",
            st(r#"{"a":{"dtype":"X9","shape":[1],"data_offsets":[0,4]}}"#, 4),
            "invalid JSON in header: unknown variant `X9`",
        ),
        ("too short", vec![1, 2, 3], "header too small"),
    ];
    for (what, bytes, reason) in cases {
        let msg = plan_error("m.safetensors", &bytes);
        assert!(
            msg.contains("not a valid safetensors file") && msg.contains(reason),
            "{what}: {msg}"
        );
        // The same bytes under another name are simply opaque.
        assert_eq!(plan("m.bin", &bytes).unwrap().0, Container::Plain, "{what}");
    }
}

#[test]
fn empty_files_zero_byte_tensors_and_truncated_containers_round_trip() {
    let zero_tensor = st(
        r#"{"e":{"dtype":"BF16","shape":[0,7],"data_offsets":[0,0]},"s":{"dtype":"I8","shape":[],"data_offsets":[0,1]}}"#,
        1,
    );
    plan("z.safetensors", &zero_tensor).unwrap();
    // A truncated ONNX protobuf is just bytes to the plain container.
    let onnx_prefix = b"\x08\x07\x12\x07pytorch\x1a\x032.1:\xc8\x01\n".to_vec();
    round_trip(&[
        ("empty", b""),
        ("z.safetensors", &zero_tensor),
        ("model.onnx", &onnx_prefix),
        ("one", b"x"),
    ]);
}

#[test]
fn ten_thousand_tiny_files() {
    let names: Vec<String> = (0..10_000).map(|i| format!("d{}/f{i}.json", i % 100)).collect();
    let bodies: Vec<Vec<u8>> = (0..10_000).map(|i| format!("{{\"id\": {i}}}").into_bytes()).collect();
    let files: Vec<(&str, &[u8])> = names
        .iter()
        .map(String::as_str)
        .zip(bodies.iter().map(Vec::as_slice))
        .collect();
    round_trip(&files);
}

/// A sink that fails like a full disk after `room` bytes.
struct FullDisk {
    room: usize,
}

impl std::io::Write for FullDisk {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if buf.len() > self.room {
            return Err(std::io::Error::from(std::io::ErrorKind::StorageFull));
        }
        self.room -= buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_full_disk_is_reported_as_such() {
    let data = include_bytes!("../../encoder/assets/silero_vad_16k.safetensors");
    let inputs = [InputFile {
        archive_path: "m.safetensors".into(),
        data,
    }];
    for room in [0usize, 11, 5000, 400_000] {
        let e = compress_files(
            FullDisk { room },
            &inputs,
            &CandidateSearch::default(),
            &CompressOptions::default(),
            &|_| {},
        )
        .err()
        .expect("must fail");
        let io = e
            .chain()
            .find_map(|c| c.downcast_ref::<std::io::Error>())
            .expect("an io::Error inside");
        assert_eq!(io.kind(), std::io::ErrorKind::StorageFull, "room {room}: {e:#}");
    }
}
