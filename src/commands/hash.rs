//! `kbuild hash`: recompute built variants' digests; report, or with `--write` record them.

use std::path::Path;

use super::{print, print_json};
use crate::cli::HashArgs;
use crate::error::{Error, Result};
use crate::package::{HashStatus, hash_variants};
use crate::report::{Printer, Reporter};

/// Run `kbuild hash`; a mismatch (without `--write`) is an error after the report.
pub fn run(project_dir: &Path, args: &HashArgs, printer: &Printer) -> Result<()> {
    let path = args
        .path
        .clone()
        .unwrap_or_else(|| project_dir.join("build"));
    crate::error::built(&path, "pass PATH: a build directory or a variant directory")?;
    let checks = hash_variants(&path, args.write)?;
    if args.json {
        print_json("the digests", &checks)?;
    } else {
        let mut text = String::new();
        for check in &checks {
            let status = match check.status {
                HashStatus::Match => "ok",
                HashStatus::Mismatch => "MISMATCH",
                HashStatus::Missing => "no digest",
                HashStatus::Written => "written",
            };
            text.push_str(&format!("{}: {status}\n", check.dir.display()));
            for violation in &check.violations {
                text.push_str(&format!("  {violation}\n"));
            }
        }
        print(&text)?;
    }
    for sig in checks.iter().filter_map(|c| c.stale_signature.as_ref()) {
        printer.warn(&format!(
            "`{}` signs the old metadata.json: sign the variant again",
            sig.display()
        ));
    }
    let bad = checks
        .iter()
        .filter(|c| matches!(c.status, HashStatus::Mismatch | HashStatus::Missing))
        .count();
    if bad > 0 {
        return Err(Error::DigestMismatch { count: bad });
    }
    Ok(())
}
