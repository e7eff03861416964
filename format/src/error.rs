//! Errors of the format layer: what was found, what was allowed, and where.

use core::fmt;

/// Result of format-layer operations.
pub type Result<T, E = FormatError> = core::result::Result<T, E>;

/// Everything that can be wrong with bytes or a program at the format layer.
///
/// Each variant carries what was found and, where it makes sense, what was allowed,
/// so a message can say `Is: …, Should be: …`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FormatError {
    /// The input ended before a complete value was read.
    Truncated {
        /// What was being read.
        what: &'static str,
    },
    /// A stream width outside 1..=64, or not fitting the container used.
    BadWidth {
        /// The width found.
        width: u8,
    },
    /// A word has bits set above the stream's width.
    WordTooWide {
        /// The width of the stream.
        width: u8,
    },
    /// Two lengths that must agree do not.
    LengthMismatch {
        /// What was being compared.
        what: &'static str,
        /// The length required.
        expected: u64,
        /// The length found.
        found: u64,
    },
    /// A tag byte names no known variant.
    UnknownTag {
        /// What kind of tag.
        what: &'static str,
        /// The value found.
        tag: u64,
    },
    /// A value breaks a rule of the format.
    Invalid {
        /// What rule was broken.
        what: &'static str,
    },
    /// A program's typing rule failed.
    Type {
        /// The operator whose rule failed.
        op: &'static str,
        /// The rule.
        rule: &'static str,
    },
    /// A configured limit was exceeded (see [`crate::program::Limits`]).
    LimitExceeded {
        /// Which limit.
        limit: &'static str,
        /// The value asked for.
        requested: u64,
        /// The largest value allowed.
        allowed: u64,
    },
    /// A literal's payload is corrupt.
    Corrupt {
        /// The encoding or structure that is corrupt.
        what: &'static str,
    },
    /// A checksum did not match.
    Checksum {
        /// What was checksummed.
        what: &'static str,
        /// The checksum stored.
        stored: u64,
        /// The checksum computed.
        computed: u64,
    },
    /// A segment is stored as a difference from a base tensor (a fine-tune
    /// against its base) and the caller gave no base, or none holding it.
    BaseMissing {
        /// SHA-256 of the base tensor's bytes, as the segment names it.
        sha256: [u8; 32],
    },
    /// The base tensor the caller gave is not the one the segment was made
    /// against (its SHA-256 or length differs): a wrong base.
    BaseMismatch {
        /// The first 8 bytes of the SHA-256 the segment names.
        expected: [u8; 8],
        /// The first 8 bytes of the SHA-256 of the bytes given.
        found: [u8; 8],
    },
    /// Bytes left over where the format says a structure ends.
    TrailingBytes {
        /// The structure.
        what: &'static str,
        /// How many bytes were left.
        count: u64,
    },
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FormatError::Truncated { what } => write!(f, "truncated input while reading {what}"),
            FormatError::BadWidth { width } => write!(f, "invalid word width {width} (must be 1..=64)"),
            FormatError::WordTooWide { width } => write!(f, "a word does not fit its stream's width of {width} bits"),
            FormatError::LengthMismatch { what, expected, found } => {
                write!(f, "{what}: is {found}, should be {expected}")
            }
            FormatError::UnknownTag { what, tag } => write!(f, "unknown {what} tag {tag}"),
            FormatError::Invalid { what } => write!(f, "invalid {what}"),
            FormatError::Type { op, rule } => write!(f, "type error in {op}: {rule}"),
            FormatError::LimitExceeded { limit, requested, allowed } => write!(
                f,
                "limit `{limit}` exceeded: {requested} requested, {allowed} allowed (raise it in the decoder's Limits if you trust this input)"
            ),
            FormatError::Corrupt { what } => write!(f, "corrupt {what}"),
            FormatError::Checksum { what, stored, computed } => write!(
                f,
                "checksum mismatch in {what}: stored {stored:#018x}, computed {computed:#018x}"
            ),
            FormatError::BaseMissing { sha256 } => {
                f.write_str("base tensor missing: this tensor is stored as a difference from a base tensor (SHA-256 ")?;
                hex(f, sha256)?;
                f.write_str(") that was not provided (no base given, or the base given does not hold it); decode with its base (brevis --base BASE)")
            }
            FormatError::BaseMismatch { expected, found } => {
                f.write_str("wrong base tensor: this tensor is stored as a difference from a base tensor with SHA-256 ")?;
                hex(f, expected)?;
                f.write_str("…, the base gives one with SHA-256 ")?;
                hex(f, found)?;
                f.write_str("… (not the base it was compressed against)")
            }
            FormatError::TrailingBytes { what, count } => write!(f, "{count} unexpected trailing bytes after {what}"),
        }
    }
}

fn hex(f: &mut fmt::Formatter<'_>, bytes: &[u8]) -> fmt::Result {
    bytes.iter().try_for_each(|b| write!(f, "{b:02x}"))
}

impl core::error::Error for FormatError {}
