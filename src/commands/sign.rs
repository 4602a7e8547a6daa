//! `kbuild sign` (and `publish --sign`): Sigstore keyless signing of each variant's
//! metadata.json, one line per variant.

use std::path::{Path, PathBuf};

use super::print_json;
use crate::cli::{PublishArgs, SignArgs, SigningArgs};
use crate::error::Result;
use crate::publish::PublishSettings;
use crate::report::{Printer, Reporter};
use crate::sign::{SignSettings, Signed, Trust, sign_variants, variant_dirs};

/// Run `kbuild sign`.
pub fn run(project_dir: &Path, args: &SignArgs, printer: &Printer) -> Result<()> {
    let path = args
        .path
        .clone()
        .unwrap_or_else(|| project_dir.join("build"));
    let signed = sign(&variant_dirs(&path)?, &args.signing, printer)?;
    if args.json {
        print_json("what was signed", &signed)?;
    }
    Ok(())
}

/// Sign `dirs` as `signing` says; each variant signed is reported.
pub fn sign(dirs: &[PathBuf], signing: &SigningArgs, printer: &Printer) -> Result<Vec<Signed>> {
    let settings = SignSettings {
        trust: Trust::from_arg(signing.trust_config.as_deref()),
        identity_token: signing.identity_token.clone(),
    };
    let signed = sign_variants(dirs, &settings, printer)?;
    for one in &signed {
        printer.stage(
            "Signed",
            &format!(
                "{} by {} ({})",
                one.bundle.display(),
                one.identity,
                one.issuer
            ),
        );
    }
    Ok(signed)
}

/// `publish --sign`: the variants that will be published (`--variant`, else all), signed
/// before the upload reads them; a dry run signs nothing (signing writes to Sigstore's log).
pub fn before_publish(
    args: &PublishArgs,
    settings: &PublishSettings,
    printer: &Printer,
) -> Result<()> {
    if !args.sign {
        return Ok(());
    }
    if args.dry_run {
        printer.warn("`--dry-run`: the variants are not signed (signing writes to Sigstore's log)");
        return Ok(());
    }
    let variants = &settings.variants;
    let dirs: Vec<PathBuf> = variant_dirs(&settings.build_dir)?
        .into_iter()
        .filter(|d| {
            variants.is_empty()
                || d.file_name()
                    .is_some_and(|n| variants.iter().any(|v| *v == n.to_string_lossy()))
        })
        .collect();
    sign(&dirs, &args.signing, printer)?;
    Ok(())
}
