//! PyTorch checkpoints in the zip format (`torch.save` since 1.6, TorchScript
//! `.jit`/`.pt`): a zip archive, usually with every entry *stored*
//! (uncompressed), holding `PREFIX/data.pkl` (a pickle of the object tree) and
//! one entry `PREFIX/data/KEY` per storage with the storage's raw bytes.
//!
//! Every stored `…/data/KEY` (and `…/constants/KEY`, TorchScript's) entry
//! becomes a segment over exactly its bytes; local headers, the pickle,
//! compressed entries and the central directory stay opaque. A storage's dtype
//! comes from the pickle's persistent ids — `('storage', torch.FloatStorage,
//! 'KEY', 'cpu', numel)` — read by [`storage_dtypes`], a small pickle reader
//! that tracks strings, ints, globals and tuples on a stack and **never
//! executes anything**. A storage whose dtype is not found stays an opaque
//! segment, viewed per chunk as usual.
//!
//! The zip structure is read by hand (below, about eighty lines, with zip64
//! sizes and offsets) rather than with the `zip` crate: we need the byte
//! range of each entry's data inside the file, and only stored entries
//! matter. Reference: PKWARE APPNOTE.TXT sections 4.3.7 (local header),
//! 4.3.12 (central directory), 4.3.14–16 (zip64 and end records).
//!
//! Legacy (pre-1.6, non-zip) files, five pickles followed by the storages'
//! bytes, are read by [`plan_legacy`] with the same pickle reader.

use std::collections::HashMap;
use std::ops::Range;
use std::rc::Rc;

use anyhow::{bail, ensure, Context, Result};
use brevis_format::DType;

use super::{Cursor, Layout, SegmentPlan};

/// An entry of the central directory.
struct Entry {
    name: String,
    /// 0 = stored, 8 = deflate, …
    method: u16,
    /// Where its data is in the file.
    data: Range<usize>,
}

fn u16_at(d: &[u8], at: usize) -> Result<u16> {
    let b = d.get(at..at + 2).context("zip truncated")?;
    Ok(u16::from_le_bytes([b[0], b[1]]))
}

fn u32_at(d: &[u8], at: usize) -> Result<u32> {
    let b = d.get(at..at + 4).context("zip truncated")?;
    Ok(u32::from_le_bytes(b.try_into().expect("4 bytes")))
}

fn u64_at(d: &[u8], at: usize) -> Result<u64> {
    let b = d.get(at..at + 8).context("zip truncated")?;
    Ok(u64::from_le_bytes(b.try_into().expect("8 bytes")))
}

fn usize_of(v: u64) -> Result<usize> {
    usize::try_from(v).context("zip offset overflows")
}

/// Reads the central directory (zip64 aware) and every entry's data range.
fn entries(d: &[u8]) -> Result<Vec<Entry>> {
    ensure!(d.starts_with(b"PK\x03\x04"), "not a zip file");
    // End of central directory: the last `PK\5\6` within 64 KiB + 22 of the end.
    let min = d.len().saturating_sub(22 + 0xffff);
    let eocd = (min..d.len().saturating_sub(21))
        .rev()
        .find(|&i| d[i..i + 4] == *b"PK\x05\x06")
        .context("zip end of central directory not found")?;
    let mut count = u64::from(u16_at(d, eocd + 10)?);
    let mut cd_size = u64::from(u32_at(d, eocd + 12)?);
    let mut cd_start = u64::from(u32_at(d, eocd + 16)?);
    if (count == 0xffff || cd_size == 0xffff_ffff || cd_start == 0xffff_ffff) && eocd >= 20 {
        // The zip64 locator sits just before the end record and points at the zip64 end record.
        let loc = eocd - 20;
        if u32_at(d, loc)? == 0x0706_4b50 {
            let rec = usize_of(u64_at(d, loc + 8)?)?;
            ensure!(u32_at(d, rec)? == 0x0606_4b50, "bad zip64 end record");
            count = u64_at(d, rec + 32)?;
            cd_size = u64_at(d, rec + 40)?;
            cd_start = u64_at(d, rec + 48)?;
        }
    }
    let cd = usize_of(cd_start)?..usize_of(cd_start.checked_add(cd_size).context("zip overflows")?)?;
    ensure!(cd.end <= d.len(), "zip central directory runs past the file");
    ensure!(
        count <= cd.len() as u64 / 46,
        "zip claims more entries than its directory holds"
    );
    let mut out = Vec::with_capacity(count as usize);
    let mut at = cd.start;
    for _ in 0..count {
        ensure!(
            u32_at(d, at)? == 0x0201_4b50,
            "bad zip central directory entry at byte {at}"
        );
        let method = u16_at(d, at + 10)?;
        let mut csize = u64::from(u32_at(d, at + 20)?);
        let mut usize_ = u64::from(u32_at(d, at + 24)?);
        let (n, m, k) = (
            usize::from(u16_at(d, at + 28)?),
            usize::from(u16_at(d, at + 30)?),
            usize::from(u16_at(d, at + 32)?),
        );
        let mut local = u64::from(u32_at(d, at + 42)?);
        let name = d.get(at + 46..at + 46 + n).context("zip truncated")?;
        let name = String::from_utf8_lossy(name).into_owned();
        // Zip64 extra field: the 0xffffffff fields, in order usize, csize, offset.
        let extra = d.get(at + 46 + n..at + 46 + n + m).context("zip truncated")?;
        let mut e = 0;
        while e + 4 <= extra.len() {
            let (id, len) = (u16_at(extra, e)?, usize::from(u16_at(extra, e + 2)?));
            if id == 1 {
                let mut f = e + 4;
                for v in [&mut usize_, &mut csize, &mut local] {
                    if *v == 0xffff_ffff {
                        *v = u64_at(extra, f)?;
                        f += 8;
                    }
                }
            }
            e += 4 + len;
        }
        at += 46 + n + m + k;
        ensure!(at <= cd.end, "zip central directory entry runs past the directory");
        // The local header: fixed 30 bytes, then its own name and extra lengths.
        let lh = usize_of(local)?;
        ensure!(u32_at(d, lh)? == 0x0403_4b50, "bad zip local header for `{name}`");
        let start = lh + 30 + usize::from(u16_at(d, lh + 26)?) + usize::from(u16_at(d, lh + 28)?);
        let end = start.checked_add(usize_of(csize)?).context("zip overflows")?;
        ensure!(end <= d.len(), "zip entry `{name}` runs past the file");
        ensure!(method != 0 || csize == usize_, "stored zip entry `{name}` changes size");
        out.push(Entry {
            name,
            method,
            data: start..end,
        });
    }
    Ok(out)
}

/// Our dtype for a torch storage class name.
fn storage_dtype(class: &str) -> Option<DType> {
    Some(match class {
        "FloatStorage" => DType::F32,
        "DoubleStorage" => DType::F64,
        "HalfStorage" => DType::F16,
        "BFloat16Storage" => DType::BF16,
        "LongStorage" => DType::I64,
        "IntStorage" => DType::I32,
        "ShortStorage" => DType::I16,
        "CharStorage" => DType::I8,
        "ByteStorage" => DType::U8,
        "BoolStorage" => DType::Bool,
        "UInt16Storage" => DType::U16,
        "UInt32Storage" => DType::U32,
        "UInt64Storage" => DType::U64,
        "Float8_e4m3fnStorage" => DType::F8E4M3,
        "Float8_e5m2Storage" => DType::F8E5M2,
        _ => return None,
    })
}

/// What the pickle reader keeps of a value.
#[derive(Debug)]
enum Value {
    Mark,
    Str(String),
    Int(i64),
    Global(String, String),
    Tuple(Vec<Rc<Value>>),
    Other,
}

/// The dtype of each storage key named by a persistent id in the pickle
/// `p`. Reads protocol 0–5 opcodes, keeps a stack and a memo of the values
/// above, and runs nothing: `GLOBAL` only records a name, `REDUCE`, `BUILD`
/// and the like only pop their arguments. An opcode it does not know ends the
/// scan with an error (the caller then keeps the storages opaque).
/// The element count recorded beside each dtype, where it is an int, lets
/// the caller check the storage's length.
pub fn storage_dtypes(p: &[u8]) -> Result<StorageDtypes> {
    read_pickle(p).map(|(dtypes, _)| dtypes)
}

/// Each storage key's dtype and, where the persistent id gives it as an int,
/// element count.
pub type StorageDtypes = HashMap<String, (DType, Option<u64>)>;

/// [`storage_dtypes`] of the pickle at the start of `p`, and its length (to
/// just past its `STOP`).
fn read_pickle(p: &[u8]) -> Result<(StorageDtypes, usize)> {
    use Value::*;
    let mut out = HashMap::new();
    let mut stack: Vec<Rc<Value>> = Vec::new();
    let mut memo: HashMap<u64, Rc<Value>> = HashMap::new();
    let mut at = 0usize;
    let take = |at: &mut usize, n: u64| -> Result<&[u8]> {
        let n = usize::try_from(n).context("pickle length overflows")?;
        let end = at
            .checked_add(n)
            .filter(|&e| e <= p.len())
            .context("pickle truncated")?;
        let s = &p[*at..end];
        *at = end;
        Ok(s)
    };
    let line = |at: &mut usize| -> Result<String> {
        let len = p[*at..].iter().position(|&b| b == b'\n').context("pickle truncated")?;
        let s = String::from_utf8_lossy(&p[*at..*at + len]).into_owned();
        *at += len + 1;
        Ok(s)
    };
    let le = |b: &[u8]| b.iter().rev().fold(0u64, |a, &x| a << 8 | u64::from(x));
    let pop_mark = |stack: &mut Vec<Rc<Value>>| -> Result<Vec<Rc<Value>>> {
        let m = stack
            .iter()
            .rposition(|v| matches!(**v, Mark))
            .context("pickle: no mark")?;
        let items = stack.split_off(m + 1);
        stack.pop();
        Ok(items)
    };
    let pop = |stack: &mut Vec<Rc<Value>>, n: usize| -> Result<Vec<Rc<Value>>> {
        ensure!(stack.len() >= n, "pickle stack underflow");
        Ok(stack.split_off(stack.len() - n))
    };
    loop {
        let op = *p.get(at).context("pickle ends without STOP")?;
        at += 1;
        let push = match op {
            b'.' => break,
            0x80 => {
                take(&mut at, 1)?; // PROTO
                None
            }
            0x95 => {
                take(&mut at, 8)?; // FRAME
                None
            }
            b'(' => Some(Mark),
            b')' => Some(Tuple(Vec::new())),
            b'}' | b']' | 0x8f | b'N' | 0x88 | 0x89 => Some(Other),
            b'0' => {
                pop(&mut stack, 1)?;
                None
            }
            b'1' => {
                pop_mark(&mut stack)?;
                None
            }
            b'2' => {
                let top = stack.last().context("pickle stack underflow")?.clone();
                stack.push(top);
                None
            }
            b'J' => Some(Int(le(take(&mut at, 4)?) as u32 as i32 as i64)),
            b'K' => Some(Int(le(take(&mut at, 1)?) as i64)),
            b'M' => Some(Int(le(take(&mut at, 2)?) as i64)),
            0x8a => {
                let n = le(take(&mut at, 1)?);
                let b = take(&mut at, n)?;
                Some(if n <= 8 { Int(le(b) as i64) } else { Other })
            }
            0x8b => {
                let n = le(take(&mut at, 4)?);
                take(&mut at, n)?;
                Some(Other)
            }
            b'G' => {
                take(&mut at, 8)?;
                Some(Other)
            }
            b'I' | b'L' => Some(line(&mut at)?.trim_end_matches('L').parse().map(Int).unwrap_or(Other)),
            b'F' | b'S' => {
                line(&mut at)?;
                Some(Other)
            }
            b'V' => Some(Str(line(&mut at)?)),
            b'X' | b'T' | b'B' => {
                let n = le(take(&mut at, 4)?);
                let s = take(&mut at, n)?;
                Some(Str(String::from_utf8_lossy(s).into_owned()))
            }
            0x8c | b'U' | b'C' => {
                let n = le(take(&mut at, 1)?);
                let s = take(&mut at, n)?;
                Some(Str(String::from_utf8_lossy(s).into_owned()))
            }
            0x8d | 0x8e | 0x96 => {
                let n = le(take(&mut at, 8)?);
                let s = take(&mut at, n)?;
                Some(Str(String::from_utf8_lossy(s).into_owned()))
            }
            b'c' => {
                let module = line(&mut at)?;
                Some(Global(module, line(&mut at)?))
            }
            0x93 => {
                let v = pop(&mut stack, 2)?;
                match (&*v[0], &*v[1]) {
                    (Str(m), Str(n)) => Some(Global(m.clone(), n.clone())),
                    _ => Some(Other),
                }
            }
            b'i' => {
                line(&mut at)?;
                line(&mut at)?;
                pop_mark(&mut stack)?;
                Some(Other)
            }
            b't' => Some(Tuple(pop_mark(&mut stack)?)),
            0x85 => Some(Tuple(pop(&mut stack, 1)?)),
            0x86 => Some(Tuple(pop(&mut stack, 2)?)),
            0x87 => Some(Tuple(pop(&mut stack, 3)?)),
            b'd' | b'l' | b'o' | 0x91 => {
                pop_mark(&mut stack)?;
                Some(Other)
            }
            b'a' | b'b' => {
                pop(&mut stack, 1)?;
                None
            }
            b's' => {
                pop(&mut stack, 2)?;
                None
            }
            b'e' | b'u' | 0x90 => {
                pop_mark(&mut stack)?;
                None
            }
            b'R' | 0x81 => {
                pop(&mut stack, 2)?;
                Some(Other)
            }
            0x92 => {
                pop(&mut stack, 3)?;
                Some(Other)
            }
            0x97 => Some(Other),
            0x98 => None,
            0x82 => {
                take(&mut at, 1)?;
                Some(Other)
            }
            0x83 => {
                take(&mut at, 2)?;
                Some(Other)
            }
            0x84 => {
                take(&mut at, 4)?;
                Some(Other)
            }
            b'p' | b'q' | b'r' | 0x94 => {
                let key = match op {
                    b'p' => line(&mut at)?.parse().unwrap_or(u64::MAX),
                    b'q' => le(take(&mut at, 1)?),
                    b'r' => le(take(&mut at, 4)?),
                    _ => memo.len() as u64,
                };
                let top = stack.last().context("pickle stack underflow")?.clone();
                memo.insert(key, top);
                None
            }
            b'g' | b'h' | b'j' => {
                let key = match op {
                    b'g' => line(&mut at)?.parse().unwrap_or(u64::MAX),
                    b'h' => le(take(&mut at, 1)?),
                    _ => le(take(&mut at, 4)?),
                };
                stack.push(memo.get(&key).context("pickle: memo key missing")?.clone());
                None
            }
            b'P' | b'Q' => {
                let pid = if op == b'P' {
                    Rc::new(Str(line(&mut at)?))
                } else {
                    stack.pop().context("pickle stack underflow")?
                };
                // ('storage', torch.XStorage, key, location, numel)
                if let Tuple(t) = &*pid {
                    if let [tag, class, key, ..] = &t[..] {
                        if let (Str(tag), Global(module, class), Str(key)) = (&**tag, &**class, &**key) {
                            if tag == "storage" && module == "torch" {
                                if let Some(dtype) = storage_dtype(class) {
                                    let numel = match t.get(4).map(|v| &**v) {
                                        Some(Int(n)) => u64::try_from(*n).ok(),
                                        _ => None,
                                    };
                                    out.insert(key.clone(), (dtype, numel));
                                }
                            }
                        }
                    }
                }
                Some(Other)
            }
            other => bail!("unknown pickle opcode 0x{other:02x} at byte {}", at - 1),
        };
        if let Some(v) = push {
            stack.push(Rc::new(v));
        }
    }
    Ok((out, at))
}

/// The first pickle of a legacy (pre-1.6, non-zip) `torch.save` file: protocol
/// 2, the magic number `0x1950a86a20f9469cfc6c` as a `LONG1`, `STOP`.
const LEGACY_MAGIC: &[u8] = b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19\x2e";

/// Whether `d` starts as a legacy (pre-1.6, non-zip) `torch.save` file does.
pub fn is_legacy(d: &[u8]) -> bool {
    d.starts_with(LEGACY_MAGIC)
}

/// The strings of the list pickled at the start of `p` (the storage keys of a
/// legacy checkpoint), and the pickle's length. Only what pickles a list of
/// strings is accepted: `PROTO`, `EMPTY_LIST`, `MARK`, memo puts, string
/// opcodes, `APPEND`/`APPENDS`, `STOP`.
fn string_list(p: &[u8]) -> Result<(Vec<String>, usize)> {
    let mut out = Vec::new();
    let mut c = Cursor::new(p, "pickle");
    loop {
        let op = c.u8()?;
        match op {
            b'.' => return Ok((out, c.pos())),
            0x80 | b'q' => {
                c.u8()?;
            }
            b'r' => {
                c.u32()?;
            }
            b']' | b'(' | b'a' | b'e' | 0x94 => {}
            b'X' | 0x8c => {
                let n = if op == b'X' { c.u32()? } else { u32::from(c.u8()?) };
                out.push(String::from_utf8_lossy(c.take(u64::from(n))?).into_owned());
            }
            other => bail!(
                "unexpected opcode 0x{other:02x} in the storage key list at byte {}",
                c.pos() - 1
            ),
        }
    }
}

/// Segments of a legacy (pre-1.6, non-zip) `torch.save` file: five pickles
/// (the magic number, the protocol version, system information, the object
/// with a persistent id per storage, the list of storage keys), then each
/// storage in that list's order as its element count (`u64`, little-endian)
/// and its raw bytes (`torch/serialization.py`, `_legacy_save`). The pickles
/// and counts stay opaque; each storage becomes a tensor of its dtype (from
/// its persistent id, [`storage_dtypes`]). Fails, and the file stays plain, on
/// anything else: a storage whose dtype or count is unknown, or one that runs
/// past the file.
pub fn plan_legacy(d: &[u8]) -> Result<Vec<SegmentPlan>> {
    ensure!(is_legacy(d), "not a legacy torch.save file");
    let mut at = LEGACY_MAGIC.len();
    // The protocol version and the system information, then the object.
    for _ in 0..2 {
        at += read_pickle(&d[at..])?.1;
    }
    let (dtypes, len) = read_pickle(&d[at..])?;
    at += len;
    let (keys, len) = string_list(&d[at..])?;
    at += len;
    ensure!(!keys.is_empty(), "no storages");
    let mut plans = vec![SegmentPlan::opaque("pickle", 0..at)];
    let mut c = Cursor::new(d, "legacy torch.save file");
    c.take(at as u64)?;
    for key in keys {
        let &(dtype, numel) = dtypes
            .get(&key)
            .with_context(|| format!("storage `{key}` has no known dtype"))?;
        let count_at = c.pos();
        let count = c.u64()?;
        ensure!(
            numel.is_none_or(|n| n == count),
            "storage `{key}`: {count} elements stored, {numel:?} in the pickle"
        );
        let start = c.pos();
        c.take(
            count
                .checked_mul(dtype.size() as u64)
                .context("storage size overflows")?,
        )?;
        plans.push(SegmentPlan::opaque("storage size", count_at..start));
        if c.pos() > start {
            plans.push(SegmentPlan::tensor(
                format!("data/{key}"),
                dtype,
                vec![count],
                start..c.pos(),
            ));
        }
    }
    let at = c.pos();
    if at < d.len() {
        plans.push(SegmentPlan::opaque("trailing bytes", at..d.len()));
    }
    Ok(plans)
}

/// Segments of a zip-format PyTorch checkpoint (see the module docs). Fails
/// when the file is not a zip or holds no stored storage entries.
pub fn plan(d: &[u8]) -> Result<Vec<SegmentPlan>> {
    let entries = entries(d)?;
    // Dtypes by storage entry name, from every stored pickle: `DIR/data.pkl`
    // names storages `DIR/data/KEY`, `DIR/constants.pkl` `DIR/constants/KEY`.
    let mut dtypes = HashMap::new();
    for e in entries.iter().filter(|e| e.method == 0 && e.name.ends_with(".pkl")) {
        let dir = e.name.trim_end_matches(".pkl");
        if let Ok(map) = storage_dtypes(&d[e.data.clone()]) {
            dtypes.extend(map.into_iter().map(|(k, v)| (format!("{dir}/{k}"), v)));
        }
    }
    let mut storages: Vec<SegmentPlan> = entries
        .into_iter()
        .filter(|e| e.method == 0 && !e.data.is_empty())
        .filter(|e| {
            let mut parts = e.name.rsplit('/');
            let (_key, parent) = (parts.next(), parts.next());
            matches!(parent, Some("data" | "constants"))
        })
        .map(|e| {
            let len = e.data.len() as u64;
            match dtypes.get(&e.name) {
                Some(&(dtype, numel)) if numel.unwrap_or(len / dtype.size() as u64) * dtype.size() as u64 == len => {
                    SegmentPlan::tensor(e.name, dtype, vec![len / dtype.size() as u64], e.data)
                }
                // The pickle's element count disagrees with the bytes: keep
                // them opaque, but viewed as words of the dtype's width.
                Some(&(dtype, _)) if matches!(dtype.bits(), 16 | 32 | 64) => SegmentPlan {
                    layout: Layout::Words(dtype.bits()),
                    ..SegmentPlan::opaque(e.name, e.data)
                },
                _ => SegmentPlan::opaque(e.name, e.data),
            }
        })
        .collect();
    ensure!(!storages.is_empty(), "no stored tensor data in the zip");
    storages.sort_by_key(|s| s.range.start);
    let mut plans = Vec::with_capacity(storages.len() * 2 + 1);
    let mut at = 0;
    for s in storages {
        ensure!(s.range.start >= at, "zip entry `{}` overlaps another", s.name);
        if s.range.start > at {
            plans.push(SegmentPlan::opaque("zip", at..s.range.start));
        }
        at = s.range.end;
        plans.push(s);
    }
    if at < d.len() {
        plans.push(SegmentPlan::opaque("zip", at..d.len()));
    }
    Ok(plans)
}

#[cfg(test)]
mod tests {
    use super::*;
    use brevis_format::archive::SegmentKind;

    /// A stored zip of `entries` (name, bytes) with 64-byte aligned data, as
    /// `torch.save` writes it (padding in the local header's extra field).
    pub fn zip(entries: &[(&str, &[u8])]) -> Vec<u8> {
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
    pub fn pickle(storages: &[(&str, &str, &str, u8)]) -> Vec<u8> {
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
            p.extend_from_slice(&[b'K', *n, b't', b'Q', b'K', 0, b'K', *n, 0x85, b')', 0x89]);
            p.extend_from_slice(b"ccollections\nOrderedDict\n)Rt");
            p.push(b'R');
        }
        p.extend_from_slice(b"u.");
        p
    }

    fn covers_exactly(plans: &[SegmentPlan], len: usize) {
        let mut at = 0;
        for p in plans {
            assert_eq!(p.range.start, at, "{}", p.name);
            at = p.range.end;
        }
        assert_eq!(at, len);
    }

    #[test]
    fn storages_become_tensors_with_their_dtypes() {
        let w: Vec<u8> = (0..24u32).flat_map(|i| (i as f32).to_le_bytes()).collect();
        let h: Vec<u8> = (0..6u16).flat_map(|i| i.to_le_bytes()).collect();
        let v: Vec<u8> = (0..8u32).flat_map(|i| (i as f32).to_le_bytes()).collect();
        let pkl = pickle(&[
            ("w", "FloatStorage", "0", 24),
            ("h", "HalfStorage", "1", 6),
            ("v", "FloatStorage", "2", 8),
        ]);
        let file = zip(&[
            ("archive/data.pkl", &pkl),
            ("archive/byteorder", b"little"),
            ("archive/data/0", &w),
            ("archive/data/1", &h),
            ("archive/data/2", &v),
            ("archive/data/3", b"unknown!"),
            ("archive/version", b"3\n"),
        ]);
        let plans = plan(&file).unwrap();
        covers_exactly(&plans, file.len());
        let get = |n: &str| plans.iter().find(|p| p.name == n).unwrap();
        let t = |dtype, n| SegmentKind::Tensor { dtype, shape: vec![n] };
        assert_eq!(get("archive/data/0").kind, t(DType::F32, 24));
        assert_eq!(&file[get("archive/data/0").range.clone()], &w[..]);
        assert_eq!(get("archive/data/1").kind, t(DType::F16, 6));
        assert_eq!(get("archive/data/2").kind, t(DType::F32, 8));
        assert_eq!(get("archive/data/3").kind, SegmentKind::Opaque);
    }

    #[test]
    fn pickle_reader_never_panics_on_garbage() {
        let pkl = pickle(&[("w", "FloatStorage", "0", 24), ("h", "HalfStorage", "1", 6)]);
        let found = storage_dtypes(&pkl).unwrap();
        assert_eq!(found["0"], (DType::F32, Some(24)));
        assert_eq!(found["1"], (DType::F16, Some(6)));
        for n in 0..pkl.len() {
            let _ = storage_dtypes(&pkl[..n]);
        }
        for i in 0..pkl.len() {
            for v in [0u8, 0xff, b'(', b'h', b'Q', b'.', 0x8a] {
                let mut p = pkl.clone();
                p[i] = v;
                let _ = storage_dtypes(&p);
            }
        }
    }

    #[test]
    fn hostile_zips_are_refused_or_tiled() {
        let pkl = pickle(&[("w", "FloatStorage", "0", 4)]);
        let file = zip(&[("a/data.pkl", &pkl), ("a/data/0", &[1; 16])]);
        assert!(plan(&file).is_ok());
        for n in 0..file.len() {
            if let Ok(p) = plan(&file[..n]) {
                covers_exactly(&p, n);
            }
        }
        for i in 0..file.len() {
            for v in [0u8, 0xff, 0x7f] {
                let mut f = file.clone();
                f[i] = v;
                if let Ok(p) = plan(&f) {
                    covers_exactly(&p, f.len());
                }
            }
        }
        // Two entries sharing data.
        let mut f = zip(&[("a/data/0", &[1; 16]), ("a/data/1", &[2; 16])]);
        let cd = u32::from_le_bytes(f[f.len() - 6..f.len() - 2].try_into().unwrap()) as usize;
        let second = cd + 46 + "a/data/0".len();
        f[second + 42..second + 46].copy_from_slice(&0u32.to_le_bytes());
        assert!(plan(&f).is_err());
        // A count far beyond the directory.
        let mut f = file.clone();
        let n = f.len();
        f[n - 12..n - 10].copy_from_slice(&0xfffeu16.to_le_bytes());
        assert!(plan(&f).is_err());
        assert!(plan(b"PK\x03\x04").is_err());
    }
}
