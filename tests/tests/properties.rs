//! Property tests: random programs built from the seven operators execute to
//! what an independent, naive reference evaluator says, serialize to exactly
//! `serialized_size` bytes, and parse back to the same program with the same output.

use brevis_decoder::exec::eval;
use brevis_format::ops::{MapOp, MergeOp, ScanOp};
use brevis_format::program::{parse, serialize, serialized_size, Limits, Node};
use brevis_format::stream::{mask, Stream};
use brevis_format::wire::LitEncoding;
use proptest::prelude::*;

/// The reference semantics, on plain `u64` vectors, written independently of the decoder.
fn reference(node: &Node) -> Vec<u64> {
    match node {
        Node::Lit {
            width,
            count,
            encoding,
            payload,
        } => {
            // Literals are checked against the words they were built from (see `gen`);
            // here we trust the wire decoder, which has its own round-trip tests.
            brevis_format::wire::decode(*encoding, *width, *count as usize, payload)
                .unwrap()
                .to_u64s()
        }
        Node::Const { count, value, .. } => vec![*value; *count as usize],
        Node::Concat(c) => c.iter().flat_map(reference).collect(),
        Node::Repeat { times, child } => {
            let c = reference(child);
            (0..*times).flat_map(|_| c.clone()).collect()
        }
        Node::Map { op, child } => {
            let w = width_of(child);
            let m = mask(w);
            reference(child)
                .into_iter()
                .map(|x| match *op {
                    MapOp::XorConst(c) => x ^ c,
                    MapOp::AddConst(c) => x.wrapping_add(c) & m,
                    MapOp::ZigZag => {
                        // Decode: even -> x/2, odd -> -(x+1)/2, in w-bit two's complement.
                        if x % 2 == 0 {
                            x / 2
                        } else {
                            (0u64.wrapping_sub(x / 2 + 1)) & m
                        }
                    }
                    MapOp::Gray => {
                        let mut out = 0;
                        let mut bit = 0;
                        for i in (0..w).rev() {
                            bit ^= (x >> i) & 1;
                            out |= bit << i;
                        }
                        out
                    }
                    MapOp::RotateLeft(r) => ((x << r) | (x >> (w - r))) & m,
                    MapOp::BitReverse => (0..w).fold(0, |acc, i| acc | (((x >> i) & 1) << (w - 1 - i))),
                })
                .collect()
        }
        Node::Scan { op, stride, child } => {
            let m = mask(width_of(child));
            let mut v = reference(child);
            let s = *stride as usize;
            for i in s..v.len() {
                v[i] = match op {
                    ScanOp::Xor => v[i] ^ v[i - s],
                    ScanOp::Add => v[i].wrapping_add(v[i - s]) & m,
                };
            }
            v
        }
        Node::Interleave(children) => {
            let parts: Vec<Vec<u64>> = children.iter().map(reference).collect();
            let n = parts[0].len();
            (0..n * parts.len())
                .map(|i| parts[i % parts.len()][i / parts.len()])
                .collect()
        }
        Node::Merge { op, children } => {
            let widths = op.field_widths();
            let parts: Vec<Vec<u64>> = children.iter().map(reference).collect();
            let n = parts[0].len();
            (0..n)
                .map(|i| {
                    parts
                        .iter()
                        .zip(&widths)
                        .fold(0u64, |acc, (p, &w)| if w == 64 { p[i] } else { (acc << w) | p[i] })
                })
                .collect()
        }
    }
}

fn width_of(node: &Node) -> u8 {
    node.ty().unwrap().width
}

/// A strategy for programs of type `width[count]`, at most `depth` deep.
fn gen(width: u8, count: u64, depth: u32) -> BoxedStrategy<Node> {
    let lit = (proptest::collection::vec(any::<u64>(), count as usize), 0usize..4).prop_map(move |(words, e)| {
        let words: Vec<u64> = words
            .into_iter()
            .map(|w| w & mask(width) & if e == 1 { 0xff } else { u64::MAX })
            .collect();
        let s = Stream::from_u64s(width, &words).unwrap();
        let enc = [
            LitEncoding::Raw,
            LitEncoding::BitPacked,
            LitEncoding::Huffman,
            LitEncoding::Rans,
        ][e];
        let payload = brevis_format::wire::encode(enc, &s)
            .or_else(|| brevis_format::wire::encode(LitEncoding::Raw, &s))
            .unwrap();
        let encoding = if brevis_format::wire::encode(enc, &s).is_some() {
            enc
        } else {
            LitEncoding::Raw
        };
        Node::Lit {
            width,
            count,
            encoding,
            payload,
        }
    });
    if depth == 0 {
        return lit.boxed();
    }
    let mut options: Vec<BoxedStrategy<Node>> = vec![lit.boxed()];
    if count > 0 {
        options.push(
            any::<u64>()
                .prop_map(move |v| Node::Const {
                    width,
                    count,
                    value: v & mask(width),
                })
                .boxed(),
        );
        let split = (0..=count).prop_flat_map(move |k| {
            (gen(width, k, depth - 1), gen(width, count - k, depth - 1)).prop_map(|(a, b)| Node::Concat(vec![a, b]))
        });
        options.push(split.boxed());
        options.push(
            (1..=count + 1, any::<bool>(), gen(width, count, depth - 1))
                .prop_map(|(stride, xor, c)| Node::Scan {
                    op: if xor { ScanOp::Xor } else { ScanOp::Add },
                    stride,
                    child: Box::new(c),
                })
                .boxed(),
        );
    }
    if let Some(times) = (2..=4).find(|t| count > 0 && count.is_multiple_of(*t)) {
        options.push(
            gen(width, count / times, depth - 1)
                .prop_map(move |c| Node::Repeat {
                    times,
                    child: Box::new(c),
                })
                .boxed(),
        );
    }
    if let Some(k) = (2..=3u64).find(|k| count > 0 && count.is_multiple_of(*k)) {
        let cols: Vec<BoxedStrategy<Node>> = (0..k).map(|_| gen(width, count / k, depth - 1)).collect();
        options.push(cols.prop_map(Node::Interleave).boxed());
    }
    let maps: Vec<MapOp> = {
        let mut v = vec![MapOp::XorConst(mask(width).max(1)), MapOp::AddConst(1)];
        if width >= 2 {
            v.extend([
                MapOp::ZigZag,
                MapOp::Gray,
                MapOp::BitReverse,
                MapOp::RotateLeft(width - 1),
            ]);
        }
        v
    };
    options.push(
        (proptest::sample::select(maps), gen(width, count, depth - 1))
            .prop_map(|(op, c)| Node::Map { op, child: Box::new(c) })
            .boxed(),
    );
    if width >= 2 {
        let merges: Vec<MergeOp> = {
            let mut v = vec![MergeOp::Fields(vec![1, width - 1])];
            if width <= 8 {
                v.push(MergeOp::BitPlanes(width));
            }
            if width.is_multiple_of(8) && width >= 16 {
                v.push(MergeOp::BytePlanes(width / 8));
            }
            if width >= 3 {
                v.push(MergeOp::Fields(vec![width / 3, width / 3, width - 2 * (width / 3)]));
            }
            v
        };
        options.push(
            proptest::sample::select(merges)
                .prop_flat_map(move |op| {
                    let children: Vec<BoxedStrategy<Node>> =
                        op.field_widths().iter().map(|&w| gen(w, count, depth - 1)).collect();
                    children.prop_map(move |c| Node::Merge {
                        op: op.clone(),
                        children: c,
                    })
                })
                .boxed(),
        );
    }
    proptest::strategy::Union::new(options).boxed()
}

fn program() -> impl Strategy<Value = Node> {
    (
        proptest::sample::select(vec![1u8, 3, 7, 8, 12, 16, 24, 32, 33, 64]),
        0u64..40,
    )
        .prop_flat_map(|(w, n)| gen(w, n, 3))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn programs_execute_serialize_and_parse_back(p in program()) {
        let ty = p.ty().unwrap();
        let out = eval(&p).unwrap();
        prop_assert_eq!(out.width(), ty.width);
        prop_assert_eq!(out.len() as u64, ty.count);
        prop_assert_eq!(out.to_u64s(), reference(&p));

        let bytes = serialize(&p);
        prop_assert_eq!(bytes.len(), serialized_size(&p));
        let back = parse(&bytes, &Limits::default()).unwrap();
        prop_assert_eq!(&back, &p);
        prop_assert_eq!(eval(&back).unwrap(), out);
    }

    #[test]
    fn parsing_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(p) = parse(&bytes, &Limits::default()) {
            // Whatever parses is canonical and runs within its declared type.
            prop_assert_eq!(serialize(&p), bytes);
            if p.ty().unwrap().count <= 1 << 16 {
                let _ = eval(&p);
            }
        }
    }
}
