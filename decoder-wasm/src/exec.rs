//! Running programs: evaluate the tree bottom-up into the root stream, then
//! write its words as little-endian bytes.

use alloc::vec::Vec;

use brevis_format::archive::{chunk_checksum, ChunkRecord};
use brevis_format::ops::interleave;
use brevis_format::program::{self, Limits, Node, Type};
use brevis_format::stream::{LeBytes, Stream, Words};
use brevis_format::{wire, with_words, with_words_mut, FormatError, Result};

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

/// [`decode_chunk_bytes`] of a whole chunk record (kind, length, body and
/// checksum), whose checksum is checked first. What a [`crate::PendingChunk`]
/// started by [`crate::StreamDecoder::next_event_ahead`] must give: the check is
/// then made where the chunk decodes (another thread, say), not where the
/// archive is read.
pub fn decode_chunk_record(record: &[u8], limits: &Limits) -> Result<LeBytes> {
    let (_, body) = brevis_format::archive::open_record(record)?;
    decode_chunk_bytes(body, limits)
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
    let computed = chunk_checksum(&bytes);
    if computed != decoded_xxh3 {
        return Err(FormatError::Checksum {
            what: "decoded chunk",
            stored: decoded_xxh3,
            computed,
        });
    }
    Ok(bytes)
}

/// [`decode_chunk_bytes`] as a vector (a copy unless the root's words are bytes).
pub fn decode_chunk(body: &[u8], limits: &Limits) -> Result<Vec<u8>> {
    decode_chunk_bytes(body, limits).map(LeBytes::into_vec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use brevis_format::archive::chunk_checksum;
    use brevis_format::program::parse;

    /// A chunk body declaring `out`, with `program`.
    fn chunk(out: &[u8], program: &[u8]) -> Vec<u8> {
        ChunkRecord::body(out.len() as u64, chunk_checksum(out), 8, program)
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
