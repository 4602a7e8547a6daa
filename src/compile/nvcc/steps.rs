//! nvcc's pipeline for one unit as separate steps, read from `nvcc --dryrun --keep`: the host
//! preprocess and `cudafe++`, per capability the device preprocess, `cicc` and `ptxas`, then
//! `fatbinary` and the host compile. kbuild runs them itself (see `split.rs`) so that
//!
//! - the host compile starts as soon as the front end that writes its stub is done, beside the
//!   other device passes and every `ptxas`, instead of after `fatbinary`;
//! - every device pass is a process of its own under the build's job slots, so the passes of
//!   all units share the cores instead of a fixed `--threads` share each;
//! - `cicc` can start beside `cudafe++` instead of after it: nvcc has `cudafe++` write the
//!   module id that both read (it names anonymous-namespace entities, so the host and device
//!   sides must agree), and kbuild writes that file itself before the steps run. Only the
//!   critical units do ([`Step::apart_from`], `split.rs`): both parse the whole unit, and
//!   every unit holding both at once adds up to gigabytes.
//!
//! The host compile needs the device code only as the bytes its registration points at (the
//! `.fatbin.c` its stub includes). kbuild writes that file itself, pointing at a hidden symbol,
//! and defines the symbol with the real fatbinary (`.incbin`) in a second object; a partial
//! link (`-r`) makes the two one object, so the rest of the build sees one object per unit.
//! The device code is byte for byte what nvcc embeds but for the module id in the names of
//! anonymous-namespace kernels (kbuild's is made from the unit's label, nvcc's from its path).
//!
//! Anything this does not recognise (relocatable device code, an unknown program, a missing
//! file name) is `Unsupported`, and the unit compiles with one nvcc as before.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::process::CommandSpec;
use crate::schedule::memory::StepName;
use crate::schedule::peaks::{self, Work};

/// What a step does (for ordering and messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepKind {
    HostPreprocess,
    Cudafe,
    DevicePreprocess,
    Cicc,
    Ptxas,
    Fatbinary,
    HostCompile,
    /// The fatbinary as an object (`.incbin`), by the host compiler.
    EmbedFatbin,
    /// The host object and the fatbinary's, partially linked into the unit's object.
    Combine,
}

impl StepKind {
    /// Rough relative cost, to start the steps on the longest remaining chain first.
    fn weight(self) -> u32 {
        match self {
            StepKind::HostPreprocess | StepKind::DevicePreprocess => 1,
            StepKind::Cicc | StepKind::Ptxas => 4,
            // Above a device pass: the device pass that writes the stub then starts first.
            StepKind::HostCompile => 5,
            // As long as a device pass or longer (25.8 s beside cicc's 22.5 s for
            // paged-attention's cache_kernels.cu) and on the host compile's path: above a
            // device pass, so it starts before the passes that no longer wait for it.
            StepKind::Cudafe => 5,
            StepKind::Fatbinary | StepKind::EmbedFatbin | StepKind::Combine => 0,
        }
    }
}

impl StepKind {
    /// What the step does as the memory model tells processes apart.
    fn work(self) -> Work {
        match self {
            StepKind::HostPreprocess | StepKind::DevicePreprocess => Work::Preprocess,
            StepKind::Cicc => Work::DeviceFrontEnd,
            StepKind::Cudafe => Work::HostFrontEnd,
            StepKind::Ptxas => Work::Assemble,
            StepKind::HostCompile => Work::HostCompile,
            StepKind::Fatbinary => Work::Fatbinary,
            StepKind::EmbedFatbin | StepKind::Combine => Work::Package,
        }
    }

    /// A step's peak memory guessed from `input`, the bytes it reads from earlier steps, for
    /// the memory gate to reserve before it first runs (then its peak is learned):
    /// [`peaks::guess`].
    pub fn peak_guess(self, input: u64) -> u64 {
        peaks::guess(self.work(), input)
    }
}

/// One process of the pipeline.
#[derive(Debug, Clone)]
pub struct Step {
    pub kind: StepKind,
    /// e.g. `cicc compute_90`, `ptxas sm_90`, `host compile`: how messages name it and the
    /// memory gate keys it.
    pub label: StepName,
    pub spec: CommandSpec,
    /// Steps that must finish first (indices into the plan's steps).
    pub deps: Vec<usize>,
    /// A step this one also waits for when its unit keeps its front ends apart
    /// (`compile::split`): `cudafe++`, for each `cicc`. Both parse the whole unit (torch's
    /// headers: 1.8 and 2.5 GB); one nvcc runs them one after the other.
    pub apart_from: Option<usize>,
    /// Length of the longest chain from this step to the end, by [`StepKind::weight`].
    pub priority: u32,
}

impl Step {
    /// A lone `ptxas sm_90` step of `program` with `args`, run in `dir`: what the tests of the
    /// passes that rewrite, split or race one start from.
    #[cfg(test)]
    pub(crate) fn lone_ptxas(program: &Path, args: &[&str], dir: &Path) -> Step {
        let mut spec = CommandSpec::new(program);
        spec.args(args);
        spec.cwd = Some(dir.to_path_buf());
        Step {
            kind: StepKind::Ptxas,
            label: "ptxas sm_90".into(),
            spec,
            deps: vec![],
            apart_from: None,
            priority: 0,
        }
    }

    /// The PTX file a `cicc` step writes (`-o`, against the step's directory); `None` for
    /// the other steps.
    pub fn ptx_output(&self) -> Option<PathBuf> {
        if self.kind != StepKind::Cicc {
            return None;
        }
        let argv: Vec<&str> = self.spec.args.iter().filter_map(|a| a.to_str()).collect();
        let at = argv.iter().position(|a| *a == "-o")?;
        let out = Path::new(argv.get(at + 1)?);
        Some(match &self.spec.cwd {
            Some(dir) if out.is_relative() => dir.join(out),
            _ => out.to_path_buf(),
        })
    }

    /// The bytes this step reads from earlier steps: the files in `keep_dir` its arguments
    /// name (as themselves or after an `=`, as fatbinary's `--image3=…,file=<cubin>`) that
    /// exist when it is about to start (its outputs do not exist yet).
    pub fn input_bytes(&self, keep_dir: &Path) -> u64 {
        let mut named: Vec<&Path> = Vec::new();
        for arg in &self.spec.args {
            let Some(arg) = arg.to_str() else { continue };
            let last = arg.rsplit('=').next().unwrap_or(arg);
            for candidate in [arg, last] {
                let path = Path::new(candidate);
                if path.starts_with(keep_dir) && !named.contains(&path) {
                    named.push(path);
                }
            }
        }
        named
            .iter()
            .filter_map(|p| std::fs::metadata(p).ok())
            .filter(|m| m.is_file())
            .map(|m| m.len())
            .sum()
    }

    /// The peak memory to reserve for this step before it was ever measured
    /// ([`StepKind::peak_guess`] of its [`Step::input_bytes`]).
    pub fn peak_guess(&self, keep_dir: &Path) -> u64 {
        self.kind.peak_guess(self.input_bytes(keep_dir))
    }
}

/// Where the steps write, chosen by the caller.
#[derive(Debug, Clone)]
pub struct StepPaths {
    /// nvcc's `--keep-dir`: the intermediate files (absolute).
    pub keep_dir: PathBuf,
    /// The unit's object (what the combine step writes).
    pub object: PathBuf,
    /// The dependency file (written by the host preprocess, `-MD -MF`).
    pub depfile: PathBuf,
    /// The hidden symbol that holds the device code.
    pub symbol: String,
    /// The module id `cudafe++` and every `cicc` read (an identifier fragment, unique per
    /// unit): kbuild writes it, so neither waits for the other.
    pub module_id: String,
}

/// The steps in an order that respects their dependencies, and the files kbuild writes.
#[derive(Debug, Clone)]
pub struct StepPlan {
    pub steps: Vec<Step>,
    /// The `.fatbin.c` the host stub includes, and its text.
    pub fatbin_c: (PathBuf, String),
    /// The assembler source of the fatbinary's object, and its text.
    pub fatbin_asm: (PathBuf, String),
    /// The module id file `cudafe++` would have written, and [`StepPaths::module_id`]; `None`
    /// when nvcc has it write none.
    pub module_id: Option<(PathBuf, String)>,
}

/// Why a unit's nvcc pipeline is not split (it compiles with one nvcc).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unsupported(pub String);

fn unsupported<T>(why: impl Into<String>) -> Result<T, Unsupported> {
    Err(Unsupported(why.into()))
}

/// The steps `nvcc --dryrun --keep --keep-dir <paths.keep_dir>` printed (its stderr).
pub fn plan_steps(dryrun: &str, paths: &StepPaths) -> Result<StepPlan, Unsupported> {
    let mut vars: HashMap<String, String> = HashMap::new();
    let mut env: Vec<(OsString, OsString)> = Vec::new();
    let mut parsed: Vec<(StepKind, StepName, Vec<String>)> = Vec::new();
    for line in dryrun.lines() {
        let Some(body) = line.strip_prefix("#$ ") else {
            return unsupported(format!("nvcc --dryrun printed `{line}`"));
        };
        if let Some((name, value)) = assignment(body) {
            let value = shlex::split(value).map_or_else(|| value.to_string(), |w| w.join(" "));
            env.push((name.into(), value.clone().into()));
            vars.insert(name.to_string(), value);
            continue;
        }
        if body.starts_with("-- Filter Dependencies --") || body.starts_with("rm ") {
            continue; // kbuild writes the depfile itself and removes the whole keep dir
        }
        let expanded = expand(body, &vars)?;
        let Some(argv) = shlex::split(&expanded).filter(|a| !a.is_empty()) else {
            return unsupported(format!("cannot split the nvcc step `{body}` into words"));
        };
        let argv = without_redirections(argv, body)?;
        if argv
            .iter()
            .any(|a| a == "--device-c" || a == "-dc" || a == "--device-w")
        {
            return unsupported("relocatable device code (`-rdc`)");
        }
        let (kind, label) = classify(&argv)?;
        parsed.push((kind, label, argv));
    }
    let path_dirs = vars.get("PATH").cloned().unwrap_or_default();
    build_plan(parsed, &env, &path_dirs, paths)
}

/// The words without the shell's output redirections nvcc adds to a host compiler step it
/// runs without `-ccbin` (`> FILE 2>FILE`): kbuild captures both streams itself. Any other
/// redirection or pipe is not understood.
fn without_redirections(argv: Vec<String>, body: &str) -> Result<Vec<String>, Unsupported> {
    let mut words = Vec::with_capacity(argv.len());
    let mut iter = argv.into_iter();
    while let Some(word) = iter.next() {
        let unquoted = body.contains(&format!(" {word}"));
        match word.as_str() {
            ">" | "1>" | "2>" if unquoted => {
                iter.next();
            }
            w if unquoted && (w.starts_with("2>") || w.starts_with("1>")) => {}
            w if unquoted && (w.starts_with(['>', '<', '|']) || w == "&&" || w == ";") => {
                return unsupported(format!("the nvcc step `{body}` redirects or pipes"));
            }
            _ => words.push(word),
        }
    }
    Ok(words)
}

/// `NAME=value` (nvcc's environment for its steps).
fn assignment(body: &str) -> Option<(&str, &str)> {
    let (name, value) = body.split_once('=')?;
    let ident = !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    ident.then_some((name, value))
}

/// `$NAME` replaced by nvcc's value for it; any other `$` is not understood.
fn expand(body: &str, vars: &HashMap<String, String>) -> Result<String, Unsupported> {
    let mut out = String::with_capacity(body.len());
    let mut rest = body;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        match vars.get(&after[..len]) {
            Some(value) if len > 0 && !value.contains(['"', '\'', '\\', '$']) => {
                out.push_str(value)
            }
            _ => return unsupported(format!("the nvcc step `{body}` uses a shell variable")),
        }
        rest = &after[len..];
    }
    out.push_str(rest);
    Ok(out)
}

fn classify(argv: &[String]) -> Result<(StepKind, StepName), Unsupported> {
    let name = Path::new(&argv[0])
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let value_of = |flag: &str| value_after(argv, flag).unwrap_or_default().to_string();
    Ok(match name.as_str() {
        "cudafe++" => (StepKind::Cudafe, StepName::new("cudafe++")),
        "cicc" => (
            StepKind::Cicc,
            StepName::for_capability("cicc", &value_of("-arch")),
        ),
        "ptxas" => {
            let arch = argv.iter().find_map(|a| a.strip_prefix("-arch="));
            let name = StepName::for_capability("ptxas", arch.unwrap_or(""));
            (StepKind::Ptxas, name)
        }
        "fatbinary" => (StepKind::Fatbinary, StepName::new("fatbinary")),
        "nvlink" | "nvcc" | "nvdisasm" | "bin2c" => {
            return unsupported(format!("nvcc runs `{name}` for this unit"));
        }
        _ if argv.iter().any(|a| a == "-E") => {
            match argv.iter().find_map(|a| a.strip_prefix("-D__CUDA_ARCH__=")) {
                Some(arch) => (
                    StepKind::DevicePreprocess,
                    StepName::for_capability("preprocess", arch),
                ),
                None => (StepKind::HostPreprocess, StepName::new("host preprocess")),
            }
        }
        _ if argv.iter().any(|a| a == "-c") => {
            (StepKind::HostCompile, StepName::new("host compile"))
        }
        _ => {
            return unsupported(format!(
                "nvcc runs `{}`, which kbuild does not know",
                argv[0]
            ));
        }
    })
}

/// The word after `flag` (`-o FILE`, `--gen_c_file_name FILE`).
fn value_after<'a>(argv: &'a [String], flag: &str) -> Option<&'a str> {
    let at = argv.iter().position(|a| a == flag)?;
    argv.get(at + 1).map(String::as_str)
}

/// The value of `--flag=VALUE`.
fn value_in<'a>(argv: &'a [String], flag: &str) -> Option<&'a str> {
    argv.iter()
        .find_map(|a| a.strip_prefix(flag).and_then(|r| r.strip_prefix('=')))
}

/// Files a step writes, as nvcc names them (cicc's `.cudafe1.c` and `.cudafe1.gpu` too, which
/// no later step reads: the device step cache keeps everything a pass writes).
pub(super) fn outputs(kind: StepKind, argv: &[String]) -> Vec<String> {
    let mut out: Vec<&str> = Vec::new();
    match kind {
        StepKind::Cudafe => {
            out.extend(value_after(argv, "--gen_c_file_name"));
            if argv.iter().any(|a| a == "--gen_module_id_file") {
                out.extend(value_after(argv, "--module_id_file_name"));
            }
        }
        StepKind::Cicc => {
            out.extend(value_after(argv, "-o"));
            out.extend(value_after(argv, "--stub_file_name"));
            out.extend(value_after(argv, "--gen_c_file_name"));
            out.extend(value_after(argv, "--gen_device_file_name"));
        }
        StepKind::Fatbinary => out.extend(value_in(argv, "--create")),
        _ => out.extend(value_after(argv, "-o")),
    }
    out.into_iter().map(str::to_string).collect()
}

/// Files a step may read: every word, the value of `--flag=VALUE`, and fatbinary's `file=`.
fn mentions(argv: &[String]) -> Vec<&str> {
    let mut words = Vec::new();
    for arg in &argv[1..] {
        words.push(arg.as_str());
        if let Some((_, value)) = arg.split_once('=') {
            words.push(value);
        }
        if let Some((_, file)) = arg.rsplit_once("file=") {
            words.push(file);
        }
    }
    words
}

fn build_plan(
    parsed: Vec<(StepKind, StepName, Vec<String>)>,
    env: &[(OsString, OsString)],
    path_dirs: &str,
    paths: &StepPaths,
) -> Result<StepPlan, Unsupported> {
    let host_stub = check_shape(&parsed)?;
    let chain = chain_steps(parsed, env, path_dirs, paths, &host_stub)?;
    let Chain {
        mut steps,
        fatbinary: (fatbinary, fatbin, fatbin_c),
        host: (host, host_compiler),
        module_id,
    } = chain;
    let Some(fatbin) = fatbin else {
        return unsupported("fatbinary names no `--create` file");
    };
    let fatbin = std::path::absolute(&fatbin).unwrap_or(fatbin);
    let fatbin_text = fatbin.to_str().filter(|s| !s.contains(['"', '\\', '\n']));
    let Some(fatbin_text) = fatbin_text else {
        return unsupported("the fatbinary's path cannot be written in an assembler string");
    };
    let asm = paths.keep_dir.join("fatbin.s");
    add_embed_and_combine(&mut steps, &asm, paths, &host_compiler, (fatbinary, host));
    set_priorities(&mut steps);
    Ok(StepPlan {
        steps,
        fatbin_c: (fatbin_c, fatbin_c_text(&paths.symbol)),
        fatbin_asm: (asm, fatbin_asm_text(&paths.symbol, fatbin_text)),
        module_id: module_id.map(|file| (file, paths.module_id.clone())),
    })
}

/// The pipeline kbuild knows: one host preprocess, cudafe++, fatbinary and host compile, at
/// least one device pass, and a stub file named by cudafe++ (returned).
fn check_shape(parsed: &[(StepKind, StepName, Vec<String>)]) -> Result<OsString, Unsupported> {
    let count = |kind| parsed.iter().filter(|(k, ..)| *k == kind).count();
    for kind in [
        StepKind::HostPreprocess,
        StepKind::Cudafe,
        StepKind::Fatbinary,
        StepKind::HostCompile,
    ] {
        if count(kind) != 1 {
            return unsupported(format!("nvcc runs {} {kind:?} steps, not one", count(kind)));
        }
    }
    if count(StepKind::Cicc) == 0 {
        return unsupported("nvcc runs no device pass");
    }
    let cudafe = parsed.iter().find(|(k, ..)| *k == StepKind::Cudafe);
    let host_stub = cudafe
        .and_then(|(_, _, argv)| value_after(argv, "--stub_file_name"))
        .and_then(|s| Path::new(s).file_name())
        .map(|s| s.to_os_string());
    match host_stub {
        Some(stub) => Ok(stub),
        None => unsupported("cudafe++ names no stub file"),
    }
}

/// nvcc's steps as kbuild runs them, with what the last two steps need.
struct Chain {
    steps: Vec<Step>,
    /// The fatbinary step's index, its `--create` file and the `.fatbin.c` it would write.
    fatbinary: (usize, Option<PathBuf>, PathBuf),
    /// The host compile's index and compiler.
    host: (usize, PathBuf),
    /// The module id file `cudafe++` no longer writes (kbuild does).
    module_id: Option<PathBuf>,
}

/// Each step depends on the steps that write a file it mentions; the host preprocess also
/// writes the unit's dependency file, `cudafe++` reads the module id instead of writing it and
/// the fatbinary writes no `.fatbin.c` (kbuild writes both), and the host compile writes
/// `host.o` once the device pass that writes its stub is done.
fn chain_steps(
    parsed: Vec<(StepKind, StepName, Vec<String>)>,
    env: &[(OsString, OsString)],
    path_dirs: &str,
    paths: &StepPaths,
    host_stub: &OsString,
) -> Result<Chain, Unsupported> {
    let mut produced: HashMap<String, usize> = HashMap::new();
    let mut steps: Vec<Step> = Vec::new();
    let mut fatbinary = None;
    let mut host = None;
    let mut module_id = None;
    let mut cudafe = None;
    let host_object = paths.keep_dir.join("host.o");
    for (kind, label, mut argv) in parsed {
        let mut deps: Vec<usize> = mentions(&argv)
            .into_iter()
            .filter_map(|w| produced.get(w).copied())
            .collect();
        match kind {
            StepKind::HostPreprocess => {
                argv.extend(["-MD".into(), "-MF".into()]);
                argv.push(paths.depfile.to_string_lossy().into_owned());
            }
            StepKind::Cudafe => {
                module_id = read_module_id(&mut argv)?;
                cudafe = Some(steps.len());
            }
            StepKind::Fatbinary => {
                let Some(at) = argv
                    .iter()
                    .position(|a| a.starts_with("--embedded-fatbin="))
                else {
                    return unsupported("fatbinary writes no `.fatbin.c`");
                };
                let embedded = argv.remove(at);
                let fatbin_c = PathBuf::from(&embedded["--embedded-fatbin=".len()..]);
                let fatbin = value_in(&argv, "--create").map(PathBuf::from);
                fatbinary = Some((steps.len(), fatbin, fatbin_c));
            }
            StepKind::HostCompile => {
                let Some(at) = argv.iter().position(|a| a == "-o") else {
                    return unsupported("the host compile names no output");
                };
                argv.truncate(at + 1);
                argv.push(host_object.to_string_lossy().into_owned());
                deps.push(stub_writer(&produced, &steps, host_stub)?);
                host = Some((steps.len(), PathBuf::from(&argv[0])));
            }
            _ => {}
        }
        for out in outputs(kind, &argv) {
            produced.insert(out, steps.len());
        }
        deps.sort_unstable();
        deps.dedup();
        steps.push(Step {
            kind,
            label,
            spec: spec_for(&argv, env, path_dirs),
            deps,
            apart_from: cudafe.filter(|_| kind == StepKind::Cicc),
            priority: 0,
        });
    }
    // Exactly one of each ran through the loop (counted by `check_shape`).
    let (Some(fatbinary), Some(host)) = (fatbinary, host) else {
        return unsupported("nvcc runs no fatbinary or host compile");
    };
    Ok(Chain {
        steps,
        fatbinary,
        host,
        module_id,
    })
}

/// Makes `cudafe++` read its module id, as `cicc` does, instead of writing it (drops
/// `--gen_module_id_file`, so `cicc` no longer depends on it): the file kbuild must write.
fn read_module_id(cudafe: &mut Vec<String>) -> Result<Option<PathBuf>, Unsupported> {
    let Some(at) = cudafe.iter().position(|a| a == "--gen_module_id_file") else {
        return Ok(None);
    };
    let Some(file) = value_after(cudafe, "--module_id_file_name") else {
        return unsupported("cudafe++ writes a module id to no named file");
    };
    let file = PathBuf::from(file);
    cudafe.remove(at);
    Ok(Some(file))
}

/// The device pass that writes the stub the host code includes: the one for the capability
/// nvcc compiles the host side for.
fn stub_writer(
    produced: &HashMap<String, usize>,
    steps: &[Step],
    host_stub: &OsString,
) -> Result<usize, Unsupported> {
    let writer = produced.iter().find(|(name, i)| {
        steps[**i].kind == StepKind::Cicc
            && Path::new(name).file_name() == Some(host_stub.as_os_str())
    });
    match writer {
        Some((_, &writer)) => Ok(writer),
        None => unsupported("no device pass writes the host stub"),
    }
}

/// The two steps nvcc does not have: assemble the fatbinary's bytes into an object (after
/// `fatbinary`), then partially link it with the host object into the unit's object (after
/// both).
fn add_embed_and_combine(
    steps: &mut Vec<Step>,
    asm: &Path,
    paths: &StepPaths,
    host_compiler: &Path,
    (fatbinary, host): (usize, usize),
) {
    let host_object = paths.keep_dir.join("host.o");
    let fatbin_object = paths.keep_dir.join("fatbin.o");
    let mut embed = CommandSpec::new(host_compiler);
    embed
        .args(["-c", "-x", "assembler"])
        .arg(asm)
        .arg("-o")
        .arg(&fatbin_object);
    steps.push(Step {
        kind: StepKind::EmbedFatbin,
        label: StepName::new("embed fatbinary"),
        spec: embed,
        deps: vec![fatbinary],
        apart_from: None,
        priority: 0,
    });
    let mut combine = CommandSpec::new(host_compiler);
    combine
        .args(["-r", "-nostdlib"])
        .arg(&host_object)
        .arg(&fatbin_object)
        .arg("-o")
        .arg(&paths.object);
    steps.push(Step {
        kind: StepKind::Combine,
        label: StepName::new("combine"),
        spec: combine,
        deps: vec![host, steps.len() - 1],
        apart_from: None,
        priority: 0,
    });
}

/// The command for one step: nvcc's environment, the program found on nvcc's `PATH`.
fn spec_for(argv: &[String], env: &[(OsString, OsString)], path_dirs: &str) -> CommandSpec {
    let program = if argv[0].contains('/') {
        PathBuf::from(&argv[0])
    } else {
        std::env::split_paths(path_dirs)
            .map(|dir| dir.join(&argv[0]))
            .find(|p| p.is_file())
            .unwrap_or_else(|| PathBuf::from(&argv[0]))
    };
    let mut spec = CommandSpec::new(program);
    spec.args(&argv[1..]);
    spec.env = env.to_vec();
    spec
}

/// Each step's longest chain to the end (steps come in dependency order, so backwards works).
fn set_priorities(steps: &mut [Step]) {
    for i in (0..steps.len()).rev() {
        let after = (i + 1..steps.len())
            .filter(|&j| steps[j].deps.contains(&i))
            .map(|j| steps[j].priority)
            .max()
            .unwrap_or(0);
        steps[i].priority = after + steps[i].kind.weight();
    }
}

/// What the host stub includes in place of nvcc's `.fatbin.c`: the same registration record,
/// pointing at `symbol` instead of inline data.
fn fatbin_c_text(symbol: &str) -> String {
    format!(
        r#"/* Written by kbuild: the device code is `{symbol}`, defined in the unit's second object. */
#ifndef __SKIP_INTERNAL_FATBINARY_HEADERS
#include "fatbinary_section.h"
#endif
#define __CUDAFATBINSECTION  ".nvFatBinSegment"
#define __CUDAFATBINDATASECTION  ".nv_fatbin"
#ifdef __cplusplus
extern "C" {{
#endif
extern const unsigned long long {symbol}[] __attribute__((visibility("hidden")));
static const __fatBinC_Wrapper_t __fatDeviceText __attribute__ ((aligned (8))) __attribute__ ((section (__CUDAFATBINSECTION)))=
	{{ 0x466243b1, 1, {symbol}, 0 }};
#ifdef __cplusplus
}}
#endif
"#
    )
}

/// The fatbinary as a hidden symbol in nvcc's data section, 8-aligned as nvcc places it.
fn fatbin_asm_text(symbol: &str, fatbin: &str) -> String {
    format!(
        ".section .nv_fatbin, \"a\"\n.align 8\n.globl {symbol}\n.hidden {symbol}\n{symbol}:\n\
         .incbin \"{fatbin}\"\n.section .note.GNU-stack,\"\",@progbits\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// nvcc 13.2's `--dryrun --keep --keep-dir /k` for two capabilities, the second with PTX
    /// (include and define flags shortened).
    const DRYRUN: &str = r#"#$ _NVVM_BRANCH_=nvvm
#$ _SPACE_= 
#$ CICC_PATH=/cuda/bin/../nvvm/bin
#$ PATH=/cuda/bin/../nvvm/bin:/cuda/bin:/usr/bin
#$ INCLUDES="-I/cuda/bin/../include"  
#$ "/usr/bin"/c++ -std=c++20 -D__CUDA_ARCH__=750 -D__CUDA_ARCH_LIST__=750,900 -E -x c++ -fPIC -O3 -include "cuda_runtime.h" -m64 "/src/a.cu" -o "/k/a.compute_75.cpp1.ii" 
#$ "/usr/bin"/c++ -std=c++20 -D__CUDA_ARCH__=900 -D__CUDA_ARCH_LIST__=750,900 -E -x c++ -fPIC -O3 -include "cuda_runtime.h" -m64 "/src/a.cu" -o "/k/a.compute_90.cpp1.ii" 
#$ "/usr/bin"/c++ -std=c++20 -D__CUDA_ARCH_LIST__=750,900 -E -x c++ -fPIC -O3 -include "cuda_runtime.h" -m64 "/src/a.cu" -o "/k/a.cpp4.ii" 
#$ -- Filter Dependencies -- > /b/a.d
#$ cudafe++ --c++20 --orig_src_file_name "/src/a.cu" --gen_c_file_name "/k/a.compute_90.cudafe1.cpp" --stub_file_name "a.compute_90.cudafe1.stub.c" --gen_module_id_file --module_id_file_name "/k/a.module_id" "/k/a.cpp4.ii" 
#$ "$CICC_PATH/cicc" --c++20 -arch compute_75 -m64 --include_file_name "a.fatbin.c" -tused --module_id_file_name "/k/a.module_id" --gen_c_file_name "/k/a.compute_75.cudafe1.c" --stub_file_name "/k/a.compute_75.cudafe1.stub.c" --gen_device_file_name "/k/a.compute_75.cudafe1.gpu"  "/k/a.compute_75.cpp1.ii" -o "/k/a.compute_75.ptx"
#$ ptxas -arch=sm_75 -m64  "/k/a.compute_75.ptx"  -o "/k/a.compute_75.cubin" 
#$ "$CICC_PATH/cicc" --c++20 -arch compute_90 -m64 --include_file_name "a.fatbin.c" -tused --module_id_file_name "/k/a.module_id" --gen_c_file_name "/k/a.compute_90.cudafe1.c" --stub_file_name "/k/a.compute_90.cudafe1.stub.c" --gen_device_file_name "/k/a.compute_90.cudafe1.gpu"  "/k/a.compute_90.cpp1.ii" -o "/k/a.compute_90.ptx"
#$ ptxas -arch=sm_90 -m64  "/k/a.compute_90.ptx"  -o "/k/a.compute_90.sm_90.cubin" 
#$ fatbinary --create="/k/a.fatbin" -64 --cicc-cmdline="-ftz=0 -prec_div=1 " "--image3=kind=elf,sm=75,file=/k/a.compute_75.cubin" "--image3=kind=elf,sm=90,file=/k/a.compute_90.sm_90.cubin" "--image3=kind=ptx,sm=90,file=/k/a.compute_90.ptx" --embedded-fatbin="/k/a.fatbin.c" 
#$ rm /k/a.fatbin
#$ "/usr/bin"/c++ -std=c++20 -D__CUDA_ARCH__=900 -c -x c++ -fPIC -O3 -Wno-psabi -m64 "/k/a.compute_90.cudafe1.cpp" -o "/b/a.o" 
"#;

    fn paths() -> StepPaths {
        StepPaths {
            keep_dir: "/k".into(),
            object: "/b/a.o".into(),
            depfile: "/b/a.d".into(),
            symbol: "kbuild_fatbin_test".into(),
            module_id: "_0123abcd_4_a_cu_4567cdef".into(),
        }
    }

    fn step<'a>(plan: &'a StepPlan, label: &str) -> (usize, &'a Step) {
        let i = plan.steps.iter().position(|s| s.label.to_string() == label);
        let i = i.unwrap_or_else(|| panic!("no step `{label}`"));
        (i, &plan.steps[i])
    }

    fn args(step: &Step) -> Vec<String> {
        step.spec
            .args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn a_step_never_measured_is_guessed_from_the_files_it_reads_in_the_keep_dir() {
        let dir = tempfile::tempdir().unwrap();
        let keep = dir.path().join("k");
        std::fs::create_dir(&keep).unwrap();
        let k = keep.to_str().unwrap();
        let dryrun = DRYRUN
            .replace("\"/k/", &format!("\"{k}/"))
            .replace("=/k/", &format!("={k}/"));
        let plan = plan_steps(
            &dryrun,
            &StepPaths {
                keep_dir: keep.clone(),
                ..paths()
            },
        )
        .unwrap();
        let write = |name: &str, bytes: usize| std::fs::write(keep.join(name), vec![b'x'; bytes]);
        let guess = |label: &str| step(&plan, label).1.peak_guess(&keep);
        const BASE_PEAK: u64 = 64 << 20;
        const PREPROCESS_PEAK: u64 = 512 << 20;
        // Before anything ran: the preprocessors' fixed guess, a reader's base alone.
        assert_eq!(guess("preprocess 900"), PREPROCESS_PEAK);
        assert_eq!(guess("cicc compute_90"), BASE_PEAK);
        write("a.compute_90.cpp1.ii", 1_000_000).unwrap();
        write("a.cpp4.ii", 2_000_000).unwrap();
        // cicc reads its preprocessed unit (and the small module id), not what it writes.
        let cicc = step(&plan, "cicc compute_90").1;
        assert_eq!(cicc.input_bytes(&keep), 1_000_000);
        assert_eq!(guess("cicc compute_90"), BASE_PEAK + 160 * 1_000_000);
        assert_eq!(guess("cudafe++"), BASE_PEAK + 128 * 2_000_000);
        write("a.compute_90.ptx", 7_000).unwrap();
        assert_eq!(guess("ptxas sm_90"), BASE_PEAK + 128 * 7_000);
        // fatbinary names its inputs inside `--image3=…,file=<path>`.
        write("a.compute_75.cubin", 3_000).unwrap();
        write("a.compute_90.sm_90.cubin", 5_000).unwrap();
        assert_eq!(step(&plan, "fatbinary").1.input_bytes(&keep), 15_000);
    }

    #[test]
    fn the_dryrun_becomes_steps_linked_by_the_files_they_pass() {
        let plan = plan_steps(DRYRUN, &paths()).unwrap();
        let labels: Vec<String> = plan.steps.iter().map(|s| s.label.to_string()).collect();
        assert_eq!(
            labels,
            [
                "preprocess 750",
                "preprocess 900",
                "host preprocess",
                "cudafe++",
                "cicc compute_75",
                "ptxas sm_75",
                "cicc compute_90",
                "ptxas sm_90",
                "fatbinary",
                "host compile",
                "embed fatbinary",
                "combine"
            ]
        );
        let deps = |label| step(&plan, label).1.deps.clone();
        let at = |label| step(&plan, label).0;
        assert_eq!(deps("cudafe++"), [at("host preprocess")]);
        // A device pass needs its preprocessed source only: kbuild writes the module id.
        assert_eq!(deps("cicc compute_75"), [at("preprocess 750")]);
        assert_eq!(deps("cicc compute_90"), [at("preprocess 900")]);
        assert_eq!(deps("ptxas sm_90"), [at("cicc compute_90")]);
        assert_eq!(
            deps("fatbinary"),
            [at("ptxas sm_75"), at("cicc compute_90"), at("ptxas sm_90")]
        );
        // The host compile waits for cudafe++ and the device pass that writes its stub only:
        // not for ptxas or fatbinary.
        assert_eq!(
            deps("host compile"),
            [at("cudafe++"), at("cicc compute_90")]
        );
        assert_eq!(deps("embed fatbinary"), [at("fatbinary")]);
        assert_eq!(deps("combine"), [at("host compile"), at("embed fatbinary")]);
    }

    #[test]
    fn kbuild_writes_the_module_id_that_cudafe_and_every_cicc_read() {
        let plan = plan_steps(DRYRUN, &paths()).unwrap();
        let cudafe = args(step(&plan, "cudafe++").1);
        assert!(
            !cudafe.iter().any(|a| a == "--gen_module_id_file"),
            "{cudafe:?}"
        );
        let reads = |argv: &[String]| value_after(argv, "--module_id_file_name").map(String::from);
        assert_eq!(reads(&cudafe).as_deref(), Some("/k/a.module_id"));
        for (pass, preprocess) in [
            ("cicc compute_75", "preprocess 750"),
            ("cicc compute_90", "preprocess 900"),
        ] {
            let (_, cicc) = step(&plan, pass);
            assert_eq!(reads(&args(cicc)).as_deref(), Some("/k/a.module_id"));
            assert_eq!(
                cicc.deps,
                [step(&plan, preprocess).0],
                "{pass} waits for cudafe++"
            );
        }
        assert_eq!(
            plan.module_id,
            Some(("/k/a.module_id".into(), "_0123abcd_4_a_cu_4567cdef".into()))
        );
        // nvcc asking for no module id: none to write.
        let none = DRYRUN.replace("--gen_module_id_file ", "");
        assert_eq!(plan_steps(&none, &paths()).unwrap().module_id, None);
    }

    #[test]
    fn a_module_id_cudafe_writes_to_no_named_file_is_not_split() {
        let unnamed = DRYRUN.replacen("--module_id_file_name \"/k/a.module_id\" ", "", 1);
        assert!(unnamed.contains("--gen_module_id_file \"/k/a.cpp4.ii\""));
        let why = plan_steps(&unnamed, &paths()).unwrap_err();
        assert!(why.0.contains("module id"), "{why}");
    }

    #[test]
    fn the_steps_run_nvccs_programs_in_nvccs_environment() {
        let plan = plan_steps(DRYRUN, &paths()).unwrap();
        let cicc = step(&plan, "cicc compute_90").1;
        assert_eq!(cicc.spec.program, Path::new("/cuda/bin/../nvvm/bin/cicc"));
        let env: HashMap<_, _> = cicc.spec.env.iter().cloned().collect();
        assert_eq!(env[&OsString::from("CICC_PATH")], "/cuda/bin/../nvvm/bin");
        assert_eq!(env[&OsString::from("INCLUDES")], "-I/cuda/bin/../include");
        let host = step(&plan, "host compile").1;
        assert_eq!(host.spec.program, Path::new("/usr/bin/c++"));
    }

    #[test]
    fn kbuild_writes_the_depfile_the_fatbin_source_and_the_unit_object_itself() {
        let plan = plan_steps(DRYRUN, &paths()).unwrap();
        let pre = args(step(&plan, "host preprocess").1);
        assert_eq!(pre[pre.len() - 3..], ["-MD", "-MF", "/b/a.d"]);
        let fatbinary = args(step(&plan, "fatbinary").1);
        assert!(!fatbinary.iter().any(|a| a.starts_with("--embedded-fatbin")));
        let host = args(step(&plan, "host compile").1);
        assert_eq!(host[host.len() - 2..], ["-o", "/k/host.o"]);
        let combine = args(step(&plan, "combine").1);
        assert_eq!(
            combine,
            [
                "-r",
                "-nostdlib",
                "/k/host.o",
                "/k/fatbin.o",
                "-o",
                "/b/a.o"
            ]
        );
        assert_eq!(plan.fatbin_c.0, Path::new("/k/a.fatbin.c"));
        assert!(
            plan.fatbin_c
                .1
                .contains("{ 0x466243b1, 1, kbuild_fatbin_test, 0 }")
        );
        assert!(plan.fatbin_asm.1.contains(".incbin \"/k/a.fatbin\""));
        assert!(plan.fatbin_asm.1.contains(".hidden kbuild_fatbin_test"));
    }

    #[test]
    fn the_longest_chain_starts_first() {
        let plan = plan_steps(DRYRUN, &paths()).unwrap();
        let p = |label| step(&plan, label).1.priority;
        assert!(p("host preprocess") > p("preprocess 750"));
        assert!(
            p("cicc compute_90") > p("cicc compute_75"),
            "it also feeds the host compile"
        );
        assert!(p("cudafe++") > p("cicc compute_90"));
    }

    #[test]
    fn relocatable_device_code_and_unknown_programs_are_not_split() {
        let rdc = DRYRUN.replace("-tused", "-tused --device-c");
        assert_eq!(
            plan_steps(&rdc, &paths()).unwrap_err(),
            Unsupported("relocatable device code (`-rdc`)".into())
        );
        let nvlink = format!("{DRYRUN}#$ nvlink --arch=sm_90 /k/a.cubin\n");
        let why = plan_steps(&nvlink, &paths()).unwrap_err();
        assert!(why.0.contains("nvlink"), "{why}");
        let warned = format!("nvcc warning : something\n{DRYRUN}");
        assert!(plan_steps(&warned, &paths()).is_err());
        let shell = DRYRUN.replace("$CICC_PATH/cicc", "$UNKNOWN/cicc");
        assert!(plan_steps(&shell, &paths()).is_err());
    }

    #[test]
    fn output_redirections_nvcc_adds_without_ccbin_are_dropped() {
        let redirected = DRYRUN.replace(
            "-o \"/k/a.cpp4.ii\" ",
            "-o \"/k/a.cpp4.ii\" > /tmp/tmpxft_1_stdout 2>/tmp/tmpxft_1_stderr",
        );
        let plan = plan_steps(&redirected, &paths()).unwrap();
        let pre = args(step(&plan, "host preprocess").1);
        assert!(
            !pre.iter().any(|a| a.contains("tmpxft") || a.contains('>')),
            "{pre:?}"
        );
        assert_eq!(
            pre[pre.len() - 5..],
            ["-o", "/k/a.cpp4.ii", "-MD", "-MF", "/b/a.d"]
        );
        let piped = DRYRUN.replace("-o \"/k/a.cpp4.ii\" ", "-o \"/k/a.cpp4.ii\" | tee x");
        assert!(plan_steps(&piped, &paths()).is_err());
    }

    #[test]
    fn a_host_stub_no_device_pass_writes_is_not_split() {
        let other = DRYRUN.replace(
            "--stub_file_name \"a.compute_90.cudafe1.stub.c\"",
            "--stub_file_name \"a.host.stub.c\"",
        );
        let why = plan_steps(&other, &paths()).unwrap_err();
        assert!(why.0.contains("stub"), "{why}");
    }
}
