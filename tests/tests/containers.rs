//! Container readers end to end: GGUF, PyTorch zip checkpoints and ONNX
//! external data are mapped onto tensors, round-trip byte for byte, and
//! damaged or hostile files still round-trip as plain bytes.

use brevis_decoder::{Archive, DecodeLimits};
use brevis_encoder::containers::{plan, Container, Layout};
use brevis_format::archive::SegmentKind;
use brevis_format::DType;
use brevis_tests::{round_trip, tensor_bytes, Rng};
use safetensors::tensor::Dtype;

fn gguf_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// A GGUF v3 file with a string and a string-array metadata entry and the
/// given tensors (name, dims fastest first, ggml type, data), aligned to 32.
fn gguf(tensors: &[(&str, Vec<u64>, u32, Vec<u8>)]) -> Vec<u8> {
    let mut out = b"GGUF".to_vec();
    out.extend_from_slice(&3u32.to_le_bytes());
    out.extend_from_slice(&(tensors.len() as u64).to_le_bytes());
    out.extend_from_slice(&2u64.to_le_bytes());
    gguf_string(&mut out, "general.architecture");
    out.extend_from_slice(&8u32.to_le_bytes());
    gguf_string(&mut out, "llama");
    gguf_string(&mut out, "tokenizer.ggml.tokens");
    out.extend_from_slice(&9u32.to_le_bytes());
    out.extend_from_slice(&8u32.to_le_bytes());
    out.extend_from_slice(&1000u64.to_le_bytes());
    (0..1000).for_each(|i| gguf_string(&mut out, &format!("tok{i}")));
    let mut offset = 0usize;
    let mut offsets = Vec::new();
    for (name, dims, ty, data) in tensors {
        gguf_string(&mut out, name);
        out.extend_from_slice(&(dims.len() as u32).to_le_bytes());
        dims.iter().for_each(|d| out.extend_from_slice(&d.to_le_bytes()));
        out.extend_from_slice(&ty.to_le_bytes());
        out.extend_from_slice(&(offset as u64).to_le_bytes());
        offsets.push(offset);
        offset = (offset + data.len()).next_multiple_of(32);
    }
    let start = out.len().next_multiple_of(32);
    for ((_, _, _, data), off) in tensors.iter().zip(offsets) {
        out.resize(start + off, 0);
        out.extend_from_slice(data);
    }
    out
}

/// `blocks` Q4_1 blocks: FP16 scale and minimum, 16 bytes of nibbles.
fn q4_1(blocks: usize, seed: u64) -> Vec<u8> {
    let mut r = Rng(seed);
    let mut out = Vec::with_capacity(blocks * 20);
    for _ in 0..blocks {
        let d = 0x2000u16 | (r.next_u64() % 0x300) as u16;
        out.extend_from_slice(&d.to_le_bytes());
        out.extend_from_slice(&(d | 0x8000).to_le_bytes());
        for _ in 0..16 {
            // Nibbles around 8, as quantized normal weights are.
            let a = (8 + (r.normal(2.0) as i64)).clamp(0, 15) as u8;
            let b = (8 + (r.normal(2.0) as i64)).clamp(0, 15) as u8;
            out.push(a | b << 4);
        }
    }
    out
}

/// `blocks` Q8_0 blocks: FP16 scale, 32 signed bytes.
fn q8_0(blocks: usize, seed: u64) -> Vec<u8> {
    let mut r = Rng(seed);
    let mut out = Vec::with_capacity(blocks * 34);
    for _ in 0..blocks {
        out.extend_from_slice(&(0x1c00u16 | (r.next_u64() % 0x200) as u16).to_le_bytes());
        out.extend((0..32).map(|_| (r.normal(30.0) as i64).clamp(-127, 127) as i8 as u8));
    }
    out
}

#[test]
fn gguf_tensors_and_quantized_blocks_round_trip() {
    let file = gguf(&[
        ("token_embd.weight", vec![64, 300], 8, q8_0(600, 1)),
        ("blk.0.attn_norm.weight", vec![64], 0, tensor_bytes(Dtype::F32, 64, 2)),
        ("blk.0.ffn_up.weight", vec![64, 2000], 3, q4_1(4000, 3)),
        (
            "blk.0.ffn_down.weight",
            vec![96, 100],
            1,
            tensor_bytes(Dtype::F16, 9600, 4),
        ),
        // An odd-length tensor, so the next one starts after padding.
        ("rope_freqs", vec![7], 30, tensor_bytes(Dtype::BF16, 7, 5)),
        ("output.weight", vec![32, 10], 2, q4_1(10, 6)[..180].to_vec()),
    ]);
    let (container, plans) = plan("m.gguf", &file).unwrap();
    assert_eq!(container, Container::Gguf);
    let q = plans.iter().find(|p| p.name == "blk.0.ffn_up.weight").unwrap();
    assert_eq!((q.kind.clone(), q.layout), (SegmentKind::Opaque, Layout::Records(20)));
    let archive = round_trip(&[("m.gguf", &file)]);
    let a = Archive::open(&archive, DecodeLimits::default()).unwrap();
    let (_, seg) = a.find_segment("blk.0.ffn_down.weight").unwrap();
    assert_eq!(
        seg.kind,
        SegmentKind::Tensor {
            dtype: DType::F16,
            shape: vec![100, 96]
        }
    );
    // The quantized blocks are cheaper than their bytes.
    let (f, seg) = a.find_segment("blk.0.ffn_up.weight").unwrap();
    assert_eq!(a.read_segment(f, seg).unwrap(), q4_1(4000, 3));
}

#[test]
fn damaged_gguf_round_trips_as_plain_bytes() {
    let good = gguf(&[("w", vec![32, 4], 3, q4_1(4, 9))]);
    let mut cases = Vec::new();
    // Truncated in the tensor data, a huge tensor count, an offset past the end.
    cases.push(good[..good.len() - 7].to_vec());
    let mut huge = good.clone();
    huge[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    cases.push(huge);
    let mut past = good.clone();
    let name = b"\x01\0\0\0\0\0\0\0w";
    let at = good.windows(name.len()).position(|w| w == name).unwrap() + name.len() + 4 + 16 + 4;
    past[at..at + 8].copy_from_slice(&(1u64 << 50).to_le_bytes());
    cases.push(past);
    for (i, bad) in cases.iter().enumerate() {
        let (container, _) = plan("m.gguf", bad).unwrap();
        assert_eq!(container, Container::Plain, "case {i}");
        round_trip(&[("m.gguf", bad)]);
    }
}
