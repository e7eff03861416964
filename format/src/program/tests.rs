use alloc::boxed::Box;
use alloc::string::ToString;
use alloc::vec;

use super::*;

fn lit(width: u8, count: u64) -> Node {
    Node::Lit {
        width,
        count,
        encoding: LitEncoding::Raw,
        payload: vec![0; (count as usize) * usize::from(width).div_ceil(8)],
    }
}

#[test]
fn typing_of_each_operator() {
    let merge = Node::Merge {
        op: MergeOp::Fields(vec![1, 8, 7]),
        children: vec![lit(1, 4), lit(8, 4), lit(7, 4)],
    };
    assert_eq!(merge.ty().unwrap(), Type { width: 16, count: 4 });
    let concat = Node::Concat(vec![
        merge.clone(),
        Node::Const {
            width: 16,
            count: 3,
            value: 7,
        },
    ]);
    assert_eq!(concat.ty().unwrap(), Type { width: 16, count: 7 });
    let rep = Node::Repeat {
        times: 3,
        child: Box::new(concat),
    };
    assert_eq!(rep.ty().unwrap(), Type { width: 16, count: 21 });
    let scan = Node::Scan {
        op: ScanOp::Add,
        stride: 2,
        child: Box::new(rep),
    };
    let map = Node::Map {
        op: MapOp::RotateLeft(1),
        child: Box::new(scan),
    };
    assert_eq!(map.ty().unwrap(), Type { width: 16, count: 21 });
}

#[test]
fn typing_rejects_mismatches() {
    let bad_merge = Node::Merge {
        op: MergeOp::Fields(vec![1, 8, 7]),
        children: vec![lit(1, 4), lit(8, 5), lit(7, 4)],
    };
    assert!(matches!(bad_merge.ty(), Err(FormatError::Type { op: "Merge", .. })));
    let bad_concat = Node::Concat(vec![lit(8, 1), lit(16, 1)]);
    assert!(matches!(bad_concat.ty(), Err(FormatError::Type { op: "Concat", .. })));
    let bad_const: Node = Node::Const {
        width: 4,
        count: 1,
        value: 16,
    };
    assert!(matches!(bad_const.ty(), Err(FormatError::Type { op: "Const", .. })));
    let bad_repeat = Node::Repeat {
        times: 1,
        child: Box::new(lit(8, 1)),
    };
    assert!(matches!(bad_repeat.ty(), Err(FormatError::Type { op: "Repeat", .. })));
    let huff_wide: Node = Node::Lit {
        width: 17,
        count: 0,
        encoding: LitEncoding::Huffman,
        payload: vec![],
    };
    assert!(matches!(huff_wide.ty(), Err(FormatError::Type { op: "Lit", .. })));
}

#[test]
fn serialize_parse_round_trip_and_size() {
    let p = Node::Map {
        op: MapOp::XorConst(0x8000),
        child: Box::new(Node::Merge {
            op: MergeOp::BytePlanes(2),
            children: vec![
                Node::Const {
                    width: 8,
                    count: 300,
                    value: 0x3f,
                },
                lit(8, 300),
            ],
        }),
    };
    let b = serialize(&p);
    assert_eq!(b.len(), serialized_size(&p));
    assert_eq!(parse(&b, &Limits::default()).unwrap(), p);
    // Borrowed payloads: the same tree, each payload a slice of `b` itself, and
    // the same bytes and text.
    let borrowed = parse_borrowed(&b, &Limits::default()).unwrap();
    let Node::Map { child, .. } = &borrowed else {
        panic!("{borrowed:?}")
    };
    let Node::Lit { payload, .. } = &child.children()[1] else {
        panic!("{child:?}")
    };
    assert!(
        b.as_ptr_range().contains(&payload.as_ptr()),
        "a copy, not a slice of the program"
    );
    assert_eq!(serialize(&borrowed), b);
    assert_eq!(borrowed.to_string(), p.to_string());
    assert_eq!(
        p.to_string(),
        "Map.xor[0x8000](Merge.bytes(Const<b8×300>(0x3f), Lit.raw<b8×300>(300 B)))"
    );
}

#[test]
fn parse_rejects_every_truncation_and_trailing_bytes() {
    let p = Node::Scan {
        op: ScanOp::Xor,
        stride: 1,
        child: Box::new(lit(8, 10)),
    };
    let b = serialize(&p);
    for n in 0..b.len() {
        assert!(parse(&b[..n], &Limits::default()).is_err(), "prefix {n}");
        assert!(parse_borrowed(&b[..n], &Limits::default()).is_err(), "prefix {n}");
    }
    let mut extra = b.clone();
    extra.push(0);
    assert!(matches!(
        parse(&extra, &Limits::default()),
        Err(FormatError::TrailingBytes { .. })
    ));
}

#[test]
fn parse_caps_depth_and_nodes() {
    // 100 nested Maps: deeper than the default limit of 32.
    let mut b = vec![];
    for _ in 0..100 {
        b.extend_from_slice(&[4, 2]);
    }
    b.extend_from_slice(&serialize(&lit(8, 1)));
    assert!(matches!(
        parse(&b, &Limits::default()),
        Err(FormatError::LimitExceeded {
            limit: "program depth",
            ..
        })
    ));
    // A Concat claiming 2^40 children is refused before any allocation.
    let mut c = vec![2];
    crate::bytes::put_varint(&mut c, 1 << 40);
    assert!(matches!(
        parse(&c, &Limits::default()),
        Err(FormatError::LimitExceeded {
            limit: "Concat children",
            ..
        })
    ));
}

#[test]
fn check_bounds_working_memory() {
    // A Repeat of a huge Const is fine (output-sized) but a Merge of 64 bit planes
    // of a large stream needs 9x the output: within the default factor of 16.
    let planes: Vec<Node> = (0..64)
        .map(|_| Node::Const {
            width: 1,
            count: 1 << 20,
            value: 1,
        })
        .collect();
    let m = Node::Merge {
        op: MergeOp::BitPlanes(64),
        children: planes,
    };
    let c = m.check(&Limits::default()).unwrap();
    assert_eq!(
        c.ty,
        Type {
            width: 64,
            count: 1 << 20
        }
    );
    let tight = Limits {
        max_work_factor: 2,
        work_slack_bytes: 0,
        ..Limits::default()
    };
    assert!(matches!(
        m.check(&tight),
        Err(FormatError::LimitExceeded {
            limit: "program working memory",
            ..
        })
    ));
}
