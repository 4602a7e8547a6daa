//! `kbuild verify`: digest, signature and rebuild checks of variants, one block per variant.

use std::path::Path;
use std::process::ExitCode;

use super::settings::select_settings;
use super::{print, print_json};
use crate::cli::{RepoTypeArg, SelectArgs, VerifyArgs};
use crate::error::{Error, Result};
use crate::package::UnpackLimits;
use crate::publish::{RepoTypeAny, auth};
use crate::report::{Printer, Reporter};
use crate::sign::{Policy, SignatureStatus, Trust};
use crate::verify::{Difference, HubSource, Target, VariantReport, VerifySettings, verify};

/// Run `kbuild verify`; exits 1 when any check fails.
pub fn run(project_dir: &Path, args: &VerifyArgs, printer: &Printer) -> Result<ExitCode> {
    let settings = settings(project_dir, args)?;
    let reports = verify(&settings, printer)?;
    if args.json {
        print_json("the verification", &reports)?;
    } else {
        let pinned =
            args.signer_workflow.is_some() || args.identity.is_some() || args.issuer.is_some();
        print(&human(&reports, pinned))?;
    }
    let failed = reports.iter().filter(|r| !r.ok()).count();
    if failed > 0 {
        return Err(Error::VerifyFailed {
            failed,
            total: reports.len(),
        });
    }
    printer.stage("Verified", &format!("{} variant(s)", reports.len()));
    Ok(ExitCode::SUCCESS)
}

fn settings(project_dir: &Path, args: &VerifyArgs) -> Result<VerifySettings> {
    let env = |k: &str| std::env::var(k).ok();
    let target = match &args.repo {
        Some(repo) => Target::Hub(HubSource {
            endpoint: env("HF_ENDPOINT")
                .filter(|e| !e.trim().is_empty())
                .unwrap_or_else(|| "https://huggingface.co".into())
                .trim_end_matches('/')
                .to_string(),
            // A broken token file is no reason to refuse a public download: without a token.
            token: auth::resolve_token(|k: &str| std::env::var_os(k))
                .ok()
                .flatten()
                .map(|(token, _)| token.expose().to_string()),
            repo: repo.clone(),
            repo_type: match args.repo_type {
                RepoTypeArg::Kernel => RepoTypeAny::Kernel,
                RepoTypeArg::Model => RepoTypeAny::Model,
            },
            revision: args
                .revision
                .clone()
                .unwrap_or_else(|| format!("v{}", args.version.unwrap_or(1))),
        }),
        None => Target::Path(
            args.path
                .clone()
                .unwrap_or_else(|| project_dir.join("build")),
        ),
    };
    let rebuild = args.rebuild.then(|| {
        select_settings(
            project_dir,
            &args.toolchain,
            &SelectArgs::default(),
            args.jobs,
            None,
        )
    });
    Ok(VerifySettings {
        target,
        variants: args.variants.clone(),
        unpack: UnpackLimits::from_env(env)?,
        rebuild,
        signature: Some(Policy {
            trust: Trust::from_arg(args.trust_config.as_deref()),
            signer_workflow: args.signer_workflow.clone(),
            identity: args.identity.clone(),
            issuer: args.issuer.clone(),
        }),
    })
}

/// One block per variant: each check, and what failed.
fn human(reports: &[VariantReport], pinned: bool) -> String {
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
            text.push_str(&signature_line(signature, pinned));
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
            }
        }
    }
    text
}

/// `  signature: …` and, when it failed, why.
fn signature_line(check: &crate::sign::SignatureCheck, pinned: bool) -> String {
    let signer = check.signer.as_deref().unwrap_or("an unnamed signer");
    let issuer = check.issuer.as_deref().unwrap_or("no issuer");
    let mut line = match check.status {
        SignatureStatus::Verified if pinned => {
            format!("  signature: ok, signed by {signer} ({issuer})\n")
        }
        SignatureStatus::Verified => format!(
            "  signature: valid, signed by {signer} ({issuer}); no signer was required: pass \
             --signer-workflow to require this one\n"
        ),
        SignatureStatus::Unsigned if check.ok => {
            "  signature: none (no signer required: pass --signer-workflow to require one)\n".into()
        }
        SignatureStatus::Unsigned => "  signature: MISSING\n".into(),
        SignatureStatus::Failed => "  signature: FAILED\n".into(),
    };
    if let Some(problem) = &check.problem {
        line.push_str(&format!("    {problem}\n"));
    }
    line
}
