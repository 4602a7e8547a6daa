//! The kernel card (`README.md` on `main`): the project's own `CARD.md` rendered as HF's
//! kernel-builder renders it (`repo_id`, `functions`, `layers`, `has_benchmark`, `upstream`,
//! `license`), else `templates/CARD.md` filled from the built variants: name, version, variants,
//! CUDA capabilities with their dtypes, functions, layers, loading.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::error::PublishError;
use crate::config::Capability;
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
    /// Public functions of all variants (`__all__`, less the `layers` submodule).
    pub functions: Vec<String>,
    /// The classes of the package's `layers` submodule, when `__all__` exports it.
    pub layers: Vec<String>,
    /// `benchmarks/benchmark.py` is published with the build (`kernels benchmark` runs it).
    pub has_benchmark: bool,
    pub upstream: Option<String>,
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
        let exports_layers = ops.iter().any(|op| *op == "layers");
        let layers = match exports_layers {
            true => layer_classes(&first.dir.join("layers/__init__.py")),
            false => Vec::new(),
        };
        let deps: BTreeSet<&String> = variants.iter().flat_map(|v| &v.python_depends).collect();
        Ok(Card {
            name: first.kernel_name.clone(),
            python_name: first.kernel_name.replace('-', "_"),
            repo_id: repo_id.to_string(),
            version: first.version,
            branch: branch.to_string(),
            license: first.license.to_lowercase(),
            functions: ops
                .into_iter()
                .filter(|op| *op != "layers")
                .cloned()
                .collect(),
            layers,
            has_benchmark: false,
            upstream: first.upstream.clone(),
            variants,
            capabilities,
            ptx: variants.iter().find_map(|v| v.ptx.clone()),
            python_depends: deps.into_iter().cloned().collect(),
        })
    }

    /// The card: the project's `CARD.md` (`template`) when it has one, rendered as HF's
    /// kernel-builder does (trimmed blocks), else kbuild's template.
    pub fn render(&self, template: Option<&ProjectCard>) -> Result<String, PublishError> {
        let mut env = minijinja::Environment::new();
        let Some(project) = template else {
            env.set_trim_blocks(false);
            return env
                .add_template("CARD.md", TEMPLATE)
                .and_then(|_| env.get_template("CARD.md"))
                .and_then(|t| t.render(self))
                .map_err(|source| PublishError::Card { source });
        };
        env.set_trim_blocks(true);
        let name = project.path.display().to_string();
        env.add_template_owned(name.clone(), project.text.clone())
            .and_then(|_| env.get_template(&name))
            .and_then(|t| t.render(self))
            .map_err(|source| PublishError::ProjectCard {
                path: project.path.clone(),
                source,
            })
    }
}

/// A project's own card template, `CARD.md` beside build.toml.
#[derive(Debug, Clone)]
pub struct ProjectCard {
    pub path: PathBuf,
    pub text: String,
}

impl ProjectCard {
    /// `<project>/CARD.md`, `None` when the project has none.
    pub fn find(project_dir: &Path) -> Result<Option<ProjectCard>, PublishError> {
        let path = project_dir.join("CARD.md");
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(Some(ProjectCard { path, text })),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(PublishError::ReadCard { path, source }),
        }
    }
}

/// The classes `class Name(...)` defined at the top level of a `layers/__init__.py` (HF lists
/// them as the kernel's layers); none when the file is missing.
fn layer_classes(init: &Path) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(init) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| line.strip_prefix("class "))
        .filter_map(|rest| {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            (!name.is_empty()).then_some(name)
        })
        .collect()
}

/// `9.0a` → 9.0a: newest first means numerically, not as strings (`10.0` after `9.0`).
fn version_key(cap: &str) -> Option<Capability> {
    Capability::parse_arch(cap).map(|(c, _)| c)
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
        insta::assert_snapshot!(card.render(None).unwrap());
    }

    #[test]
    fn layers_are_listed_as_layers_not_as_a_function() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = variant("torch215-cxx11-cpu-x86_64-linux", "cpu", &[]);
        v.dir = dir.path().to_path_buf();
        v.ops = vec!["layers".into(), "relu".into()];
        std::fs::create_dir(dir.path().join("layers")).unwrap();
        std::fs::write(
            dir.path().join("layers/__init__.py"),
            "import torch\n\nclass ReLU(torch.nn.Module):\n    pass\n\nclass Gelu:\n    pass\n",
        )
        .unwrap();
        let variants = [v];
        let card = Card::from_variants(&variants, "org/relu", "v1").unwrap();
        assert_eq!(card.functions, ["relu"]);
        assert_eq!(card.layers, ["ReLU", "Gelu"]);
        let text = card.render(None).unwrap();
        assert!(
            text.contains("## Functions\n\n- `relu`\n\n## Layers\n\n- `ReLU`\n- `Gelu`\n"),
            "{text}"
        );
    }

    #[test]
    fn the_projects_card_is_rendered_with_hfs_values_and_trimmed_blocks() {
        let variants = [variant("torch215-cxx11-cpu-x86_64-linux", "cpu", &[])];
        let mut card = Card::from_variants(&variants, "org/relu", "v1").unwrap();
        card.has_benchmark = true;
        let template = ProjectCard {
            path: "CARD.md".into(),
            text:
                "---\nlicense: {{ license }}\n---\n{% if functions %}\n{% for f in functions %}\n\
                   - `{{ f }}` from {{ repo_id }}\n{% endfor %}\n{% endif %}\n\
                   {% if has_benchmark %}benchmark{% endif %}\n"
                    .into(),
        };
        assert_eq!(
            card.render(Some(&template)).unwrap(),
            "---\nlicense: apache-2.0\n---\n- `relu` from org/relu\nbenchmark"
        );
        let broken = ProjectCard {
            path: "CARD.md".into(),
            text: "{% if functions %}\nno end\n".into(),
        };
        let err = card.render(Some(&broken)).unwrap_err();
        assert!(matches!(err, PublishError::ProjectCard { .. }), "{err:?}");
    }
}
