//! Decoder errors: a [`FormatError`] plus where in the archive it happened.

use alloc::string::String;
use core::fmt;

use brevis_format::FormatError;

/// What kind of failure, for callers that branch on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The input ended early: more bytes are needed (a streaming caller may feed more).
    InsufficientData,
    /// The bytes are not a valid archive, or were damaged.
    Corruption,
    /// A configured limit was exceeded.
    Limit,
    /// The archive uses a version or feature this decoder does not know.
    Compatibility,
    /// A tensor is stored as a difference from a base tensor that was not
    /// given, or a different base was given.
    Base,
}

/// Where in the archive an error happened.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Location {
    /// Byte offset of the record being read.
    pub offset: Option<u64>,
    /// Path of the file being rebuilt.
    pub file: Option<String>,
    /// Name of the tensor or opaque segment.
    pub segment: Option<String>,
    /// Index of the chunk within its segment.
    pub chunk: Option<u64>,
}

/// An error while decoding, with its place in the archive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError {
    /// The underlying format error.
    pub error: FormatError,
    /// Where it happened.
    pub location: Location,
}

impl DecodeError {
    /// An error with no location yet.
    pub fn new(error: FormatError) -> Self {
        DecodeError {
            error,
            location: Location::default(),
        }
    }

    /// The kind of failure.
    pub fn kind(&self) -> ErrorKind {
        match self.error {
            FormatError::Truncated { .. } => ErrorKind::InsufficientData,
            FormatError::LimitExceeded { .. } => ErrorKind::Limit,
            FormatError::UnknownTag {
                what: "archive version" | "archive flags" | "segment kind" | "literal encoding",
                ..
            } => ErrorKind::Compatibility,
            FormatError::BaseMissing { .. } | FormatError::BaseMismatch { .. } => ErrorKind::Base,
            _ => ErrorKind::Corruption,
        }
    }

    pub(crate) fn at(mut self, loc: &Location) -> Self {
        if self.location == Location::default() {
            self.location = loc.clone();
        }
        self
    }
}

impl From<FormatError> for DecodeError {
    fn from(e: FormatError) -> Self {
        DecodeError::new(e)
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.error)?;
        let l = &self.location;
        if let Some(p) = &l.file {
            write!(f, " (file `{p}`")?;
            if let Some(s) = &l.segment {
                write!(f, ", segment `{s}`")?;
            }
            if let Some(c) = l.chunk {
                write!(f, ", chunk {c}")?;
            }
            f.write_str(")")?;
        }
        if let Some(o) = l.offset {
            write!(f, " at archive offset {o}")?;
        }
        Ok(())
    }
}

impl core::error::Error for DecodeError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        Some(&self.error)
    }
}
