//! `kbuild verify`: digest, signature and rebuild checks of variants, one block per variant.

use std::path::Path;

use super::settings::select_settings;
use super::{print, print_json};
use crate::cli::{RepoTypeArg, SelectArgs, VerifyArgs};
use crate::error::{Error, Result};
use crate::package::UnpackLimits;
use crate::publish::{RepoTypeAny, auth};
use crate::report::{Printer, Reporter};
use crate::sign::{Policy, Trust};
use crate::verify::{HubSource, Target, VerifySettings, human, verify};

/// Run `kbuild verify`; a failed check is an error after the report.
pub fn run(project_dir: &Path, args: &VerifyArgs, printer: &Printer) -> Result<()> {
    let settings = settings(project_dir, args)?;
    let reports = verify(&settings, printer)?;
    if args.json {
        print_json("the verification", &reports)?;
    } else {
        print(&human(&reports))?;
    }
    let failed = reports.iter().filter(|r| !r.ok()).count();
    if failed > 0 {
        return Err(Error::VerifyFailed {
            failed,
            total: reports.len(),
        });
    }
    printer.stage("Verified", &format!("{} variant(s)", reports.len()));
    Ok(())
}

fn settings(project_dir: &Path, args: &VerifyArgs) -> Result<VerifySettings> {
    let env = |k: &str| crate::env::var(k).ok();
    let target = match &args.repo {
        Some(repo) => Target::Hub(HubSource {
            endpoint: env("HF_ENDPOINT")
                .filter(|e| !e.trim().is_empty())
                .unwrap_or_else(|| "https://huggingface.co".into())
                .trim_end_matches('/')
                .to_string(),
            // A broken token file is no reason to refuse a public download: without a token.
            token: auth::resolve_token(|k: &str| crate::env::var_os(k))
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
