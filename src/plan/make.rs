//! Turning a validated project and a discovered toolchain into a `BuildPlan`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::{BuildPlan, CompileJob, Gencode, Lang, LinkJob, Skipped, VariantPlan};
use crate::config::{Backend, Capability, DType, Framework, Kernel, Project};
use crate::hint::Hint;
use crate::toolchain::{Cxx, Nvcc, TorchInfo};

/// The capabilities built when neither `[kbuild.cuda-capabilities]` nor a kernel names any
/// (the common set of current data-centre and consumer GPUs, filtered by what nvcc supports).
pub const DEFAULT_CAPABILITIES: &[(u32, u32)] =
    &[(7, 5), (8, 0), (8, 6), (8, 9), (9, 0), (10, 0), (12, 0)];

/// Why a plan cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("`--backend {backend}` is not in build.toml (`backends = [{listed}]`)")]
    BackendNotInProject { backend: String, listed: String },
    #[error("`--backend {backend}`: kbuild builds only `cpu` and `cuda`")]
    BackendUnsupported { backend: String },
    #[error("the `cuda` backend needs a CUDA build of torch, but torch {torch} is CPU-only")]
    CpuOnlyTorch { torch: String },
    #[error(
        "{location}: kernel `{kernel}`: nvcc {nvcc} cannot build capability {capability} (it supports {supported})"
    )]
    CapabilityUnsupported {
        /// Where the capability is written in build.toml.
        location: crate::config::Location,
        kernel: String,
        capability: Capability,
        nvcc: String,
        supported: String,
    },
    #[error("`[tvm-ffi]` kernels are not built by kbuild: it builds Torch extensions")]
    TvmFfiUnsupported,
    #[error("nothing to build: no backend of build.toml can be built here ({reasons})")]
    NothingToBuild { reasons: String },
    #[error("cannot read `{path}` to compute the source hash: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl Hint for PlanError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            PlanError::BackendNotInProject { .. } | PlanError::BackendUnsupported { .. } => {
                "run `kbuild list-variants` to see what this project builds here".into()
            }
            PlanError::CpuOnlyTorch { .. } => format!(
                "install a CUDA build of torch (`{}`), or build only the CPU variant with `--backend cpu`",
                crate::toolchain::INSTALL_HINT
            ),
            PlanError::CapabilityUnsupported { .. } => {
                "remove the capability from build.toml or use an nvcc that supports it".into()
            }
            PlanError::TvmFfiUnsupported => {
                "build this kernel with HF's kernel-builder, or port it to `[torch]`".into()
            }
            PlanError::NothingToBuild { .. } => {
                "add `cpu` or `cuda` to `backends` in build.toml, or install the missing toolchain"
                    .into()
            }
            PlanError::Io { .. } => return None,
        })
    }
}

/// The discovered tools a plan is made for.
#[derive(Debug, Clone)]
pub struct Tools {
    /// `None` for noarch projects, which need no toolchain.
    pub torch: Option<TorchInfo>,
    /// Needed for every compiled backend (it links the extension).
    pub cxx: Option<Cxx>,
    /// Needed for the `cuda` backend of a compiled (non-noarch) project.
    pub nvcc: Option<Nvcc>,
}

/// Build options resolved from the command line.
#[derive(Debug, Clone)]
pub struct PlanSettings {
    pub out_dir: PathBuf,
    /// Backends asked for on the command line; empty means every buildable one.
    pub backends: Vec<String>,
    pub unique_id: Option<String>,
    /// Parallel compile jobs (splits cores between jobs and nvcc `--threads`).
    pub jobs: usize,
}

/// Why kbuild cannot build `backend` for this project here, if it cannot. Noarch (pure Python)
/// variants build for every backend; compiled ones need kbuild support and, for cuda, CUDA torch.
fn unbuildable(
    project: &Project,
    torch: Option<&TorchInfo>,
    backend: Backend,
) -> Option<PlanError> {
    if matches!(project.framework, Framework::TorchNoarch(_)) {
        return None;
    }
    if !backend.is_supported() {
        return Some(PlanError::BackendUnsupported {
            backend: backend.to_string(),
        });
    }
    match torch {
        Some(t) if backend == Backend::Cuda && t.cuda.is_none() => Some(PlanError::CpuOnlyTorch {
            torch: t.version.clone(),
        }),
        _ => None,
    }
}

/// Which backends to build, and which of build.toml's to skip (with the reason). `torch` is
/// `None` for noarch projects, which need no toolchain.
pub fn select_backends(
    project: &Project,
    torch: Option<&TorchInfo>,
    requested: &[String],
) -> Result<(Vec<Backend>, Vec<Skipped>), PlanError> {
    if matches!(project.framework, Framework::TvmFfi(_)) {
        return Err(PlanError::TvmFfiUnsupported);
    }
    let listed: Vec<Backend> = project.general.backends.clone();
    let mut chosen = Vec::new();
    let mut skipped = Vec::new();
    if !requested.is_empty() {
        for name in requested {
            let Some(backend) = listed.iter().copied().find(|b| b.as_str() == name) else {
                return Err(PlanError::BackendNotInProject {
                    backend: name.clone(),
                    listed: listed
                        .iter()
                        .map(|b| format!("\"{b}\""))
                        .collect::<Vec<_>>()
                        .join(", "),
                });
            };
            if let Some(err) = unbuildable(project, torch, backend) {
                return Err(err);
            }
            if !chosen.contains(&backend) {
                chosen.push(backend);
            }
        }
        for backend in listed {
            if !chosen.contains(&backend) {
                skipped.push(Skipped {
                    backend,
                    reason: "not selected with `--backend`".into(),
                });
            }
        }
        return Ok((chosen, skipped));
    }
    for backend in listed {
        match unbuildable(project, torch, backend) {
            Some(PlanError::BackendUnsupported { .. }) => skipped.push(Skipped {
                backend,
                reason: format!(
                    "kbuild does not build the `{backend}` backend (only cpu and cuda)"
                ),
            }),
            Some(PlanError::CpuOnlyTorch { torch }) => skipped.push(Skipped {
                backend,
                reason: format!("torch {torch} is CPU-only"),
            }),
            Some(_) => {}
            None if !chosen.contains(&backend) => chosen.push(backend),
            None => {}
        }
    }
    if chosen.is_empty() {
        let reasons = skipped
            .iter()
            .map(|s| format!("{}: {}", s.backend, s.reason))
            .collect::<Vec<_>>()
            .join("; ");
        return Err(PlanError::NothingToBuild { reasons });
    }
    Ok((chosen, skipped))
}

/// `torch215-cxx11-cu132-x86_64-linux`, `torch215-cxx11-cpu-x86_64-linux`, or `torch-<backend>`
/// for noarch projects.
pub fn variant_name(project: &Project, torch: Option<&TorchInfo>, backend: Backend) -> String {
    let Some(torch) = torch.filter(|_| !matches!(project.framework, Framework::TorchNoarch(_)))
    else {
        return format!("torch-{backend}");
    };
    let (major, minor) = torch.major_minor();
    let abi = if torch.cxx11_abi { "cxx11" } else { "cxx98" };
    let compute = match (backend, torch.cuda_major_minor()) {
        (Backend::Cuda, Some((cmaj, cmin))) => format!("cu{cmaj}{cmin}"),
        _ => backend.as_str().to_string(),
    };
    format!(
        "torch{major}{minor}-{abi}-{compute}-{}-{}",
        std::env::consts::ARCH,
        std::env::consts::OS
    )
}

/// The source state identity: `(hash7, dirty, commit)`. In a git checkout: the short HEAD
/// commit, dirty when tracked files under the project changed; elsewhere a hash of the sources.
pub fn source_identity(project: &Project) -> Result<(String, bool, Option<String>), PlanError> {
    if let Some((commit, dirty)) = git_state(&project.root) {
        return Ok((
            commit[..7.min(commit.len())].to_string(),
            dirty,
            Some(commit),
        ));
    }
    let mut hasher = Sha256::new();
    let mut files: BTreeSet<PathBuf> = BTreeSet::new();
    files.insert(project.manifest.clone());
    for kernel in &project.kernels {
        files.extend(kernel.src.iter().map(|p| project.root.join(p)));
    }
    if let Framework::Torch(torch) = &project.framework {
        files.extend(torch.src.iter().map(|p| project.root.join(p)));
    }
    files.extend(python_files(project).into_iter().map(|(src, _)| src));
    for file in files {
        let bytes = std::fs::read(&file).map_err(|source| PlanError::Io {
            path: file.clone(),
            source,
        })?;
        hasher.update(
            file.strip_prefix(&project.root)
                .unwrap_or(&file)
                .to_string_lossy()
                .as_bytes(),
        );
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(&bytes);
    }
    Ok((hex::encode(hasher.finalize())[..7].to_string(), false, None))
}

fn git_state(root: &Path) -> Option<(String, bool)> {
    let run = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(root)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let commit = run(&["rev-parse", "HEAD"])?;
    let status = run(&["status", "--porcelain", "--untracked-files=no", "--", "."])?;
    Some((commit, !status.is_empty()))
}

/// Files of `torch-ext/<python_name>/` (no bytecode), with their place inside the variant.
pub fn python_files(project: &Project) -> Vec<(PathBuf, PathBuf)> {
    let dir = project
        .root
        .join("torch-ext")
        .join(project.general.python_name());
    let mut files: Vec<(PathBuf, PathBuf)> = walkdir::WalkDir::new(&dir)
        .sort_by_file_name()
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .filter(|e| {
            !e.path()
                .components()
                .any(|c| c.as_os_str() == "__pycache__")
                && e.path().extension().is_none_or(|x| x != "pyc")
        })
        .filter_map(|e| {
            let rel = e.path().strip_prefix(&dir).ok()?.to_path_buf();
            Some((e.path().to_path_buf(), rel))
        })
        .collect();
    files.sort();
    files
}

/// The capability matrix and per-capability dtypes for the CUDA variant.
fn cuda_matrix(project: &Project) -> BTreeMap<Capability, Vec<DType>> {
    if !project.kbuild.capabilities.is_empty() {
        return project.kbuild.capabilities.clone();
    }
    let declared: BTreeSet<Capability> = project
        .kernels
        .iter()
        .filter(|k| k.backend == Backend::Cuda)
        .filter_map(|k| k.cuda_capabilities.clone())
        .flatten()
        .collect();
    let caps: Vec<Capability> = if declared.is_empty() {
        DEFAULT_CAPABILITIES
            .iter()
            .map(|&(major, minor)| Capability {
                major,
                minor,
                suffix: None,
            })
            .collect()
    } else {
        declared.into_iter().collect()
    };
    caps.into_iter().map(|c| (c, DType::ALL.to_vec())).collect()
}

/// The capabilities one CUDA kernel compiles for.
fn kernel_capabilities(
    kernel: &Kernel,
    matrix: &BTreeMap<Capability, Vec<DType>>,
    explicit_matrix: bool,
    locations: &BTreeMap<Capability, crate::config::Location>,
    nvcc: &Nvcc,
) -> Result<Vec<Capability>, PlanError> {
    let (caps, explicit): (Vec<Capability>, bool) = match &kernel.cuda_capabilities {
        Some(list) if explicit_matrix => (
            list.iter()
                .copied()
                .filter(|c| matrix.contains_key(c))
                .collect(),
            true,
        ),
        Some(list) => (list.clone(), true),
        None => (matrix.keys().copied().collect(), explicit_matrix),
    };
    let mut out = Vec::new();
    for cap in caps {
        if nvcc.supports(&cap) {
            out.push(cap);
        } else if explicit {
            let location = kernel
                .cuda_capabilities
                .iter()
                .flatten()
                .position(|c| *c == cap)
                .and_then(|i| kernel.capability_locations.get(i).cloned())
                .or_else(|| locations.get(&cap).cloned())
                .unwrap_or_else(|| kernel.location.clone());
            return Err(PlanError::CapabilityUnsupported {
                location,
                kernel: kernel.name.clone(),
                capability: cap,
                nvcc: format!("{}.{}", nvcc.version.0, nvcc.version.1),
                supported: nvcc
                    .supported
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

fn lang_of(path: &Path) -> Option<Lang> {
    match path.extension()?.to_str()? {
        "cu" => Some(Lang::Cuda),
        "cpp" | "cc" | "cxx" | "c" => Some(Lang::Cxx),
        _ => None,
    }
}

/// Make the whole plan. `backends` comes from [`select_backends`].
pub fn make_plan(
    project: &Project,
    tools: &Tools,
    settings: &PlanSettings,
    backends: &[Backend],
    skipped: Vec<Skipped>,
) -> Result<BuildPlan, PlanError> {
    let work_dir = settings.out_dir.join(".kbuild");
    let (hash, dirty, _) = match &settings.unique_id {
        Some(id) => (id.clone(), false, None),
        None => source_identity(project)?,
    };
    let python_name = project.general.python_name();
    let mut variants = Vec::new();
    for &backend in backends {
        let name = variant_name(project, tools.torch.as_ref(), backend);
        let id = format!(
            "_{python_name}_{backend}_{hash}{}",
            if dirty { "_dirty" } else { "" }
        );
        let vwork = work_dir.join(&name);
        let mut variant = VariantPlan {
            name: name.clone(),
            backend,
            id: id.clone(),
            python_name: python_name.clone(),
            capabilities: Vec::new(),
            dtypes: BTreeMap::new(),
            generated_include: vwork.join("include"),
            obj_dir: vwork.join("obj"),
            compile: Vec::new(),
            link: None,
            python_files: python_files(project),
        };
        if let (Framework::Torch(torch_cfg), Some(torch)) = (&project.framework, &tools.torch) {
            fill_compiled_variant(project, tools, torch, settings, torch_cfg, &mut variant)?;
        } else if let (Framework::TorchNoarch(noarch), Backend::Cuda) =
            (&project.framework, backend)
        {
            // Pure Python: archs are declared, not compiled (HF: `torch-noarch.cuda_capabilities`).
            variant.capabilities = noarch.cuda_capabilities.clone();
        }
        variants.push(variant);
    }
    Ok(BuildPlan {
        root: project.root.clone(),
        out_dir: settings.out_dir.clone(),
        work_dir,
        variants,
        skipped,
    })
}

fn fill_compiled_variant(
    project: &Project,
    tools: &Tools,
    torch: &TorchInfo,
    settings: &PlanSettings,
    torch_cfg: &crate::config::Torch,
    variant: &mut VariantPlan,
) -> Result<(), PlanError> {
    let backend = variant.backend;
    let cxx = tools.cxx.as_ref();
    let cxx_path = cxx.map(|c| c.path.clone()).unwrap_or_else(|| "c++".into());
    let cxx_id = cxx.map(|c| c.version.clone()).unwrap_or_default();
    let nvcc = tools.nvcc.as_ref().filter(|_| backend == Backend::Cuda);

    let matrix = cuda_matrix(project);
    let explicit_matrix = !project.kbuild.capabilities.is_empty();

    let mut defines: Vec<(String, Option<String>)> = vec![
        ("TORCH_EXTENSION_NAME".into(), Some(variant.id.clone())),
        ("Py_LIMITED_API".into(), Some("0x03090000".into())),
        (
            "_GLIBCXX_USE_CXX11_ABI".into(),
            Some(if torch.cxx11_abi { "1" } else { "0" }.into()),
        ),
        (format!("{}_KERNEL", backend.as_str().to_uppercase()), None),
    ];
    defines.sort();

    let mut system_includes: Vec<PathBuf> = torch.include_dirs.clone();
    system_includes.push(torch.python_include.clone());
    if let Some(nvcc) = nvcc {
        system_includes.push(nvcc.include_dir.clone());
    }

    // (source, lang, extra include dirs, cuda flags, cxx flags, capabilities)
    struct Unit<'a> {
        src: &'a Path,
        // `[torch] src`: the op bindings, the only units that see TORCH_EXTENSION_NAME, so a new
        // commit (a new op namespace) recompiles the bindings and not every kernel.
        binding: bool,
        include: &'a [PathBuf],
        cuda_flags: &'a [String],
        cxx_flags: &'a [String],
        caps: Vec<Capability>,
    }
    let mut units: Vec<Unit> = Vec::new();
    for src in &torch_cfg.src {
        units.push(Unit {
            src,
            binding: true,
            include: &torch_cfg.include,
            cuda_flags: &[],
            cxx_flags: &torch_cfg.cxx_flags,
            caps: Vec::new(),
        });
    }
    let mut variant_caps: BTreeSet<Capability> = BTreeSet::new();
    for kernel in project.kernels.iter().filter(|k| k.backend == backend) {
        let caps = match nvcc {
            Some(nvcc) => kernel_capabilities(
                kernel,
                &matrix,
                explicit_matrix,
                &project.kbuild.locations,
                nvcc,
            )?,
            None => Vec::new(),
        };
        variant_caps.extend(caps.iter().copied());
        for src in &kernel.src {
            units.push(Unit {
                src,
                binding: false,
                include: &kernel.include,
                cuda_flags: &kernel.cuda_flags,
                cxx_flags: &kernel.cxx_flags,
                caps: caps.clone(),
            });
        }
    }
    let cuda_units = units
        .iter()
        .filter(|u| lang_of(u.src) == Some(Lang::Cuda))
        .count();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let per_job = (cores / settings.jobs.clamp(1, cuda_units.max(1))).max(1) as u32;

    let newest = variant_caps.iter().next_back().copied();
    for unit in units {
        let Some(lang) = lang_of(unit.src) else {
            continue; // headers listed in `src`
        };
        let rel = unit.src.to_string_lossy().replace(['/', '\\'], "__");
        let object = variant.obj_dir.join(format!("{rel}.o"));
        let mut include_dirs = vec![variant.generated_include.clone(), project.root.clone()];
        include_dirs.extend(unit.include.iter().map(|i| project.root.join(i)));
        let mut job_defines: Vec<(String, Option<String>)> = defines
            .iter()
            .filter(|(name, _)| unit.binding || name != "TORCH_EXTENSION_NAME")
            .cloned()
            .collect();
        let (compiler, compiler_id, flags, host_flags, gencodes, threads) = match (lang, nvcc) {
            (Lang::Cuda, Some(nvcc)) => {
                // The half/bf16 rules torch's own extensions compile with.
                for d in [
                    "__CUDA_NO_HALF_OPERATORS__",
                    "__CUDA_NO_HALF_CONVERSIONS__",
                    "__CUDA_NO_BFLOAT16_CONVERSIONS__",
                    "__CUDA_NO_HALF2_OPERATORS__",
                ] {
                    job_defines.push((d.into(), None));
                }
                let mut flags = vec!["--expt-relaxed-constexpr".to_string()];
                flags.extend(unit.cuda_flags.iter().cloned());
                let mut host = vec!["-fPIC".to_string()];
                host.extend(unit.cxx_flags.iter().cloned());
                let gencodes: Vec<Gencode> = unit
                    .caps
                    .iter()
                    .map(|&c| Gencode {
                        capability: c,
                        ptx: Some(c) == newest,
                    })
                    .collect();
                let threads = per_job.min(gencodes.len().max(1) as u32);
                (
                    nvcc.path.clone(),
                    format!("{} | host {}", nvcc.id, cxx_id),
                    flags,
                    host,
                    gencodes,
                    threads,
                )
            }
            (Lang::Cuda, None) => continue, // .cu in a non-CUDA variant is not compiled
            (Lang::Cxx, _) => {
                let mut flags = vec!["-fPIC".to_string()];
                flags.extend(unit.cxx_flags.iter().cloned());
                (
                    cxx_path.clone(),
                    cxx_id.clone(),
                    flags,
                    Vec::new(),
                    Vec::new(),
                    1,
                )
            }
        };
        variant.compile.push(CompileJob {
            label: format!("{} [{}]", unit.src.display(), backend),
            lang,
            compiler,
            host_compiler: (lang == Lang::Cuda).then(|| cxx_path.clone()),
            source: project.root.join(unit.src),
            depfile: object.with_extension("d"),
            object,
            std: torch.cxx_std(),
            include_dirs,
            system_include_dirs: system_includes.clone(),
            defines: job_defines,
            flags,
            host_flags,
            gencodes,
            nvcc_threads: threads,
            compiler_id,
        });
    }

    variant.capabilities = variant_caps.iter().copied().collect();
    variant.dtypes = variant_caps
        .iter()
        .map(|c| {
            (
                *c,
                matrix
                    .get(c)
                    .cloned()
                    .unwrap_or_else(|| DType::ALL.to_vec()),
            )
        })
        .collect();

    let mut libs: Vec<String> = vec!["c10".into(), "torch".into(), "torch_cpu".into()];
    let mut lib_dirs = vec![torch.lib_dir.clone()];
    if let Some(nvcc) = nvcc {
        libs.extend(["c10_cuda".into(), "torch_cuda".into(), nvcc.cudart_lib()]);
        lib_dirs.push(nvcc.lib_dir.clone());
    }
    variant.link = Some(LinkJob {
        linker: cxx_path,
        objects: variant.compile.iter().map(|j| j.object.clone()).collect(),
        output: settings
            .out_dir
            .join(".kbuild")
            .join(&variant.name)
            .join(format!("{}.abi3.so", variant.id)),
        lib_dirs,
        libs,
        flags: vec!["-shared".into(), "-Wl,--no-as-needed".into()],
    });
    Ok(())
}
