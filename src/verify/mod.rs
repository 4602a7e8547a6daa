//! `kbuild verify`: what a cautious user checks before trusting a variant. Its files against
//! the digest in its metadata.json, recomputed exactly as `kernels` does on load (HF's
//! `kernels-data`, whose `Digest::hash_variant` `kernels` calls); its signature, when one is
//! asked for (`crate::sign::policy`); and, with `--rebuild`, the variant built again from the sources here
//! and compared file by file (`rebuild`). For a local variant, artifact, wheel or build
//! directory, or a version published on the Hub (`source`).

mod error;
mod rebuild;
mod report;
pub mod source;

use std::path::PathBuf;

use kernels_data::digest::Digest;
use serde::Serialize;

pub use error::VerifyError;
pub use rebuild::{Difference, Rebuilt};
pub use report::human;
pub use source::HubSource;

use crate::orchestrator::BuildSettings;
use crate::package::UnpackLimits;
use crate::report::Reporter;
use crate::sign::{Policy, SignatureCheck, check_variant};

/// What to verify.
#[derive(Debug, Clone)]
pub enum Target {
    /// A variant directory, a build directory, an artifact or a wheel.
    Path(PathBuf),
    /// A version published on the Hub.
    Hub(HubSource),
}

/// `kbuild verify` after argument resolution.
pub struct VerifySettings {
    pub target: Target,
    /// Only these variants (empty: all).
    pub variants: Vec<String>,
    pub unpack: UnpackLimits,
    /// Rebuild from this project and compare (`--rebuild`).
    pub rebuild: Option<BuildSettings>,
    /// Check each variant's `metadata.json.sigstore` against this policy.
    pub signature: Option<Policy>,
}

/// The digest of one variant, recomputed.
#[derive(Debug, Clone, Serialize)]
pub struct DigestCheck {
    pub ok: bool,
    /// In the words of `kernels` (`File hash mismatch for …`).
    pub violations: Vec<String>,
}

/// What `kbuild verify` found for one variant.
#[derive(Debug, Clone, Serialize)]
pub struct VariantReport {
    pub variant: String,
    pub dir: PathBuf,
    pub digest: DigestCheck,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signature: Option<SignatureCheck>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rebuild: Option<Rebuilt>,
}

impl VariantReport {
    /// Whether every check asked for passed.
    pub fn ok(&self) -> bool {
        self.digest.ok
            && self.signature.as_ref().is_none_or(|s| s.ok)
            && self.rebuild.as_ref().is_none_or(|r| r.identical)
    }
}

/// Verify what `settings` names; one report per variant.
pub fn verify(
    settings: &VerifySettings,
    reporter: &dyn Reporter,
) -> Result<Vec<VariantReport>, VerifyError> {
    let found = match &settings.target {
        Target::Path(path) => source::at_path(path, settings.unpack)?,
        Target::Hub(hub) => {
            reporter.stage(
                "Downloading",
                &format!("{} at `{}`", hub.repo, hub.revision),
            );
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|source| VerifyError::Temp {
                    path: std::env::temp_dir(),
                    source,
                })?;
            runtime.block_on(source::from_hub(hub))?
        }
    };
    let variants: Vec<source::Located> = found
        .variants
        .iter()
        .filter(|v| settings.variants.is_empty() || settings.variants.contains(&v.name))
        .cloned()
        .collect();
    if variants.is_empty() {
        return Err(VerifyError::NoVariants {
            path: found
                .variants
                .first()
                .map_or_else(PathBuf::new, |v| v.dir.clone()),
        });
    }
    let signature = match &settings.signature {
        Some(policy) => {
            let (policy, required_by) = required(policy, &found);
            let verifier = policy.verifier()?;
            Some((policy, verifier, required_by))
        }
        None => None,
    };
    let mut reports: Vec<VariantReport> = variants
        .iter()
        .map(|v| VariantReport {
            variant: v.name.clone(),
            dir: v.dir.clone(),
            digest: digest_check(&v.dir),
            signature: signature
                .as_ref()
                .map(|(policy, verifier, by)| SignatureCheck {
                    required_by: by.clone(),
                    ..check_variant(&v.dir, policy, verifier)
                }),
            rebuild: None,
        })
        .collect();
    if let Some(build) = &settings.rebuild {
        reporter.stage(
            "Rebuilding",
            &format!("{} variant(s) from the sources here", variants.len()),
        );
        let rebuilt = rebuild::rebuild(&variants, build, reporter)?;
        for (report, rebuilt) in reports.iter_mut().zip(rebuilt) {
            report.rebuild = Some(rebuilt);
        }
    }
    Ok(reports)
}

/// The signer to require: the one asked for, else the one the published snapshot records
/// (`signing.json`, written by `kbuild publish` from the variants' signatures), else none; and
/// who required it.
fn required(asked: &Policy, found: &source::Found) -> (Policy, Option<String>) {
    let mut policy = asked.clone();
    if policy.pins_a_signer() {
        return (policy, Some("you".into()));
    }
    match &found.record {
        Some((record, at)) => {
            record.require(&mut policy);
            (policy, Some(format!("the repository's record {at}")))
        }
        None => (policy, None),
    }
}

/// The variant's files against the digest of its metadata.json, as `kernels` checks them:
/// `kernels-data`'s `Digest::hash_variant` and `validate`.
fn digest_check(dir: &std::path::Path) -> DigestCheck {
    let failed = |why: String| DigestCheck {
        ok: false,
        violations: vec![why],
    };
    let path = dir.join("metadata.json");
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) => return failed(format!("cannot read `{}`: {e}", path.display())),
    };
    let metadata: kernels_data::metadata::Metadata = match serde_json::from_slice(&bytes) {
        Ok(m) => m,
        Err(e) => {
            return failed(format!(
                "`{}` is not metadata `kernels` reads: {e}",
                path.display()
            ));
        }
    };
    let Some(expected) = metadata.digest else {
        return failed("metadata.json has no `digest`: `kernels` cannot check the files".into());
    };
    let actual = match Digest::hash_variant(expected.algorithm(), dir) {
        Ok(actual) => actual,
        Err(e) => return failed(format!("cannot hash `{}`: {e:#}", dir.display())),
    };
    match expected.validate(&actual) {
        Ok(()) => DigestCheck {
            ok: true,
            violations: Vec::new(),
        },
        Err(e) => DigestCheck {
            ok: false,
            violations: e.violations().iter().map(ToString::to_string).collect(),
        },
    }
}
