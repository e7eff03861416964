//! Running programs: evaluate the tree bottom-up into the root stream, then
//! write its words as little-endian bytes.

use alloc::vec::Vec;

use brevis_format::archive::{chunk_checksum, ChunkRecord, UncheckedRecord};
use brevis_format::ops::interleave;
use brevis_format::program::{self, Limits, Node, Type};
use brevis_format::stream::{self, LeBytes, Stream, Words, WordsMut};
use brevis_format::{wire, with_words, with_words_mut, with_words_slice, FormatError, Result};

/// Evaluates a type-checked program into its stream.
///
/// The caller must have run [`Node::check`] with limits (as [`program::parse`]
/// does), which bounds every count by the root's and the total memory.
pub fn eval<P: AsRef<[u8]>>(node: &Node<P>) -> Result<Stream> {
    match node {
        Node::Lit {
            width,
            count,
            encoding,
            payload,
        } => wire::decode(*encoding, *width, to_usize(*count)?, payload.as_ref()),
        Node::Const { width, count, value } => {
            let mut s = Stream::zeros(*width, to_usize(*count)?)?.into_words();
            with_words_mut!(&mut s, w => w.fill(brevis_format::Word::from_u64(*value)));
            Stream::new(*width, s)
        }
        Node::Concat(children) => {
            let mut parts = Vec::with_capacity(children.len());
            for c in children {
                parts.push(eval(c)?);
            }
            let width = parts.first().map(|p| p.width()).unwrap_or(8);
            let total = parts.iter().map(|p| p.len()).sum();
            let mut out = Stream::zeros(width, 0)?.into_words();
            with_words_mut!(&mut out, o => o.reserve_exact(total));
            for p in parts {
                append(&mut out, p.into_words())?;
            }
            Stream::new(width, out)
        }
        Node::Repeat { times, child } => {
            let c = eval(child)?;
            let width = c.width();
            let words = c.into_words();
            // An empty child repeats to nothing. The type bounds `len × times`,
            // not `times` alone, so never loop `times` times over nothing.
            let times = if words_empty(&words) { 0 } else { to_usize(*times)? };
            let out = with_words!(words, w => {
                let mut v = Vec::with_capacity(w.len() * times);
                for _ in 0..times {
                    v.extend_from_slice(&w);
                }
                wrap(v)
            });
            Stream::new(width, out)
        }
        Node::Map { op, child } => {
            let c = eval(child)?;
            let width = c.width();
            let mut words = c.into_words();
            with_words_mut!(&mut words, w => op.apply(width, w));
            Stream::new(width, words)
        }
        Node::Scan { op, stride, child } => {
            let c = eval(child)?;
            let width = c.width();
            let mut words = c.into_words();
            let stride = usize::try_from(*stride).unwrap_or(usize::MAX);
            with_words_mut!(&mut words, w => op.apply(width, stride, w));
            Stream::new(width, words)
        }
        Node::Merge { op, children } => {
            let mut parts = Vec::with_capacity(children.len());
            for c in children {
                parts.push(eval(c)?);
            }
            let width = op.check()?;
            let len = parts.first().map(|p| p.len()).unwrap_or(0);
            let mut out = Stream::zeros(width, len)?.into_words();
            with_words_mut!(&mut out, o => op.apply(&parts, o))?;
            Stream::new(width, out)
        }
        Node::Interleave(children) => {
            let mut parts = Vec::with_capacity(children.len());
            for c in children {
                parts.push(eval(c)?);
            }
            let width = parts.first().map(|p| p.width()).unwrap_or(8);
            let len = parts.iter().map(|p| p.len()).sum();
            let mut out = Stream::zeros(width, len)?.into_words();
            macro_rules! columns {
                ($variant:ident, $o:expr) => {{
                    let cols: Option<Vec<&[_]>> = parts
                        .iter()
                        .map(|p| match p.words() {
                            Words::$variant(v) => Some(v.as_slice()),
                            _ => None,
                        })
                        .collect();
                    let cols = cols.ok_or(FormatError::Type {
                        op: "Interleave",
                        rule: "children differ in width",
                    })?;
                    interleave::apply(&cols, $o);
                }};
            }
            match &mut out {
                Words::U8(o) => columns!(U8, o),
                Words::U16(o) => columns!(U16, o),
                Words::U32(o) => columns!(U32, o),
                Words::U64(o) => columns!(U64, o),
            }
            Stream::new(width, out)
        }
    }
}

/// [`eval`] into words the caller holds (`out`: the root's container and
/// count, as the type check gave them): the operators that end in writing
/// every output word (`Lit`, `Const`, `Merge`, and `Map` or `Scan` over one of
/// those) write there, with no stream of their own; the others are evaluated
/// as [`eval`] does and copied. `width` is the node's (its type's), and words of
/// widths below their container's are checked to fit, as [`Stream::new`] does.
pub fn eval_into<P: AsRef<[u8]>>(node: &Node<P>, width: u8, mut out: WordsMut<'_>) -> Result<()> {
    stream::check_container(width, &out)?;
    match node {
        Node::Lit {
            width: own,
            count,
            encoding,
            payload,
        } => {
            check_count(*count, &out)?;
            same_width(*own, width)?;
            wire::decode_into(*encoding, width, payload.as_ref(), out)
        }
        Node::Const {
            width: own,
            count,
            value,
        } => {
            check_count(*count, &out)?;
            same_width(*own, width)?;
            with_words_slice!(out.reborrow(), w => w.fill(brevis_format::Word::from_u64(*value)));
            stream::check_fit(width, out)
        }
        // A map or a scan keeps its child's width.
        Node::Map { op, child } => {
            eval_into(child, width, out.reborrow())?;
            with_words_slice!(out.reborrow(), w => op.apply(width, w));
            stream::check_fit(width, out)
        }
        Node::Scan { op, stride, child } => {
            eval_into(child, width, out.reborrow())?;
            let stride = usize::try_from(*stride).unwrap_or(usize::MAX);
            with_words_slice!(out.reborrow(), w => op.apply(width, stride, w));
            stream::check_fit(width, out)
        }
        Node::Merge { op, children } => {
            let mut parts = Vec::with_capacity(children.len());
            for c in children {
                parts.push(eval(c)?);
            }
            same_width(op.check()?, width)?;
            with_words_slice!(out.reborrow(), o => op.apply(&parts, o))?;
            stream::check_fit(width, out)
        }
        Node::Concat(_) | Node::Repeat { .. } | Node::Interleave(_) => {
            let s = eval(node)?;
            same_width(s.width(), width)?;
            check_count(s.len() as u64, &out)?;
            match (s.words(), out) {
                (Words::U8(v), WordsMut::U8(o)) => o.copy_from_slice(v),
                (Words::U16(v), WordsMut::U16(o)) => o.copy_from_slice(v),
                (Words::U32(v), WordsMut::U32(o)) => o.copy_from_slice(v),
                (Words::U64(v), WordsMut::U64(o)) => o.copy_from_slice(v),
                _ => return Err(FormatError::BadWidth { width: s.width() }),
            }
            Ok(())
        }
    }
}

/// Refuses a node whose width is not the one its parent gave it.
fn same_width(node: u8, given: u8) -> Result<()> {
    if node != given {
        return Err(FormatError::Type {
            op: "eval_into",
            rule: "node width differs from the output's",
        });
    }
    Ok(())
}

/// Refuses an output of another count than the node's.
fn check_count(count: u64, out: &WordsMut<'_>) -> Result<()> {
    if out.len() as u64 != count {
        return Err(FormatError::LengthMismatch {
            what: "program output words",
            expected: count,
            found: out.len() as u64,
        });
    }
    Ok(())
}

/// Conversion of container vectors back into [`Words`].
trait IntoWords {
    fn into_words(self) -> Words;
}
impl IntoWords for Vec<u8> {
    fn into_words(self) -> Words {
        Words::U8(self)
    }
}
impl IntoWords for Vec<u16> {
    fn into_words(self) -> Words {
        Words::U16(self)
    }
}
impl IntoWords for Vec<u32> {
    fn into_words(self) -> Words {
        Words::U32(self)
    }
}
impl IntoWords for Vec<u64> {
    fn into_words(self) -> Words {
        Words::U64(self)
    }
}
fn wrap<V: IntoWords>(v: V) -> Words {
    v.into_words()
}

fn append(out: &mut Words, part: Words) -> Result<()> {
    match (out, part) {
        (Words::U8(o), Words::U8(p)) => o.extend_from_slice(&p),
        (Words::U16(o), Words::U16(p)) => o.extend_from_slice(&p),
        (Words::U32(o), Words::U32(p)) => o.extend_from_slice(&p),
        (Words::U64(o), Words::U64(p)) => o.extend_from_slice(&p),
        _ => {
            return Err(FormatError::Type {
                op: "Concat",
                rule: "children differ in width",
            })
        }
    }
    Ok(())
}

fn words_empty(w: &Words) -> bool {
    with_words!(w, v => v.is_empty())
}

fn to_usize(v: u64) -> Result<usize> {
    usize::try_from(v).map_err(|_| FormatError::LimitExceeded {
        limit: "stream length",
        requested: v,
        allowed: usize::MAX as u64,
    })
}

/// Decodes one chunk record's body into its bytes: the root stream's own buffer
/// where its words fill their containers (no copy, see [`LeBytes`]). The program
/// runs from the record itself: its literals' payloads are not copied (they
/// were, as [`ParsedChunk::parse`] does: 4.5% of a one-thread `brevis verify` of
/// a synthetic `--fast-decode` BF16 archive, `perf record --call-graph dwarf`).
/// In WebAssembly that once made the module's heap (which never shrinks) grow
/// from 18 to 27 MB streaming three int8 models instead of one: the output of a
/// 4 MiB chunk of 8-bit words plus the 8 MiB buffer its 16-bit decoder used found
/// no free block. That decoder now narrows in its own buffer (`wire::narrow`),
/// and the heap stays at 18.5 MB for one model and for three (npm test `wasm
/// memory does not grow with the model`).
///
/// Checks, in order: the chunk header, the program's syntax, types and limits,
/// that the program's type matches the declared length, and after running it
/// the xxh3 of the bytes produced.
pub fn decode_chunk_bytes(body: &[u8], limits: &Limits) -> Result<LeBytes> {
    let (node, chunk) = parse_chunk(body, limits, program::parse_borrowed)?;
    check_decoded(eval(&node)?.into_le_bytes()?, chunk.decoded_xxh3)
}

/// [`decode_chunk_bytes`] into `out`, which must be the chunk's declared
/// length: the program's root evaluated straight into it ([`eval_into`]) where
/// its words fill their containers and `out` is aligned for them (a file's
/// buffer, with the chunk at its place), else decoded and copied. The same
/// checks, in the same order, and the xxh3 then taken of `out`.
pub fn decode_chunk_into(body: &[u8], limits: &Limits, out: &mut [u8]) -> Result<()> {
    // In WebAssembly the chunk is decoded and copied: there `eval_into` and a
    // second instance of the chunk checks would grow the module (past the npm
    // package's size budget), and the output is copied into JavaScript anyway.
    #[cfg(target_arch = "wasm32")]
    {
        let bytes = decode_chunk_bytes(body, limits)?;
        copy_output(&bytes, out)
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        let (node, chunk) = parse_chunk(body, limits, program::parse_borrowed)?;
        if chunk.decoded_len != out.len() as u64 {
            return Err(FormatError::LengthMismatch {
                what: "chunk length (against its output)",
                expected: out.len() as u64,
                found: chunk.decoded_len,
            });
        }
        match WordsMut::from_le_bytes(chunk.root_width, out) {
            Some(words) => eval_into(&node, chunk.root_width, words)?,
            None => copy_output(&eval(&node)?.into_le_bytes()?, out)?,
        }
        check_checksum(out, chunk.decoded_xxh3)
    }
}

/// Copies a chunk's decoded `bytes` into `out`, which must be as long.
fn copy_output(bytes: &[u8], out: &mut [u8]) -> Result<()> {
    if bytes.len() != out.len() {
        return Err(FormatError::LengthMismatch {
            what: "chunk length (against its output)",
            expected: out.len() as u64,
            found: bytes.len() as u64,
        });
    }
    out.copy_from_slice(bytes);
    Ok(())
}

/// [`decode_chunk_bytes`] of a whole chunk record (kind, length, body and
/// checksum), whose checksum is checked too: after decoding, while the record
/// is in cache ([`UncheckedRecord::read_then_check`]), and a bad one is the
/// error whatever decoding found. What a [`crate::PendingChunk`] started by
/// [`crate::StreamDecoder::next_event_ahead`] must give: the check is then made
/// where the chunk decodes (another thread, say), not where the archive is read.
pub fn decode_chunk_record(record: &[u8], limits: &Limits) -> Result<LeBytes> {
    UncheckedRecord::parse(record)?.read_then_check(|body| decode_chunk_bytes(body, limits))
}

/// A chunk record's program, parsed and checked, ready to run without the record:
/// [`decode_chunk_bytes`] in two steps, so that a caller can parse a chunk where its
/// record lies and run it elsewhere without copying the record (the program holds
/// its own copy of every literal's payload).
#[derive(Debug)]
pub struct ParsedChunk {
    node: Node,
    decoded_xxh3: u64,
    decoded_len: u64,
}

impl ParsedChunk {
    /// Checks the chunk header, the program's syntax, types and limits, and that
    /// the program's type matches the declared length.
    pub fn parse(body: &[u8], limits: &Limits) -> Result<Self> {
        let (node, chunk) = parse_chunk(body, limits, program::parse)?;
        Ok(ParsedChunk {
            node,
            decoded_xxh3: chunk.decoded_xxh3,
            decoded_len: chunk.decoded_len,
        })
    }

    /// The bytes the program rebuilds, as the chunk header declares (and the
    /// program's type matches).
    pub fn decoded_len(&self) -> u64 {
        self.decoded_len
    }

    /// Runs the program and checks the xxh3 of the bytes it produced.
    pub fn run(self) -> Result<LeBytes> {
        let bytes = eval(&self.node)?.into_le_bytes()?;
        // The payloads' copies go before the bytes are hashed.
        drop(self.node);
        check_decoded(bytes, self.decoded_xxh3)
    }
}

/// The program of chunk record `body`, parsed by `parse` (with or without copies
/// of the payloads) and checked against the chunk's header, and that header.
/// (Inlined: in WebAssembly [`decode_chunk_bytes`] stays one function, a smaller
/// module.)
#[inline(always)]
fn parse_chunk<'a, P>(
    body: &'a [u8],
    limits: &Limits,
    parse: impl FnOnce(&'a [u8], &Limits) -> Result<Node<P>>,
) -> Result<(Node<P>, ChunkRecord<'a>)> {
    let chunk = ChunkRecord::parse(body)?;
    let node = parse(chunk.program, limits)?;
    let ty = node.ty()?;
    let want = Type {
        width: chunk.root_width,
        count: chunk.root_count(),
    };
    if ty.width != want.width {
        return Err(FormatError::Type {
            op: "chunk",
            rule: "program width differs from the chunk's root width",
        });
    }
    if ty.count != want.count {
        return Err(FormatError::LengthMismatch {
            what: "program output words",
            expected: want.count,
            found: ty.count,
        });
    }
    Ok((node, chunk))
}

/// `bytes`, a program's output, if their xxh3 is `decoded_xxh3`.
#[inline(always)]
fn check_decoded(bytes: LeBytes, decoded_xxh3: u64) -> Result<LeBytes> {
    check_checksum(&bytes, decoded_xxh3)?;
    Ok(bytes)
}

/// Refuses a program's output whose xxh3 is not `decoded_xxh3`.
#[inline(always)]
fn check_checksum(bytes: &[u8], decoded_xxh3: u64) -> Result<()> {
    let computed = chunk_checksum(bytes);
    if computed != decoded_xxh3 {
        return Err(FormatError::Checksum {
            what: "decoded chunk",
            stored: decoded_xxh3,
            computed,
        });
    }
    Ok(())
}

/// [`decode_chunk_bytes`] as a vector (a copy unless the root's words are bytes).
pub fn decode_chunk(body: &[u8], limits: &Limits) -> Result<Vec<u8>> {
    decode_chunk_bytes(body, limits).map(LeBytes::into_vec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::boxed::Box;
    use brevis_format::archive::chunk_checksum;
    use brevis_format::program::parse;
    use brevis_format::wire::LitEncoding;

    /// A chunk body declaring `out`, with `program`.
    fn chunk(out: &[u8], program: &[u8]) -> Vec<u8> {
        ChunkRecord::body(out.len() as u64, chunk_checksum(out), 8, program)
    }

    /// A chunk of `node`, declaring what the reference evaluation gives.
    fn chunk_of(node: &Node) -> (Vec<u8>, Vec<u8>) {
        let width = node.ty().unwrap().width;
        let bytes = eval(node).unwrap().into_le_bytes().unwrap().into_vec();
        let body = ChunkRecord::body(
            bytes.len() as u64,
            chunk_checksum(&bytes),
            width,
            &brevis_format::program::serialize(node),
        );
        (body, bytes)
    }

    fn lit(width: u8, encoding: LitEncoding, values: &[u64]) -> Node {
        let stream = Stream::from_u64s(width, values).unwrap();
        let payload = brevis_format::wire::encode(encoding, &stream).unwrap();
        Node::Lit {
            width,
            count: values.len() as u64,
            encoding,
            payload,
        }
    }

    /// Programs ending in each operator decode into a caller's bytes as they
    /// decode alone: in place where the bytes are aligned for the root's words
    /// (every root width that fills its container, each operator that writes
    /// there), copied where not (an odd offset, 24-bit words, `Concat`); and a
    /// wrong length or a wrong checksum is refused either way.
    #[test]
    fn chunks_decoded_into_place_match_chunks_decoded_alone() {
        use brevis_format::ops::{MapOp, MergeOp, ScanOp};
        let n = 999usize;
        // Skewed words (three random draws ANDed), which every coder takes.
        let vals = |bits: u32, salt: u64| -> Vec<u64> {
            let draw = |i: u64, k: u64| {
                (i.wrapping_add(k) ^ salt)
                    .wrapping_mul(0x9E37_79B9_7F4A_7C15)
                    .rotate_left(29)
            };
            (0..n as u64)
                .map(|i| (draw(i, 0) & draw(i, 1 << 40) & draw(i, 1 << 50)) >> (64 - bits))
                .collect()
        };
        let programs = [
            lit(16, LitEncoding::HSplit, &vals(16, 1)),
            lit(16, LitEncoding::Huffman8, &vals(12, 2)),
            lit(8, LitEncoding::Huffman, &vals(5, 3)),
            lit(8, LitEncoding::Raw, &vals(8, 4)),
            lit(64, LitEncoding::Raw, &vals(64, 5)),
            lit(8, LitEncoding::Rans, &vals(6, 13)),
            lit(24, LitEncoding::Raw, &vals(24, 6)),
            Node::Map {
                op: MapOp::RotateLeft(3),
                child: Box::new(lit(32, LitEncoding::BitPacked, &vals(32, 7))),
            },
            Node::Scan {
                op: ScanOp::Add,
                stride: 3,
                child: Box::new(Node::Merge {
                    op: MergeOp::Fields(alloc::vec![9, 7]),
                    children: alloc::vec![
                        lit(9, LitEncoding::Huffman, &vals(9, 8)),
                        lit(7, LitEncoding::BitPacked, &vals(7, 9)),
                    ],
                }),
            },
            Node::Const {
                width: 32,
                count: n as u64,
                value: 0xdead_beef,
            },
            Node::Concat(alloc::vec![
                lit(16, LitEncoding::Raw, &vals(16, 10)),
                Node::Const {
                    width: 16,
                    count: 5,
                    value: 7,
                },
            ]),
            Node::Interleave(alloc::vec![
                lit(32, LitEncoding::Raw, &vals(32, 11)),
                lit(32, LitEncoding::BitPacked, &vals(32, 12)),
            ]),
        ];
        let limits = Limits::default();
        for node in &programs {
            let (body, want) = chunk_of(node);
            assert_eq!(decode_chunk(&body, &limits).unwrap(), want, "{node:?}");
            // At offsets aligned for 8-byte words and not.
            let mut store = alloc::vec![0u8; want.len() + 16];
            let aligned = store.as_ptr().align_offset(8);
            let bytes = &mut store[aligned..];
            for offset in [0, 8, 1, 3] {
                let out = &mut bytes[offset..offset + want.len()];
                out.fill(0x55);
                decode_chunk_into(&body, &limits, out).unwrap();
                assert_eq!(out, &want[..], "{node:?} at offset {offset}");
            }
            let short = &mut bytes[..want.len() - 1];
            assert!(matches!(
                decode_chunk_into(&body, &limits, short),
                Err(FormatError::LengthMismatch { .. })
            ));
            // The same program declaring other bytes (one flipped).
            let mut other = want.clone();
            other[want.len() / 2] ^= 1;
            let width = node.ty().unwrap().width;
            let bad = ChunkRecord::body(
                other.len() as u64,
                chunk_checksum(&other),
                width,
                &brevis_format::program::serialize(node),
            );
            for offset in [0, 1] {
                let out = &mut bytes[offset..offset + want.len()];
                assert!(matches!(
                    decode_chunk_into(&bad, &limits, out),
                    Err(FormatError::Checksum { .. })
                ));
            }
        }
    }

    /// Found by `cargo fuzz` (target `program`, minimized): `Repeat[0x4fffffff]`
    /// of an empty zstd `Lit<b61×0>`. Its type is `b61[0]`, so no limit objects,
    /// but evaluating it looped 1.3 billion times over nothing (a hang).
    #[test]
    fn repeating_an_empty_stream_is_immediate() {
        let bytes = [0x03, 0xff, 0xff, 0xff, 0xff, 0x04, 0x00, 0x3d, 0x00, 0x04, 0x00];
        let node = parse(&bytes, &Limits::default()).unwrap();
        let s = eval(&node).unwrap();
        assert_eq!((s.width(), s.len()), (61, 0));
        // The same inside a chunk: Concat(Repeat[2^40](Lit<b8×0>), Const<b8×3>(7)).
        let program = [
            0x02, 0x02, 0x03, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20, 0x00, 0x08, 0x00, 0x00, 0x00, 0x01, 0x08, 0x03, 0x07,
        ];
        assert_eq!(
            decode_chunk(&chunk(&[7; 3], &program), &Limits::default()),
            Ok(alloc::vec![7; 3])
        );
    }

    /// Found by `cargo fuzz` (target `program`): an `Interleave` of empty
    /// children sliced its empty output at the column index and panicked.
    #[test]
    fn interleaving_empty_columns_yields_nothing() {
        let bytes = [0x07, 0x02, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00];
        let node = parse(&bytes, &Limits::default()).unwrap();
        let s = eval(&node).unwrap();
        assert_eq!((s.width(), s.len()), (8, 0));
        // Inside a chunk: Concat(Interleave(Lit<b8×0>, Lit<b8×0>), Const<b8×3>(7)).
        let mut program = alloc::vec![0x02, 0x02];
        program.extend_from_slice(&bytes);
        program.extend_from_slice(&[0x01, 0x08, 0x03, 0x07]);
        assert_eq!(
            decode_chunk(&chunk(&[7; 3], &program), &Limits::default()),
            Ok(alloc::vec![7; 3])
        );
    }

    /// A chunk parsed to run elsewhere says what it declares, runs to what the
    /// in-place path gives, and is refused where that one is.
    #[test]
    fn parsed_chunks_run_as_chunks_decoded_in_place() {
        // Const<b8×3>(7).
        let body = chunk(&[7; 3], &[0x01, 0x08, 0x03, 0x07]);
        let parsed = ParsedChunk::parse(&body, &Limits::default()).unwrap();
        assert_eq!(parsed.decoded_len(), 3);
        assert_eq!(
            parsed.run().map(LeBytes::into_vec),
            decode_chunk(&body, &Limits::default())
        );
        // Declaring 4 bytes for a program of 3 words.
        let wrong = chunk(&[7; 4], &[0x01, 0x08, 0x03, 0x07]);
        assert_eq!(
            ParsedChunk::parse(&wrong, &Limits::default()).unwrap_err(),
            decode_chunk(&wrong, &Limits::default()).unwrap_err()
        );
    }
}
