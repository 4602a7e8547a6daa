//! Whether a unit's object depends on the op namespace (`TORCH_EXTENSION_NAME`'s value, new
//! with every commit), decided from what its compiler sees rather than from how its files are
//! spelled: a kernel may take the name from its command line (`-DKERNEL_NS=TORCH_EXTENSION_NAME`)
//! or paste it together (`CAT(TORCH_EXTENSION, _NAME)`) and register its ops under it.
//!
//! When a unit compiles, the cheap signs are recorded ([`NamespaceUse::of_compile`]): a file it
//! is built from spells the name, or a word of its command line other than the define itself
//! names it. Without either, whether the preprocessor ever put the id into the code is asked of
//! the preprocessor itself ([`preprocessed_holds`]): once, the first time a build wants
//! another id for the object (or when the object is shared with the remote cache, whose entry
//! for any op namespace serves other commits). Every pass counts: the C++ preprocessor, or
//! nvcc's host preprocess and each device preprocess. An id is an identifier (`--unique-id` is
//! checked so), so the preprocessor can take it into the code only as its characters (the name
//! itself, pasted into a longer one, or a string of it): an output that does not hold the id
//! is the same under every id, and so is the object.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::command::command_for;
use super::command::preprocess_command_for;
use super::error::CompileError;
use super::gate::run_gated;
use super::nvcc::steps::{StepKind, StepPaths, plan_steps};
use super::runner::TempOutputs;
use super::settings::CompileSettings;
use crate::plan::{CompileJob, Lang};
use crate::process::{Cancel, CommandFailure, CommandSpec};
use crate::schedule::memory::StepName;
use crate::schedule::peaks::{self, Work};
use crate::schedule::{JobError, RunChoice};

/// The define that carries the op namespace, keyed without its value (`cache.rs`).
pub(crate) const NAMESPACE_DEFINE: &str = "TORCH_EXTENSION_NAME";

/// Whether, and why, an object depends on its op namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum NamespaceUse {
    /// This file it is built from spells `TORCH_EXTENSION_NAME` (as the cache writes paths).
    Spelled(PathBuf),
    /// This word of its command line names it (another define's value).
    CommandLine(String),
    /// What its preprocessor wrote holds the id.
    Preprocessed,
    /// What its preprocessor wrote does not hold the id: the object is the same under any.
    Unused,
    /// Neither its files nor its command line name it, and its preprocessor was not asked yet.
    Unchecked,
}

impl NamespaceUse {
    /// What a compile shows of it: the first file of `spelled` (in the order the object was
    /// built from them) or, else, the first word of the command line `words` (the define itself
    /// written without its value) that names `TORCH_EXTENSION_NAME`.
    pub(crate) fn of_compile(words: &[String], spelled: Option<PathBuf>) -> Self {
        let define = format!("-D{NAMESPACE_DEFINE}=<op namespace>");
        let named = (words.iter()).find(|w| **w != define && w.contains(NAMESPACE_DEFINE));
        match (spelled, named) {
            (Some(path), _) => NamespaceUse::Spelled(path),
            (None, Some(word)) => NamespaceUse::CommandLine(word.clone()),
            (None, None) => NamespaceUse::Unchecked,
        }
    }

    /// Whether the object depends on the id.
    pub(crate) fn depends(&self) -> bool {
        matches!(
            self,
            NamespaceUse::Spelled(_) | NamespaceUse::CommandLine(_) | NamespaceUse::Preprocessed
        )
    }

    /// Why the object depends on the id (`None` when it does not), paths through `unalias`.
    pub(crate) fn why(&self, unalias: impl Fn(&Path) -> PathBuf) -> Option<String> {
        Some(match self {
            NamespaceUse::Spelled(path) => {
                format!("`{}` spells `{NAMESPACE_DEFINE}`", unalias(path).display())
            }
            NamespaceUse::CommandLine(word) => {
                format!("its command line's `{word}` names `{NAMESPACE_DEFINE}`")
            }
            NamespaceUse::Preprocessed => "its preprocessed source holds the op namespace".into(),
            NamespaceUse::Unused | NamespaceUse::Unchecked => return None,
        })
    }

    /// What the preprocessor found: whether its output `holds` the id.
    pub(crate) fn preprocessed(holds: bool) -> Self {
        match holds {
            true => NamespaceUse::Preprocessed,
            false => NamespaceUse::Unused,
        }
    }
}

/// Whether what the preprocessor of `job` writes, as it compiles now under the op namespace
/// `id`, holds `id`: every pass of it (nvcc's host and device preprocesses). `Err(why)` when
/// that cannot be told (a preprocessor failed, an nvcc pipeline kbuild does not know): the unit
/// then compiles as if it depended on the id.
pub(super) fn preprocessed_holds(
    job: &CompileJob,
    run: &RunChoice,
    id: &str,
    settings: &CompileSettings,
    cancel: &Cancel,
) -> Result<Result<bool, String>, JobError<CompileError>> {
    let tmp = TempOutputs::new(job);
    let keep = (job.lang == Lang::Cuda).then(|| StepsDir::new(&tmp.object));
    let passes = match &keep {
        None => {
            let out = tmp.object.with_extension("ii");
            vec![(preprocess_command_for(job, &out), out)]
        }
        Some(keep) => match nvcc_preprocesses(job, run, &tmp, keep, cancel)? {
            Ok(passes) => passes,
            Err(why) => return Ok(Err(why)),
        },
    };
    let gate = settings.memory.as_deref();
    let key = gate.map(|g| g.key(&job.object, Some(&StepName::new("preprocess"))));
    let guess = Some(peaks::guess(Work::Preprocess, 0));
    for (spec, out) in &passes {
        let ran = run_gated(spec, gate, key.as_ref(), guess, cancel);
        let held = ran.map(|_| crate::files::read_regular(out, u64::MAX));
        let _ = std::fs::remove_file(out);
        match held {
            Ok(Ok(bytes)) if holds(&bytes, id) => return Ok(Ok(true)),
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Ok(Err(format!("cannot read `{}`: {e}", out.display()))),
            Err(CommandFailure::Cancelled { .. } | CommandFailure::Interrupted { .. }) => {
                return Err(JobError::Cancelled);
            }
            Err(failure) => return Ok(Err(format!("its preprocessor failed: {failure}"))),
        }
    }
    Ok(Ok(false))
}

/// The preprocessor runs of a unit, each with the file it writes.
type Passes = Vec<(CommandSpec, PathBuf)>;

/// The host and device preprocesses nvcc runs for `job` (writing into `keep`), each with the
/// file it writes: read from `nvcc --dryrun`, as `split.rs` reads the whole pipeline.
fn nvcc_preprocesses(
    job: &CompileJob,
    run: &RunChoice,
    tmp: &TempOutputs,
    keep: &StepsDir,
    cancel: &Cancel,
) -> Result<Result<Passes, String>, JobError<CompileError>> {
    let mut dryrun = command_for(
        &CompileJob {
            object: tmp.object.clone(),
            depfile: tmp.depfile.clone(),
            ..job.clone()
        },
        run,
    );
    let mut args = vec!["--dryrun".into(), "--keep".into(), "--keep-dir".into()];
    args.push(keep.0.as_os_str().to_owned());
    args.append(&mut dryrun.args);
    dryrun.args = args;
    let printed = match crate::process::run_cancellable(&dryrun, cancel) {
        Ok(out) => String::from_utf8_lossy(&out.stderr).into_owned(),
        Err(CommandFailure::Cancelled { .. } | CommandFailure::Interrupted { .. }) => {
            return Err(JobError::Cancelled);
        }
        Err(failure) => return Ok(Err(format!("`nvcc --dryrun` failed: {failure}"))),
    };
    let paths = StepPaths {
        keep_dir: keep.0.clone(),
        object: tmp.object.clone(),
        depfile: tmp.depfile.clone(),
        symbol: "kbuild_namespace_check".into(),
        module_id: "_kbuild_namespace_check".into(),
    };
    let plan = match plan_steps(&printed, &paths) {
        Ok(plan) => plan,
        Err(why) => return Ok(Err(format!("nvcc's steps are not known: {why}"))),
    };
    let mut passes = Vec::new();
    for step in plan.steps.into_iter().filter(|s| {
        matches!(
            s.kind,
            StepKind::HostPreprocess | StepKind::DevicePreprocess
        )
    }) {
        let out = (step.spec.args.iter())
            .skip_while(|a| *a != "-o")
            .nth(1)
            .map(PathBuf::from);
        let Some(out) = out else {
            return Ok(Err(format!("nvcc's step `{}` names no output", step.label)));
        };
        passes.push((step.spec, out));
    }
    if passes.is_empty() {
        return Ok(Err("nvcc runs no preprocessor kbuild knows".into()));
    }
    Ok(Ok(passes))
}

/// nvcc's `--keep-dir` for the preprocesses: beside the unit's temporary object (pid-tagged, so
/// a killed build's is swept), removed with it.
struct StepsDir(PathBuf);

impl StepsDir {
    fn new(tmp_object: &Path) -> Self {
        let mut dir = tmp_object.as_os_str().to_owned();
        dir.push(".steps");
        let dir = PathBuf::from(dir);
        let dir = std::path::absolute(&dir).unwrap_or(dir);
        let _ = std::fs::create_dir_all(&dir);
        StepsDir(dir)
    }
}

impl Drop for StepsDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Whether `bytes` hold `id` anywhere.
fn holds(bytes: &[u8], id: &str) -> bool {
    !id.is_empty() && bytes.windows(id.len()).any(|w| w == id.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(list: &[&str]) -> Vec<String> {
        list.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn a_define_whose_value_names_the_namespace_makes_the_unit_depend_on_it() {
        let plain = words(&["g++", "-DTORCH_EXTENSION_NAME=<op namespace>", "-O3"]);
        assert_eq!(
            NamespaceUse::of_compile(&plain, None),
            NamespaceUse::Unchecked
        );
        let flag = words(&[
            "g++",
            "-DTORCH_EXTENSION_NAME=<op namespace>",
            "-DKERNEL_NS=TORCH_EXTENSION_NAME",
        ]);
        let used = NamespaceUse::of_compile(&flag, None);
        assert_eq!(
            used,
            NamespaceUse::CommandLine("-DKERNEL_NS=TORCH_EXTENSION_NAME".into())
        );
        assert_eq!(
            used.why(Path::to_path_buf).unwrap(),
            "its command line's `-DKERNEL_NS=TORCH_EXTENSION_NAME` names `TORCH_EXTENSION_NAME`"
        );
        let file = NamespaceUse::of_compile(&flag, Some("/p/b.cpp".into()));
        assert_eq!(file, NamespaceUse::Spelled("/p/b.cpp".into()));
        assert!(used.depends() && file.depends() && NamespaceUse::Preprocessed.depends());
        assert!(!NamespaceUse::Unused.depends() && !NamespaceUse::Unchecked.depends());
    }

    #[test]
    fn an_output_holds_the_id_anywhere_even_pasted_into_a_longer_name() {
        assert!(holds(
            b"void f__relu_cpu_0b016b8_CPU() {}",
            "_relu_cpu_0b016b8"
        ));
        assert!(!holds(
            b"void f() { \"_relu_cpu_0b016b\"; }",
            "_relu_cpu_0b016b8"
        ));
        assert!(!holds(b"", "_relu_cpu_0b016b8"));
    }
}
