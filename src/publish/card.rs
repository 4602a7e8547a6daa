//! The kernel card (`README.md` on `main`): `templates/CARD.md` filled from the built variants:
//! name, version, variants, CUDA capabilities with their dtypes, functions, loading.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::error::PublishError;
use crate::package::BuiltVariant;

const TEMPLATE: &str = include_str!("../../templates/CARD.md");

/// Dtypes in the order build.toml and `_capabilities.py` list them (widest first).
const DTYPE_ORDER: [&str; 3] = ["float32", "float16", "bfloat16"];

/// What the card shows.
#[derive(Debug, Serialize)]
pub struct Card<'a> {
    pub name: String,
    pub python_name: String,
    pub repo_id: String,
    pub version: u32,
    pub branch: String,
    pub license: String,
    /// Public functions of all variants.
    pub ops: Vec<String>,
    pub variants: &'a [BuiltVariant],
    /// The capability tables of all variants merged, newest capability first.
    pub capabilities: Vec<CardCapability>,
    pub ptx: Option<String>,
    pub python_depends: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct CardCapability {
    pub capability: String,
    pub dtypes: Vec<String>,
}

impl<'a> Card<'a> {
    /// Gather the card's content from the variants.
    pub fn from_variants(
        variants: &'a [BuiltVariant],
        repo_id: &str,
        branch: &str,
    ) -> Result<Card<'a>, PublishError> {
        let first = variants.first().ok_or_else(|| PublishError::Card {
            source: minijinja::Error::new(
                minijinja::ErrorKind::UndefinedError,
                "no variants to describe",
            ),
        })?;
        let mut caps: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for v in variants {
            for c in &v.capabilities {
                caps.entry(&c.capability)
                    .or_default()
                    .extend(c.dtypes.iter().map(String::as_str));
            }
        }
        let mut capabilities: Vec<CardCapability> = caps
            .into_iter()
            .map(|(capability, dtypes)| {
                let mut dtypes: Vec<String> = dtypes.into_iter().map(String::from).collect();
                dtypes.sort_by_key(|d| DTYPE_ORDER.iter().position(|o| o == d));
                CardCapability {
                    capability: capability.to_string(),
                    dtypes,
                }
            })
            .collect();
        capabilities.sort_by_key(|c| std::cmp::Reverse(version_key(&c.capability)));
        let ops: BTreeSet<&String> = variants.iter().flat_map(|v| &v.ops).collect();
        let deps: BTreeSet<&String> = variants.iter().flat_map(|v| &v.python_depends).collect();
        Ok(Card {
            name: first.kernel_name.clone(),
            python_name: first.kernel_name.replace('-', "_"),
            repo_id: repo_id.to_string(),
            version: first.version,
            branch: branch.to_string(),
            license: first.license.clone(),
            ops: ops.into_iter().cloned().collect(),
            variants,
            capabilities,
            ptx: variants.iter().find_map(|v| v.ptx.clone()),
            python_depends: deps.into_iter().cloned().collect(),
        })
    }

    /// The filled template.
    pub fn render(&self) -> Result<String, PublishError> {
        let mut env = minijinja::Environment::new();
        env.set_trim_blocks(false);
        env.add_template("CARD.md", TEMPLATE)
            .and_then(|_| env.get_template("CARD.md"))
            .and_then(|t| t.render(self))
            .map_err(|source| PublishError::Card { source })
    }
}

/// `9.0a` → (9, 0): newest first means numerically, not as strings (`10.0` after `9.0`).
fn version_key(cap: &str) -> (u32, u32) {
    let (major, minor) = cap.split_once('.').unwrap_or((cap, "0"));
    let digits = |s: &str| {
        s.chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse()
            .unwrap_or(0)
    };
    (digits(major), digits(minor))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::package::{CapabilityDtypes, VariantDigest};

    fn variant(name: &str, backend: &str, caps: &[(&str, &[&str])]) -> BuiltVariant {
        BuiltVariant {
            name: name.into(),
            dir: name.into(),
            kernel_name: "ltx-kernels".into(),
            id: format!("_ltx_kernels_{backend}_abc1234"),
            version: 1,
            license: "apache-2.0".into(),
            upstream: None,
            source: None,
            python_depends: vec![],
            kernel_depends: vec![],
            backend: backend.into(),
            archs: caps.iter().map(|(c, _)| c.to_string()).collect(),
            capabilities: caps
                .iter()
                .map(|(c, d)| CapabilityDtypes {
                    capability: c.to_string(),
                    dtypes: d.iter().map(|s| s.to_string()).collect(),
                })
                .collect(),
            ptx: caps.last().map(|(c, _)| c.to_string()),
            ops: vec!["relu".into()],
            provenance: None,
            files: vec![],
            digest: VariantDigest {
                algorithm: kernels_data::digest::DigestAlgorithm::SHA256,
                files: Default::default(),
            },
        }
    }

    #[test]
    fn card_renders_loading_snippet_variants_and_capabilities() {
        let variants = [
            variant("torch215-cxx11-cpu-x86_64-linux", "cpu", &[]),
            variant(
                "torch215-cxx11-cu132-x86_64-linux",
                "cuda",
                &[
                    ("7.5", &["float32", "float16"]),
                    ("9.0", &["float32", "bfloat16"]),
                    ("10.0", &["float32"]),
                ],
            ),
            variant(
                "torch215-cxx11-cu129-x86_64-linux",
                "cuda",
                &[("9.0", &["float16"])],
            ),
        ];
        let card = Card::from_variants(&variants, "org/ltx_kernels", "v1").unwrap();
        let order: Vec<&str> = card
            .capabilities
            .iter()
            .map(|c| c.capability.as_str())
            .collect();
        assert_eq!(order, ["10.0", "9.0", "7.5"]);
        insta::assert_snapshot!(card.render().unwrap());
    }
}
