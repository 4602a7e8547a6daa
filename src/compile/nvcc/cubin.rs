//! `ptxas` split over threads, with the same bytes as unsplit. `ptxas -split-compile=N` writes
//! the same code whatever N, but records its options in the cubin's `.note.nv.tkinfo`
//! (`-arch sm_90 -m 64 -split-compile 7 `). Every `ptxas` kbuild runs (as a step or inside one
//! nvcc) therefore gets a count, `1` unless split, split at most 9 ways, and the one digit is
//! written back as `1` in place: the note, and so the cubin, is the same at any split.

use std::path::{Path, PathBuf};

use object::{Object, ObjectSection};

use super::steps::{Step, StepKind};
use crate::process::CommandSpec;

/// The option of a `ptxas` step that is not split (its count is set when it runs).
pub(super) const PTXAS_UNSPLIT: &str = "-split-compile=1";

/// nvcc's option for the `ptxas` it runs unsplit (one nvcc per unit).
pub(super) const NVCC_PTXAS_UNSPLIT: &str = "-Xptxas=-split-compile=1";

/// How the count is recorded in the note.
const RECORDED: &[u8] = b"-split-compile ";

/// `step`'s spec with [`PTXAS_UNSPLIT`] when it is a `ptxas` that names no count.
pub(super) fn with_ptxas_count(mut step: Step) -> Step {
    let named = step.spec.args.iter().any(|a| {
        a.to_str()
            .is_some_and(|a| a.starts_with("-split-compile") || a.starts_with("--split-compile"))
    });
    if step.kind == StepKind::Ptxas && !named {
        step.spec.args.push(PTXAS_UNSPLIT.into());
    }
    step
}

/// The cubin a `ptxas` step writes (`-o`, against the step's directory); `None` for the other
/// steps.
pub(super) fn cubin_output(step: &Step) -> Option<PathBuf> {
    if step.kind != StepKind::Ptxas {
        return None;
    }
    output_of(&step.spec)
}

fn output_of(spec: &CommandSpec) -> Option<PathBuf> {
    let argv: Vec<&str> = spec.args.iter().filter_map(|a| a.to_str()).collect();
    let out = match argv
        .iter()
        .position(|a| *a == "-o" || *a == "--output-file")
    {
        Some(at) => Path::new(argv.get(at + 1)?),
        None => Path::new(argv.iter().find_map(|a| a.strip_prefix("--output-file="))?),
    };
    Some(match &spec.cwd {
        Some(dir) if out.is_relative() => dir.join(out),
        _ => out.to_path_buf(),
    })
}

/// Write the one-digit `-split-compile` count in the `.note.nv.tkinfo` of the cubin at `path`
/// back as `1`. `Ok(false)` when there is nothing to write back (no note, no count, or a
/// count of more digits, which kbuild never asks for).
pub(super) fn canonical_count(path: &Path) -> std::io::Result<bool> {
    let mut bytes = std::fs::read(path)?;
    let Some(at) = count_at(&bytes) else {
        return Ok(false);
    };
    if bytes[at] == b'1' {
        return Ok(true);
    }
    bytes[at] = b'1';
    crate::files::write_atomic(path, &bytes)?;
    Ok(true)
}

/// Where the one-digit count stands in the cubin's `.note.nv.tkinfo`.
fn count_at(bytes: &[u8]) -> Option<usize> {
    let file = object::File::parse(bytes).ok()?;
    let note = file.section_by_name(".note.nv.tkinfo")?;
    let (offset, size) = note.file_range()?;
    let (offset, size) = (usize::try_from(offset).ok()?, usize::try_from(size).ok()?);
    let text = bytes.get(offset..offset.checked_add(size)?)?;
    let found = text.windows(RECORDED.len()).position(|w| w == RECORDED)?;
    let at = found + RECORDED.len();
    let digit = *text.get(at)?;
    let after = *text.get(at + 1)?;
    (digit.is_ascii_digit() && (after == b' ' || after == 0)).then_some(offset + at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ptxas_step_gets_an_unsplit_count_and_names_its_cubin() {
        let args = ["-arch=sm_90", "-m64", "x.ptx", "-o", "x.sm_90.cubin"];
        let step = Step::lone_ptxas(Path::new("ptxas"), &args, Path::new("/k"));
        let step = with_ptxas_count(step);
        assert_eq!(step.spec.args.last().unwrap(), PTXAS_UNSPLIT);
        assert_eq!(
            with_ptxas_count(step.clone()).spec.args.len(),
            step.spec.args.len()
        );
        assert_eq!(cubin_output(&step), Some(PathBuf::from("/k/x.sm_90.cubin")));
    }

    #[test]
    fn a_file_that_is_no_cubin_is_left_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.cubin");
        std::fs::write(&path, b"-split-compile 7 ").unwrap();
        assert!(!canonical_count(&path).unwrap());
        assert_eq!(std::fs::read(&path).unwrap(), b"-split-compile 7 ");
    }
}
