//! A fine-tune's base: the tensors of a base model (a folder, files, or a
//! decoded archive), for `brevis compress --base` (find the base tensor a
//! tensor is stored against) and for decoding (a [`BaseProvider`] that gives a
//! tensor by name and SHA-256).

use std::collections::HashMap;
use std::ops::Range;

use brevis_decoder::BaseProvider;
use brevis_format::archive::SegmentKind;
use brevis_format::dtype::DType;
use sha2::{Digest, Sha256};

use crate::containers;

/// One tensor of the base: which file and where.
#[derive(Clone, Debug)]
struct BaseTensor {
    file: usize,
    dtype: DType,
    shape: Vec<u64>,
    range: Range<usize>,
}

/// A base file's bytes (a memory map, a decoded buffer).
pub type BaseBytes = Box<dyn AsRef<[u8]> + Send + Sync>;

/// The tensors of a base model, found by the same container readers as
/// compression uses (safetensors, ONNX and its external data, GGUF, PyTorch
/// zip). Files that no reader understands contribute nothing.
pub struct BaseTensors {
    paths: Vec<String>,
    files: Vec<BaseBytes>,
    by_name: HashMap<String, Vec<BaseTensor>>,
}

impl BaseTensors {
    /// The tensors of `files` (archive path, bytes).
    pub fn new(files: Vec<(String, BaseBytes)>) -> Self {
        let (paths, files): (Vec<String>, Vec<_>) = files.into_iter().unzip();
        let all: Vec<(&str, &[u8])> = paths
            .iter()
            .zip(&files)
            .map(|(p, d)| (p.as_str(), (**d).as_ref()))
            .collect();
        let external = containers::external_data(&all);
        let mut by_name: HashMap<String, Vec<BaseTensor>> = HashMap::new();
        for (i, (path, data)) in all.iter().enumerate() {
            let Ok((_, plans)) = containers::plan_with(path, data, &external) else {
                continue;
            };
            for p in plans {
                if let SegmentKind::Tensor { dtype, shape } = p.kind {
                    by_name.entry(p.name).or_default().push(BaseTensor {
                        file: i,
                        dtype,
                        shape,
                        range: p.range,
                    });
                }
            }
        }
        BaseTensors { paths, files, by_name }
    }

    /// Tensors found.
    pub fn len(&self) -> usize {
        self.by_name.values().map(Vec::len).sum()
    }

    /// True when the base holds no tensor.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn bytes(&self, t: &BaseTensor) -> &[u8] {
        &(*self.files[t.file]).as_ref()[t.range.clone()]
    }

    /// The base tensor named `name` with this dtype and shape: the one in the
    /// file at the same archive path if there is one, else the first found.
    pub fn find(&self, path: &str, name: &str, dtype: DType, shape: &[u64]) -> Option<&[u8]> {
        let candidates = self.by_name.get(name)?;
        let fits = |t: &&BaseTensor| t.dtype == dtype && t.shape == shape;
        let t = candidates
            .iter()
            .filter(fits)
            .find(|t| self.paths[t.file] == path)
            .or_else(|| candidates.iter().find(fits))?;
        Some(self.bytes(t))
    }
}

impl BaseProvider for BaseTensors {
    /// The tensor named `name` whose bytes have SHA-256 `sha256` (only the
    /// tensors of that name are hashed); failing that, the first tensor of
    /// that name, so the decoder reports a wrong base as such
    /// ([`brevis_format::FormatError::BaseMismatch`]) rather than a missing one.
    fn tensor(&self, name: &str, sha256: &[u8; 32]) -> Option<Vec<u8>> {
        let candidates = self.by_name.get(name)?;
        let exact = candidates.iter().find_map(|t| {
            let b = self.bytes(t);
            (<[u8; 32]>::from(Sha256::digest(b)) == *sha256).then(|| b.to_vec())
        });
        exact.or_else(|| candidates.first().map(|t| self.bytes(t).to_vec()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_tensors_by_name_dtype_and_shape_and_serves_them_by_hash() {
        // A safetensors file with one F32 tensor "w" of 4 elements.
        let header = br#"{"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}"#;
        let mut file = (header.len() as u64).to_le_bytes().to_vec();
        file.extend_from_slice(header);
        let data: Vec<u8> = (0..16u8).collect();
        file.extend_from_slice(&data);
        let base = BaseTensors::new(vec![("m.safetensors".into(), Box::new(file))]);
        assert_eq!(base.len(), 1);
        assert_eq!(base.find("x", "w", DType::F32, &[4]), Some(&data[..]));
        assert_eq!(base.find("x", "w", DType::F32, &[2, 2]), None);
        assert_eq!(base.find("x", "w", DType::I32, &[4]), None);
        let sha: [u8; 32] = Sha256::digest(&data).into();
        assert_eq!(base.tensor("w", &sha), Some(data.clone()));
        // Another tensor of that name: given, for the decoder to refuse by its hash.
        assert_eq!(base.tensor("w", &[0; 32]), Some(data.clone()));
        assert_eq!(base.tensor("v", &sha), None);
    }
}
