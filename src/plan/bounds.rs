//! `[torch] minver/maxver` and `[general.cuda] minver/maxver` against the toolchain, as HF's
//! generated `preamble.cmake` checks them: CMake's `VERSION_LESS` / `VERSION_GREATER` (a missing
//! component is 0, so torch `2.12.1` is above `maxver = "2.12"`), torch's version without its
//! `+local` part, CUDA as the nvcc's `major.minor`.

use super::{BoundSide, PlanError};
use crate::config::{Project, Version};
use crate::toolchain::{Nvcc, TorchInfo};

/// torch's version against `[torch] minver/maxver` (HF checks it for every backend).
pub(super) fn check_torch(project: &Project, torch: &TorchInfo) -> Result<(), PlanError> {
    let crate::config::Framework::Torch(t) = &project.framework else {
        return Ok(());
    };
    let Some(found) = release_of(&torch.version) else {
        return Ok(());
    };
    check(
        "torch",
        &found,
        &torch.version,
        t.minver.as_ref(),
        t.maxver.as_ref(),
        "[torch]",
    )
}

/// The nvcc's CUDA version against `[general.cuda] minver/maxver` (checked when the cuda
/// backend is built).
pub(super) fn check_cuda(project: &Project, nvcc: &Nvcc) -> Result<(), PlanError> {
    let text = format!("{}.{}", nvcc.version.0, nvcc.version.1);
    let Ok(found) = text.parse::<Version>() else {
        return Ok(());
    };
    let cuda = &project.general.cuda;
    check(
        "CUDA",
        &found,
        &text,
        cuda.minver.as_ref(),
        cuda.maxver.as_ref(),
        "[general.cuda]",
    )
}

fn check(
    what: &'static str,
    found: &Version,
    shown: &str,
    minver: Option<&Version>,
    maxver: Option<&Version>,
    table: &'static str,
) -> Result<(), PlanError> {
    let violated = match (minver, maxver) {
        (Some(min), _) if found < min => Some((BoundSide::TooOld, min, "minver")),
        (_, Some(max)) if found > max => Some((BoundSide::TooNew, max, "maxver")),
        _ => None,
    };
    match violated {
        Some((bound_side, bound, key)) => Err(PlanError::OutOfBounds {
            what,
            found: shown.to_string(),
            bound_side,
            bound: Box::new(bound.clone()),
            key,
            table,
        }),
        None => Ok(()),
    }
}

/// `2.11.0+cu130` → `2.11.0`; a pre-release (`2.12.0a0+git…`) keeps its numeric part, `2.12.0`.
fn release_of(version: &str) -> Option<Version> {
    let public = version.split('+').next().unwrap_or(version);
    let mut parts = Vec::new();
    for part in public.split('.') {
        let digits: String = part.chars().take_while(char::is_ascii_digit).collect();
        if digits.is_empty() {
            break;
        }
        let whole = digits.len() == part.len();
        parts.push(digits);
        if !whole {
            break;
        }
    }
    parts.join(".").parse().ok()
}

/// What to install when a bound is violated.
pub(super) fn install_hint(what: &str, side: BoundSide, bound: &Version) -> String {
    let (relation, pip) = match side {
        BoundSide::TooOld => ("or newer", ">="),
        BoundSide::TooNew => ("or older", "<="),
    };
    if what == "torch" {
        format!(
            "install torch {bound} {relation} into the Python kbuild builds with \
             (`pip install \"torch{pip}{bound}\"`) and pass it with `--python`, or change the \
             bound in build.toml"
        )
    } else {
        format!(
            "use a CUDA {bound} {relation} toolkit whose major version matches torch's CUDA \
             (pip: `cuda-toolkit[nvcc,cccl]{pip}{bound}`), passed with `--nvcc <path>` or \
             `CUDA_HOME`, or change the bound in build.toml"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        s.parse().unwrap()
    }

    #[test]
    fn torch_release_drops_the_local_part_and_pre_release_tags() {
        assert_eq!(release_of("2.11.0+cu130"), Some(v("2.11")));
        assert_eq!(release_of("2.12.0a0+git1234"), Some(v("2.12")));
        assert_eq!(release_of("dev"), None);
    }

    #[test]
    fn bounds_compare_like_cmake() {
        let max = v("2.12");
        let ok = check("torch", &v("2.12.0"), "2.12.0", None, Some(&max), "[torch]");
        assert!(ok.is_ok());
        let err = check("torch", &v("2.12.1"), "2.12.1", None, Some(&max), "[torch]").unwrap_err();
        assert_eq!(
            err.to_string(),
            "torch 2.12.1 is newer than `maxver = \"2.12\"` in `[torch]`"
        );
        let min = v("12.8");
        let err = check(
            "CUDA",
            &v("12.6"),
            "12.6",
            Some(&min),
            None,
            "[general.cuda]",
        );
        assert!(matches!(
            err,
            Err(PlanError::OutOfBounds {
                bound_side: BoundSide::TooOld,
                ..
            })
        ));
    }
}
