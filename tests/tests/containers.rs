//! Container readers end to end: GGUF, PyTorch zip and legacy checkpoints,
//! CTranslate2 models and ONNX external data are mapped onto tensors,
//! round-trip byte for byte, and damaged or hostile files still round-trip as
//! plain bytes.

use brevis_decoder::{Archive, DecodeLimits};
use brevis_encoder::containers::{plan, Container, Layout, SegmentPlan};
use brevis_format::archive::SegmentKind;
use brevis_format::DType;
use std::collections::HashMap;

use brevis_tests::{compress, round_trip, tensor_bytes, Rng};
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

/// A stored zip of `entries` (name, bytes) with 64-byte aligned data, as
/// `torch.save` writes it (padding in the local header's extra field).
fn zip(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (name, data) in entries {
        let offset = out.len() as u32;
        let pad = (64 - (out.len() + 30 + name.len() + 4) % 64) % 64;
        let extra_len = 4 + pad;
        out.extend_from_slice(b"PK\x03\x04");
        out.extend_from_slice(&[20, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        out.extend_from_slice(&0u32.to_le_bytes()); // crc (not checked here)
        out.extend_from_slice(&(data.len() as u32).to_le_bytes());
        out.extend_from_slice(&(data.len() as u32).to_le_bytes());
        out.extend_from_slice(&(name.len() as u16).to_le_bytes());
        out.extend_from_slice(&(extra_len as u16).to_le_bytes());
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&0x4246u16.to_le_bytes());
        out.extend_from_slice(&(pad as u16).to_le_bytes());
        out.extend(std::iter::repeat_n(b'Z', pad));
        out.extend_from_slice(data);
        central.extend_from_slice(b"PK\x01\x02");
        central.extend_from_slice(&[20, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        central.extend_from_slice(&0u32.to_le_bytes());
        central.extend_from_slice(&(data.len() as u32).to_le_bytes());
        central.extend_from_slice(&(data.len() as u32).to_le_bytes());
        central.extend_from_slice(&(name.len() as u16).to_le_bytes());
        central.extend_from_slice(&[0; 12]);
        central.extend_from_slice(&offset.to_le_bytes());
        central.extend_from_slice(name.as_bytes());
    }
    let cd_start = out.len() as u32;
    out.extend_from_slice(&central);
    out.extend_from_slice(b"PK\x05\x06\0\0\0\0");
    out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    out.extend_from_slice(&(central.len() as u32).to_le_bytes());
    out.extend_from_slice(&cd_start.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out
}

/// A protocol-2 pickle of `{name: _rebuild_tensor_v2(('storage', torch.CLASS, key, 'cpu', n), ...)}`
/// with the storage class memoized and fetched again by `BINGET` for the second tensor, as torch writes it.
fn pickle(storages: &[(&str, &str, &str, u32)]) -> Vec<u8> {
    fn s(out: &mut Vec<u8>, x: &str) {
        out.push(b'X');
        out.extend_from_slice(&(x.len() as u32).to_le_bytes());
        out.extend_from_slice(x.as_bytes());
    }
    let mut p = vec![0x80, 2, b'}', b'q', 0, b'('];
    let mut memo: HashMap<String, u8> = HashMap::new();
    for (i, (name, class, key, n)) in storages.iter().enumerate() {
        s(&mut p, name);
        p.extend_from_slice(b"ctorch._utils\n_rebuild_tensor_v2\n");
        p.extend_from_slice(b"((");
        s(&mut p, "storage");
        match memo.get(*class) {
            Some(&m) => p.extend_from_slice(&[b'h', m]),
            None => {
                p.extend_from_slice(format!("ctorch\n{class}\n").as_bytes());
                let m = 10 + i as u8;
                p.extend_from_slice(&[b'q', m]);
                memo.insert(class.to_string(), m);
            }
        }
        s(&mut p, key);
        s(&mut p, "cpu");
        p.push(b'J');
        p.extend_from_slice(&n.to_le_bytes());
        p.extend_from_slice(&[b't', b'Q', b'K', 0, b'J']);
        p.extend_from_slice(&n.to_le_bytes());
        p.extend_from_slice(&[0x85, b')', 0x89]);
        p.extend_from_slice(b"ccollections\nOrderedDict\n)Rt");
        p.push(b'R');
    }
    p.extend_from_slice(b"u.");
    p
}

#[test]
fn pytorch_zip_storages_round_trip_as_tensors() {
    let w = tensor_bytes(Dtype::F32, 30_000, 11);
    let h = tensor_bytes(Dtype::F16, 50_000, 12);
    let ids = tensor_bytes(Dtype::I64, 7, 13);
    // Right element counts: three tensors. A wrong one for `w`: its storage
    // stays opaque (viewed as 32-bit words), the others are still tensors.
    for (w_numel, tensors) in [(30_000, 3), (29_999, 2)] {
        let pkl = pickle(&[
            ("w", "FloatStorage", "0", w_numel),
            ("h", "HalfStorage", "1", 50_000),
            ("ids", "LongStorage", "2", 7),
        ]);
        let file = zip(&[
            ("archive/data.pkl", &pkl),
            ("archive/byteorder", b"little"),
            ("archive/data/0", &w),
            ("archive/data/1", &h),
            ("archive/data/2", &ids),
            ("archive/version", b"3\n"),
        ]);
        let (container, plans) = plan("model.pt", &file).unwrap();
        assert_eq!(container, Container::PyTorch);
        let n = plans
            .iter()
            .filter(|p| matches!(p.kind, SegmentKind::Tensor { .. }))
            .count();
        assert_eq!(n, tensors);
        let archive = round_trip(&[("model.pt", &file)]);
        let a = Archive::open(&archive, DecodeLimits::default()).unwrap();
        let (_, seg) = a.find_segment("archive/data/1").unwrap();
        assert_eq!(
            seg.kind,
            SegmentKind::Tensor {
                dtype: DType::F16,
                shape: vec![50_000]
            }
        );
    }
    // A zip without storages, and a legacy (non-zip) pickle, stay plain.
    let other = zip(&[("readme.txt", b"hello")]);
    assert_eq!(plan("x.pt", &other).unwrap().0, Container::Plain);
    let legacy = pickle(&[("w", "FloatStorage", "0", 4)]);
    assert_eq!(plan("x.pth", &legacy).unwrap().0, Container::Plain);
    round_trip(&[("x.pt", &other), ("x.pth", &legacy)]);
}

/// Asserts that `plans` cover `len` bytes, in order, without gaps or overlaps.
fn assert_tiles(plans: &[SegmentPlan], len: usize, what: &str) {
    let mut end = 0;
    for p in plans {
        assert_eq!(p.range.start, end, "{what}: {}", p.name);
        end = p.range.end;
    }
    assert_eq!(end, len, "{what}");
}

/// `file` with any one byte changed, or cut anywhere, planned as `path`:
/// never a panic, and the segments tile it.
fn every_damage_tiles(path: &str, file: &[u8]) {
    for at in 0..file.len() {
        let mut bad = file.to_vec();
        bad[at] ^= 0x5a;
        for damaged in [&bad[..], &file[..at]] {
            let (_, plans) = plan(path, damaged).unwrap();
            assert_tiles(&plans, damaged.len(), &format!("byte {at}"));
        }
    }
}

/// A legacy (pre-1.6, non-zip) checkpoint written by `torch.save(...,
/// _use_new_zipfile_serialization=False)` (`tests/assets/make_legacy_pth.py`):
/// an F32 storage (with a view of it), an F16, an F32 and an I64 one.
const LEGACY_PTH: &[u8] = include_bytes!("../assets/legacy_torch_save.pth");

#[test]
fn pytorch_legacy_storages_round_trip_as_tensors() {
    let (container, plans) = plan("craft.pth", LEGACY_PTH).unwrap();
    assert_eq!(container, Container::PyTorchLegacy);
    assert_tiles(&plans, LEGACY_PTH.len(), "the fixture");
    let tensors: Vec<(DType, Vec<u64>)> = plans
        .iter()
        .filter_map(|p| match &p.kind {
            SegmentKind::Tensor { dtype, shape } => Some((*dtype, shape.clone())),
            SegmentKind::Opaque => None,
        })
        .collect();
    assert_eq!(
        tensors,
        [
            (DType::F32, vec![48 * 32]),
            (DType::F16, vec![8 * 32]),
            (DType::F32, vec![32]),
            (DType::I64, vec![5])
        ]
    );
    // Each storage's bytes follow its element count.
    for p in plans.iter().filter(|p| p.name.starts_with("data/")) {
        let count = u64::from_le_bytes(LEGACY_PTH[p.range.start - 8..p.range.start].try_into().unwrap());
        let SegmentKind::Tensor { dtype, .. } = &p.kind else {
            unreachable!()
        };
        assert_eq!(count * dtype.size() as u64, p.range.len() as u64, "{}", p.name);
    }
    round_trip(&[("craft.pth", LEGACY_PTH)]);

    // Damaged: cut short, a storage's count changed, a key list that is not one,
    // the magic number alone. Each stays plain bytes and round-trips.
    let first = plans
        .iter()
        .find(|p| p.name.starts_with("data/"))
        .unwrap()
        .range
        .clone();
    let cut = &LEGACY_PTH[..LEGACY_PTH.len() - 3];
    let mut recount = LEGACY_PTH.to_vec();
    recount[first.start - 8] ^= 1;
    let keys_at = plans[0].range.end - 2; // the key list's APPENDS
    assert_eq!(LEGACY_PTH[keys_at..keys_at + 2], *b"e.");
    let mut not_a_list = LEGACY_PTH.to_vec();
    not_a_list[keys_at] = b'R';
    let magic_only = &LEGACY_PTH[..15];
    for bad in [cut, &recount, &not_a_list, magic_only] {
        assert_eq!(plan("craft.pth", bad).unwrap().0, Container::Plain);
    }
    round_trip(&[
        ("a.pth", cut),
        ("b.pth", &recount),
        ("c.pth", &not_a_list),
        ("d.pth", magic_only),
    ]);
    every_damage_tiles("x.pth", LEGACY_PTH);
}

fn ct2_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u16 + 1).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
    out.push(0);
}

/// A CTranslate2 model (binary version 6) of `variables` (name, dims, dtype
/// id, data) and one alias, as `model_spec.py` writes it.
fn ct2_model(variables: &[(&str, &[u32], u8, Vec<u8>)]) -> Vec<u8> {
    let mut out = 6u32.to_le_bytes().to_vec();
    ct2_string(&mut out, "WhisperSpec");
    out.extend_from_slice(&3u32.to_le_bytes());
    out.extend_from_slice(&(variables.len() as u32).to_le_bytes());
    for (name, dims, id, data) in variables {
        ct2_string(&mut out, name);
        out.push(dims.len() as u8);
        for d in *dims {
            out.extend_from_slice(&d.to_le_bytes());
        }
        out.push(*id);
        out.extend_from_slice(&(data.len() as u32).to_le_bytes());
        out.extend_from_slice(data);
    }
    out.extend_from_slice(&1u32.to_le_bytes());
    ct2_string(&mut out, "decoder/embeddings/alias");
    ct2_string(&mut out, "decoder/embeddings/weight");
    out
}

#[test]
fn ctranslate2_variables_round_trip_as_tensors() {
    let embeddings = tensor_bytes(Dtype::F16, 300 * 64, 21);
    let m = ct2_model(&[
        ("decoder/activation", &[], 1, vec![3]),
        ("decoder/embeddings/weight", &[300, 64], 4, embeddings),
        ("encoder/conv1/bias", &[5], 0, vec![1; 20]),
        // Bytes that disagree with the shape: 16-bit words, opaque.
        ("encoder/odd", &[3], 4, vec![2; 8]),
        // An unknown dtype id: opaque.
        ("encoder/future", &[2], 9, vec![4; 2]),
    ]);
    let (container, plans) = plan("model.bin", &m).unwrap();
    assert_eq!(container, Container::CTranslate2);
    assert_tiles(&plans, m.len(), "the model");
    let kinds: Vec<(&str, &SegmentKind, Layout)> = plans
        .iter()
        .filter(|p| p.name != "ctranslate2")
        .map(|p| (p.name.as_str(), &p.kind, p.layout))
        .collect();
    let tensor = |dtype, shape: &[u64]| SegmentKind::Tensor {
        dtype,
        shape: shape.to_vec(),
    };
    assert_eq!(
        kinds,
        [
            ("decoder/activation", &tensor(DType::I8, &[]), Layout::Auto),
            (
                "decoder/embeddings/weight",
                &tensor(DType::F16, &[300, 64]),
                Layout::Auto
            ),
            ("encoder/conv1/bias", &tensor(DType::F32, &[5]), Layout::Auto),
            ("encoder/odd", &SegmentKind::Opaque, Layout::Words(16)),
            ("encoder/future", &SegmentKind::Opaque, Layout::Auto),
        ]
    );
    let archive = round_trip(&[("whisper/model.bin", &m)]);
    let a = Archive::open(&archive, DecodeLimits::default()).unwrap();
    let (_, seg) = a.find_segment("decoder/embeddings/weight").unwrap();
    assert_eq!(seg.kind, tensor(DType::F16, &[300, 64]));
}

#[test]
fn ctranslate2_models_cut_or_damaged_round_trip_as_plain_bytes() {
    let w = tensor_bytes(Dtype::F32, 600, 22);
    let m = ct2_model(&[("w", &[20, 30], 0, w)]);
    assert_eq!(plan("model.bin", &m).unwrap().0, Container::CTranslate2);
    let mut longer = m.clone();
    longer.push(0);
    let mut v7 = m.clone();
    v7[0] = 7;
    let cut = &m[..m.len() - 1];
    for bad in [cut, &longer, &v7] {
        assert_eq!(plan("model.bin", bad).unwrap().0, Container::Plain);
    }
    round_trip(&[("a/model.bin", cut), ("b/model.bin", &longer), ("c/model.bin", &v7)]);
    every_damage_tiles("model.bin", &m);
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn pb_len(out: &mut Vec<u8>, field: u64, body: &[u8]) {
    varint(out, field << 3 | 2);
    varint(out, body.len() as u64);
    out.extend_from_slice(body);
}

fn pb_varint(out: &mut Vec<u8>, field: u64, v: u64) {
    varint(out, field << 3);
    varint(out, v);
}

/// An ONNX initializer (TensorProto) whose data is at `offset` of `location`.
fn onnx_external(name: &str, dims: &[u64], data_type: u64, location: &str, offset: usize, length: usize) -> Vec<u8> {
    let mut t = Vec::new();
    dims.iter().for_each(|&d| pb_varint(&mut t, 1, d));
    pb_varint(&mut t, 2, data_type);
    pb_len(&mut t, 8, name.as_bytes());
    for (k, v) in [
        ("location", location.to_string()),
        ("offset", offset.to_string()),
        ("length", length.to_string()),
    ] {
        let mut e = Vec::new();
        pb_len(&mut e, 1, k.as_bytes());
        pb_len(&mut e, 2, v.as_bytes());
        pb_len(&mut t, 13, &e);
    }
    pb_varint(&mut t, 14, 1);
    t
}

/// An ONNX initializer with raw data.
fn onnx_raw(name: &str, dims: &[u64], data_type: u64, raw: &[u8]) -> Vec<u8> {
    let mut t = Vec::new();
    dims.iter().for_each(|&d| pb_varint(&mut t, 1, d));
    pb_varint(&mut t, 2, data_type);
    pb_len(&mut t, 8, name.as_bytes());
    pb_len(&mut t, 9, raw);
    t
}

fn onnx_model(initializers: &[Vec<u8>]) -> Vec<u8> {
    let mut graph = Vec::new();
    pb_len(&mut graph, 2, b"main");
    initializers.iter().for_each(|t| pb_len(&mut graph, 5, t));
    let mut model = Vec::new();
    pb_varint(&mut model, 1, 8);
    pb_len(&mut model, 7, &graph);
    model
}

#[test]
fn onnx_external_data_in_a_folder_becomes_tensors() {
    let w = tensor_bytes(Dtype::F32, 40_000, 21);
    let h = tensor_bytes(Dtype::F16, 30_000, 22);
    // The data file as onnx's save_model writes it: tensors 4 KiB aligned.
    let mut data = w.clone();
    data.resize(data.len().next_multiple_of(4096), 0);
    let h_at = data.len();
    data.extend_from_slice(&h);
    let model = onnx_model(&[
        onnx_external("w", &[200, 200], 1, "model.onnx_data", 0, w.len()),
        onnx_external("h", &[30_000], 10, "./model.onnx_data", h_at, h.len()),
        onnx_raw("bias", &[16], 1, &tensor_bytes(Dtype::F32, 16, 23)),
    ]);
    let files: [(&str, &[u8]); 3] = [
        ("onnx/model.onnx", &model),
        ("onnx/model.onnx_data", &data),
        ("config.json", b"{}"),
    ];
    let archive = round_trip(&files);
    let a = Archive::open(&archive, DecodeLimits::default()).unwrap();
    let data_file = a.files().iter().find(|f| f.path == "onnx/model.onnx_data").unwrap();
    let kinds: Vec<(&str, &SegmentKind)> = data_file.segments.iter().map(|s| (s.name.as_str(), &s.kind)).collect();
    assert_eq!(
        kinds,
        [
            (
                "w",
                &SegmentKind::Tensor {
                    dtype: DType::F32,
                    shape: vec![200, 200]
                }
            ),
            ("external data", &SegmentKind::Opaque),
            (
                "h",
                &SegmentKind::Tensor {
                    dtype: DType::F16,
                    shape: vec![30_000]
                }
            ),
        ]
    );
    // Alone (its model not in the archive), the data file is plain bytes.
    let (container, _) = plan("model.onnx_data", &data).unwrap();
    assert_eq!(container, Container::Plain);
    round_trip(&files[1..2]);
}

#[test]
fn packed_int4_tensors_are_viewed_as_nibbles() {
    // Values around 8, packed two per byte.
    let mut r = Rng(31);
    let packed: Vec<u8> = (0..100_000)
        .map(|_| {
            let a = (8 + r.normal(1.5) as i64).clamp(0, 15) as u8;
            let b = (8 + r.normal(1.5) as i64).clamp(0, 15) as u8;
            a | b << 4
        })
        .collect();
    let model = onnx_model(&[
        onnx_raw("q", &[200_000], 22, &packed),
        onnx_raw("scale", &[64], 1, &tensor_bytes(Dtype::F32, 64, 32)),
    ]);
    let (container, plans) = plan("model_q4.onnx", &model).unwrap();
    assert_eq!(container, Container::Onnx);
    let q = plans.iter().find(|p| p.name == "q").unwrap();
    assert_eq!((q.kind.clone(), q.layout), (SegmentKind::Opaque, Layout::Nibbles));
    let archive = round_trip(&[("model_q4.onnx", &model)]);
    // Two nibbles of about 2.6 bits each: well under the 8 bits a byte costs.
    assert!(archive.len() < packed.len() * 3 / 4, "{} bytes", archive.len());
    let (_, reports) = compress(&[("model_q4.onnx", &model)]);
    let q = reports[0].segments.iter().find(|s| s.name == "q").unwrap();
    assert!(q.programs[0].starts_with("Merge.fields[4,4]"), "{}", q.programs[0]);
}

/// A synthesizer that notes, for each chunk, its words and whether it was given
/// an earlier chunk's template to build on.
struct NotesTemplates {
    inner: brevis_encoder::synth::AStarSearch,
    calls: std::sync::Mutex<Vec<(usize, bool)>>,
}

impl brevis_encoder::synth::Synthesizer for NotesTemplates {
    fn synthesize(
        &self,
        root: &brevis_format::stream::Stream,
        hint: brevis_encoder::synth::Hint,
    ) -> brevis_format::program::Node {
        self.inner.synthesize(root, hint)
    }

    fn synthesize_reusing(
        &self,
        root: &brevis_format::stream::Stream,
        hint: brevis_encoder::synth::Hint,
        template: Option<&brevis_encoder::synth::Template>,
    ) -> (brevis_format::program::Node, Option<brevis_encoder::synth::Template>) {
        self.calls.lock().unwrap().push((root.len(), template.is_some()));
        self.inner.synthesize_reusing(root, hint, template)
    }

    fn waits_for_template(&self, hint: brevis_encoder::synth::Hint, words: usize) -> bool {
        self.inner.waits_for_template(hint, words)
    }
}

#[test]
fn a_quantized_tensors_shorter_last_chunk_is_built_from_its_template_too() {
    // Chunks of 64 KiB: a Q4_1 tensor of 2.5 chunks, searched whole as record
    // chunks always are. Its second chunk is built from the first one's
    // template (same key), and so is its last, shorter one (another key: the
    // template of its tensor's chunks). An FP32 tensor's shorter last chunk is
    // searched instead (see `template_for` in `compress.rs`).
    let file = gguf(&[
        ("blk.0.ffn_up.weight", vec![32, 8192], 3, q4_1(8192, 11)),
        (
            "blk.0.ffn_norm.weight",
            vec![40960],
            0,
            tensor_bytes(Dtype::F32, 40960, 12),
        ),
    ]);
    let synth = NotesTemplates {
        inner: brevis_encoder::synth::AStarSearch::with_effort(1),
        calls: std::sync::Mutex::default(),
    };
    let opts = brevis_encoder::CompressOptions {
        chunk_bytes: 64 << 10,
        ..brevis_encoder::CompressOptions::default()
    };
    let input = [brevis_encoder::InputFile {
        archive_path: "m.gguf".into(),
        data: &file,
    }];
    let (archive, _, _) = brevis_encoder::compress_files(Vec::new(), &input, &synth, &opts, &|_| {}).unwrap();
    // Sorted: with several threads, chunks of one round may be searched in any
    // order (a chunk waiting for a template is in a later round).
    let mut calls = synth.calls.into_inner().unwrap();
    calls.sort_unstable();
    // The calls for chunks of these word counts.
    let of = |words: [usize; 2]| -> Vec<(usize, bool)> {
        calls.iter().copied().filter(|(w, _)| words.contains(w)).collect()
    };
    // 163,840 bytes of blocks: two chunks of 3,276 blocks (65,520 bytes, 32,760
    // 16-bit root words) and a last of 1,640 (16,400 words).
    assert_eq!(
        of([32_760, 16_400]),
        [(16_400, true), (32_760, false), (32_760, true)],
        "{calls:?}"
    );
    // 163,840 bytes of FP32: two chunks of 16 Ki words, the last of 8 Ki searched.
    assert_eq!(
        of([16_384, 8_192]),
        [(8_192, false), (16_384, false), (16_384, true)],
        "{calls:?}"
    );
    let back = brevis_decoder::decode_all(&archive, &DecodeLimits::default()).unwrap();
    assert!(back[0].data == file);
}
