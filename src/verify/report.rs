//! `kbuild verify`'s findings as text: one block per variant, each check and what failed.

use super::{Difference, VariantReport};
use crate::sign::{SignatureCheck, SignatureStatus};

/// One block per variant: each check, and what failed.
pub fn human(reports: &[VariantReport]) -> String {
    let mut text = String::new();
    for report in reports {
        text.push_str(&format!("{}:\n", report.variant));
        if report.digest.ok {
            text.push_str("  digest: ok\n");
        } else {
            text.push_str("  digest: MISMATCH\n");
            for violation in &report.digest.violations {
                text.push_str(&format!("    {violation}\n"));
            }
        }
        if let Some(signature) = &report.signature {
            text.push_str(&signature_line(signature));
        }
        if let Some(rebuilt) = &report.rebuild {
            if rebuilt.identical {
                text.push_str("  rebuild: identical\n");
            } else {
                text.push_str(&format!(
                    "  rebuild: DIFFERENT ({} file(s))\n",
                    rebuilt.differences.len()
                ));
                for (path, what) in &rebuilt.differences {
                    let what = match what {
                        Difference::Differs => "differs",
                        Difference::NotRebuilt => "not in the rebuild",
                        Difference::OnlyInRebuild => "only in the rebuild",
                    };
                    text.push_str(&format!("    {path}: {what}\n"));
                }
                if only_the_extension(rebuilt) {
                    text.push_str(ONE_NVCC_NOTE);
                }
            }
        }
    }
    text
}

/// Why only an extension (and the metadata.json holding its hash) may differ.
const ONE_NVCC_NOTE: &str = "    only the extension differs: kbuild rebuilds the way metadata.json's \
    `kbuild.nvcc` says the device passes ran, but a compiler launcher or KBUILD_DIST here makes \
    it one nvcc per CUDA unit: rebuild without them (docs/reproducible.md)\n";

/// Whether the differences are an extension and metadata.json only.
fn only_the_extension(rebuilt: &super::Rebuilt) -> bool {
    let paths = || rebuilt.differences.keys();
    paths().any(|p| p.ends_with(".so"))
        && paths().all(|p| p.ends_with(".so") || p == "metadata.json")
}

/// `  signature: …`, who required the signer, and, when it failed, why.
fn signature_line(check: &SignatureCheck) -> String {
    let signer = check.signer.as_deref().unwrap_or("an unnamed signer");
    let issuer = check.issuer.as_deref().unwrap_or("no issuer");
    let mut line = match (check.status, &check.required_by) {
        (SignatureStatus::Verified, Some(_)) => {
            format!("  signature: ok, signed by {signer} ({issuer})\n")
        }
        (SignatureStatus::Verified, None) => format!(
            "  signature: valid, signed by {signer} ({issuer}); no signer was required: pass \
             --signer-workflow to require this one\n"
        ),
        (SignatureStatus::Unsigned, None) => {
            "  signature: none (no signer required: pass --signer-workflow to require one)\n".into()
        }
        (SignatureStatus::Unsigned, Some(_)) => "  signature: MISSING\n".into(),
        (SignatureStatus::Failed, _) => "  signature: FAILED\n".into(),
    };
    if let Some(problem) = &check.problem {
        line.push_str(&format!("    {problem}\n"));
    }
    if let Some(by) = check.required_by.as_deref().filter(|by| *by != "you") {
        line.push_str(&format!(
            "    signer required by {by} (pass --signer-workflow to choose one yourself)\n"
        ));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::Rebuilt;

    fn rebuilt(paths: &[&str]) -> Rebuilt {
        Rebuilt {
            identical: paths.is_empty(),
            differences: paths
                .iter()
                .map(|p| (p.to_string(), Difference::Differs))
                .collect(),
        }
    }

    #[test]
    fn a_rebuild_differing_in_the_extension_alone_points_at_one_nvcc_per_unit() {
        assert!(only_the_extension(&rebuilt(&[
            "_relu_cuda_1.abi3.so",
            "metadata.json"
        ])));
        assert!(!only_the_extension(&rebuilt(&["metadata.json"])));
        assert!(!only_the_extension(&rebuilt(&[
            "_relu_cuda_1.abi3.so",
            "_ops.py"
        ])));
    }
}
