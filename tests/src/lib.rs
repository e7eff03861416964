//! Helpers for the end-to-end tests: synthetic but realistic tensors, real
//! safetensors files built with the `safetensors` crate, and a one-call round trip.

use brevis_decoder::{decode_all, DecodeLimits};
use brevis_encoder::synth::{CandidateSearch, Synthesizer};
use brevis_encoder::{compress_files, CompressOptions, FileReport, InputFile};
use safetensors::tensor::{Dtype, TensorView};

/// A small deterministic generator (xorshift), so tests need no RNG crate.
pub struct Rng(pub u64);

impl Rng {
    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Roughly normal, mean 0, standard deviation `sd` (sum of uniforms).
    pub fn normal(&mut self, sd: f64) -> f64 {
        let s: f64 = (0..4)
            .map(|_| (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64)
            .sum();
        (s - 2.0) * sd * 1.732
    }
}

/// Bytes of `n` elements of `dtype` that look like trained weights (floats),
/// quantized weights (8-bit ints) or ids and counters (wider ints).
pub fn tensor_bytes(dtype: Dtype, n: usize, seed: u64) -> Vec<u8> {
    let mut r = Rng(seed | 1);
    let mut out = Vec::with_capacity(n * 8);
    for i in 0..n {
        let x = r.normal(0.02);
        match dtype {
            Dtype::F32 => out.extend_from_slice(&(x as f32).to_le_bytes()),
            Dtype::F64 => out.extend_from_slice(&x.to_le_bytes()),
            Dtype::BF16 => out.extend_from_slice(&(((x as f32).to_bits() >> 16) as u16).to_le_bytes()),
            Dtype::F16 => out.extend_from_slice(&f32_to_f16_bits(x as f32).to_le_bytes()),
            Dtype::F8_E4M3 | Dtype::F8_E5M2 => out.push((r.next_u64() % 64) as u8 | if x < 0.0 { 0x80 } else { 0 }),
            Dtype::I8 | Dtype::U8 => out.push((x * 3000.0) as i8 as u8),
            Dtype::BOOL => out.push(r.next_u64().is_multiple_of(7) as u8),
            Dtype::I16 | Dtype::U16 => out.extend_from_slice(&((x * 1e5) as i16).to_le_bytes()),
            Dtype::I32 | Dtype::U32 => out.extend_from_slice(&(i as i32 * 3 - 7).to_le_bytes()),
            Dtype::I64 | Dtype::U64 => out.extend_from_slice(&(i as i64).to_le_bytes()),
            other => panic!("no generator for {other:?}"),
        }
    }
    out
}

/// IEEE binary16 bits of `x`, truncating (good enough for test data).
pub fn f32_to_f16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32 - 127 + 15;
    let mant = ((b >> 13) & 0x3ff) as u16;
    if exp <= 0 {
        sign
    } else if exp >= 31 {
        sign | 0x7c00
    } else {
        sign | ((exp as u16) << 10) | mant
    }
}

/// A safetensors file holding `tensors` (name, dtype, shape, bytes).
pub fn safetensors_file(tensors: &[(&str, Dtype, Vec<usize>, Vec<u8>)]) -> Vec<u8> {
    let views: Vec<(String, TensorView<'_>)> = tensors
        .iter()
        .map(|(name, dtype, shape, data)| {
            (
                name.to_string(),
                TensorView::new(*dtype, shape.clone(), data).expect("valid tensor"),
            )
        })
        .collect();
    safetensors::serialize(views, None).expect("serialize")
}

/// Compresses `files` (path, bytes) into an archive with default settings.
pub fn compress(files: &[(&str, &[u8])]) -> (Vec<u8>, Vec<FileReport>) {
    compress_with(files, &CompressOptions::default())
}

/// [`compress`] with `options`.
pub fn compress_with(files: &[(&str, &[u8])], options: &CompressOptions) -> (Vec<u8>, Vec<FileReport>) {
    compress_using(files, &CandidateSearch::default(), options)
}

/// [`compress`] with `search` and `options`.
pub fn compress_using(
    files: &[(&str, &[u8])],
    search: &dyn Synthesizer,
    options: &CompressOptions,
) -> (Vec<u8>, Vec<FileReport>) {
    let inputs: Vec<InputFile<'_>> = files
        .iter()
        .map(|(p, d)| InputFile {
            archive_path: p.to_string(),
            data: d,
        })
        .collect();
    let (archive, len, reports) = compress_files(Vec::new(), &inputs, search, options, &|_| {}).expect("compress");
    assert_eq!(archive.len() as u64, len);
    (archive, reports)
}

/// Compresses, decodes with [`decode_all`] and asserts every file comes back
/// byte for byte with no verification fallback. Returns the archive.
pub fn round_trip(files: &[(&str, &[u8])]) -> Vec<u8> {
    let (archive, reports) = compress(files);
    for r in &reports {
        assert_eq!(r.verify_fallbacks, 0, "{}: a program failed verification", r.path);
    }
    let decoded = decode_all(&archive, &DecodeLimits::default()).expect("decode");
    assert_eq!(decoded.len(), files.len());
    for ((path, data), d) in files.iter().zip(&decoded) {
        assert_eq!(&d.path, path);
        assert!(d.data == *data, "{path}: bytes differ");
    }
    archive
}

/// Builds an archive from raw record bodies (FILE, SEGMENT, CHUNK, in order),
/// with correct checksums, index and END: for handcrafted, hostile archives.
pub fn build_archive(records: &[(brevis_format::archive::RecordKind, Vec<u8>)]) -> Vec<u8> {
    use brevis_format::archive::{
        end_body, header, index_body, put_record, ChunkRecord, DigestKind, IndexEntry, RecordKind, END_LEN,
    };
    let mut a = header(DigestKind::Sha256).to_vec();
    let mut index = Vec::new();
    for (kind, body) in records {
        let decoded_len = if *kind == RecordKind::Chunk {
            ChunkRecord::parse(body).map(|c| c.decoded_len).unwrap_or(0)
        } else {
            0
        };
        index.push(IndexEntry {
            kind: *kind,
            offset: a.len() as u64,
            decoded_len,
        });
        put_record(&mut a, *kind, body);
    }
    let index_offset = a.len() as u64;
    put_record(&mut a, RecordKind::Index, &index_body(&index));
    let total = a.len() as u64 + END_LEN as u64;
    put_record(&mut a, RecordKind::End, &end_body(index_offset, total));
    a
}
