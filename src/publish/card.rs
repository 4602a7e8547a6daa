//! The kernel card (`README.md` on `main`): `templates/CARD.md` filled from the verified
//! variants: name, version, variants, CUDA capabilities with their dtypes, functions, loading.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::PublishError;
use crate::package::verify::VerifiedVariant;

const TEMPLATE: &str = include_str!("../../templates/CARD.md");

/// What the card shows.
#[derive(Debug, Serialize)]
pub struct Card {
    pub name: String,
    pub python_name: String,
    pub repo_id: String,
    pub version: usize,
    pub branch: String,
    pub license: String,
    /// Public functions (`__all__` of the variants' `__init__.py`).
    pub ops: Vec<String>,
    pub variants: Vec<CardVariant>,
    /// From the variants' `_capabilities.py`, newest first.
    pub capabilities: Vec<CardCapability>,
    pub ptx: Option<String>,
    pub python_depends: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct CardVariant {
    pub name: String,
    pub backend: String,
    pub archs: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct CardCapability {
    pub capability: String,
    pub dtypes: Vec<String>,
}

impl Card {
    /// Gather the card's content from the variants' files.
    pub fn from_variants(
        variants: &[VerifiedVariant],
        repo_id: &str,
        branch: &str,
    ) -> Result<Card, PublishError> {
        let first = variants.first().ok_or_else(|| PublishError::Card {
            message: "no variants to describe".into(),
        })?;
        let mut ops = BTreeSet::new();
        let mut caps: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut ptx = None;
        let mut deps = BTreeSet::new();
        for v in variants {
            if let Ok(init) = std::fs::read_to_string(v.dir.join("__init__.py")) {
                ops.extend(dunder_all(&init));
            }
            if let Ok(src) = std::fs::read_to_string(v.dir.join("_capabilities.py")) {
                for (cap, dtypes) in capability_dtypes(&src) {
                    caps.entry(cap).or_default().extend(dtypes);
                }
                ptx = ptx.or_else(|| ptx_capability(&src));
            }
            deps.extend(v.python_depends.iter().cloned());
        }
        let mut capabilities: Vec<CardCapability> = caps
            .into_iter()
            .map(|(capability, dtypes)| CardCapability {
                capability,
                dtypes: dtypes.into_iter().collect(),
            })
            .collect();
        capabilities.sort_by_key(|c| std::cmp::Reverse(version_key(&c.capability)));
        Ok(Card {
            name: first.kernel_name.clone(),
            python_name: first.kernel_name.replace('-', "_"),
            repo_id: repo_id.to_string(),
            version: first.version,
            branch: branch.to_string(),
            license: first.license.clone(),
            ops: ops.into_iter().collect(),
            variants: variants
                .iter()
                .map(|v| CardVariant {
                    name: v.name.clone(),
                    backend: v.backend.clone(),
                    archs: v.archs.clone(),
                })
                .collect(),
            capabilities,
            ptx,
            python_depends: deps.into_iter().collect(),
        })
    }

    /// The filled template.
    pub fn render(&self) -> Result<String, PublishError> {
        let mut env = minijinja::Environment::new();
        env.set_trim_blocks(false);
        env.add_template("CARD.md", TEMPLATE)
            .and_then(|_| env.get_template("CARD.md"))
            .and_then(|t| t.render(self))
            .map_err(|e| PublishError::Card {
                message: format!("{e:#}"),
            })
    }
}

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

/// Quoted strings inside `bracket_open ... bracket_close` starting at `src`.
fn quoted_until(src: &str, close: char) -> (Vec<String>, &str) {
    let mut out = Vec::new();
    let mut rest = src;
    loop {
        let next_quote = rest.find(['"', '\'']);
        let next_close = rest.find(close);
        match (next_quote, next_close) {
            (Some(q), Some(c)) if q < c => {
                let quote = rest[q..].chars().next().unwrap_or('"');
                let body = &rest[q + 1..];
                let Some(end) = body.find(quote) else {
                    return (out, "");
                };
                out.push(body[..end].to_string());
                rest = &body[end + 1..];
            }
            (_, Some(c)) => return (out, &rest[c + 1..]),
            _ => return (out, ""),
        }
    }
}

/// The names in `__all__ = [...]`.
fn dunder_all(src: &str) -> Vec<String> {
    let Some(at) = src.find("__all__") else {
        return Vec::new();
    };
    let rest = &src[at..];
    let Some(open) = rest.find(['[', '(']) else {
        return Vec::new();
    };
    let close = if rest[open..].starts_with('[') {
        ']'
    } else {
        ')'
    };
    quoted_until(&rest[open + 1..], close).0
}

/// Entries of `CAPABILITY_DTYPES = {"9.0": ("float32", ...), ...}`.
fn capability_dtypes(src: &str) -> Vec<(String, Vec<String>)> {
    let Some(at) = src.find("CAPABILITY_DTYPES") else {
        return Vec::new();
    };
    let Some(open) = src[at..].find('{') else {
        return Vec::new();
    };
    let mut rest = &src[at + open + 1..];
    let mut out = Vec::new();
    loop {
        let trimmed = rest.trim_start_matches(|c: char| c.is_whitespace() || c == ',');
        let Some(quote) = trimmed.chars().next().filter(|c| *c == '"' || *c == '\'') else {
            return out;
        };
        let Some(end) = trimmed[1..].find(quote) else {
            return out;
        };
        let cap = trimmed[1..1 + end].to_string();
        let after = &trimmed[end + 2..];
        let Some(open) = after.find(['(', '[']) else {
            return out;
        };
        let close = if after[open..].starts_with('(') {
            ')'
        } else {
            ']'
        };
        let (dtypes, tail) = quoted_until(&after[open + 1..], close);
        out.push((cap, dtypes));
        rest = tail;
    }
}

/// `PTX_CAPABILITY = "9.0"` (absent or `None` gives `None`).
fn ptx_capability(src: &str) -> Option<String> {
    let at = src.find("PTX_CAPABILITY")?;
    let line = src[at..].lines().next()?;
    let value = line.split_once('=')?.1.trim();
    let quote = value.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let inner = &value[1..];
    Some(inner[..inner.find(quote)?].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAPS: &str = r#"
import torch
CAPABILITY_DTYPES: dict[str, tuple[str, ...]] = {
    "9.0": ("float32", "float16", "bfloat16"),
    "7.5": ("float32", "float16"),
}
PTX_CAPABILITY = "9.0"
"#;

    #[test]
    fn capability_matrix_is_read_from_capabilities_py() {
        let caps = capability_dtypes(CAPS);
        assert_eq!(caps.len(), 2);
        assert_eq!(
            caps[1],
            ("7.5".to_string(), vec!["float32".into(), "float16".into()])
        );
        assert_eq!(ptx_capability(CAPS).as_deref(), Some("9.0"));
        assert_eq!(capability_dtypes("CAPABILITY_DTYPES = {}\n"), vec![]);
        assert_eq!(ptx_capability("PTX_CAPABILITY = None\n"), None);
    }

    #[test]
    fn functions_come_from_dunder_all() {
        let init = "from ._ops import ops\n__all__ = [\n  \"relu\",\n  'gelu_fast',\n]\n";
        assert_eq!(dunder_all(init), ["relu", "gelu_fast"]);
        assert!(dunder_all("import torch\n").is_empty());
    }

    #[test]
    fn card_renders_loading_snippet_variants_and_capabilities() {
        let card = Card {
            name: "ltx-kernels".into(),
            python_name: "ltx_kernels".into(),
            repo_id: "org/ltx_kernels".into(),
            version: 1,
            branch: "v1".into(),
            license: "apache-2.0".into(),
            ops: vec!["relu".into()],
            variants: vec![
                CardVariant {
                    name: "torch215-cxx11-cpu-x86_64-linux".into(),
                    backend: "cpu".into(),
                    archs: vec![],
                },
                CardVariant {
                    name: "torch215-cxx11-cu132-x86_64-linux".into(),
                    backend: "cuda".into(),
                    archs: vec!["7.5".into(), "9.0".into()],
                },
            ],
            capabilities: vec![CardCapability {
                capability: "9.0".into(),
                dtypes: vec!["float32".into(), "bfloat16".into()],
            }],
            ptx: Some("9.0".into()),
            python_depends: vec![],
        };
        insta::assert_snapshot!(card.render().unwrap());
    }
}
