//! The compile and link jobs of a compiled (torch extension) variant.

use std::path::{Path, PathBuf};

use super::bounds;
use super::matrix::{VariantArchs, cuda_archs};
use super::{CompileJob, Gencode, Lang, LinkJob, PlanError, PlanSettings, VariantPlan};
use crate::config::{Backend, Dependency, Project, Torch as Bindings, Version};
use crate::toolchain::{Nvcc, Toolchain, TorchEnv, TorchInfo, target_version_define};

/// One source file to compile, with the settings of the table (`[torch]` or `[kernel.*]`) that
/// lists it.
struct Unit<'a> {
    src: &'a Path,
    lang: Lang,
    include: &'a [PathBuf],
    cuda_flags: &'a [String],
    cxx_flags: &'a [String],
    gencodes: Vec<Gencode>,
    /// `-isystem` dirs of the kernel's `depends` libraries (CUTLASS).
    dep_includes: Vec<PathBuf>,
    /// A narrowed CUDA unit's gencodes in the whole matrix, when they are more than `gencodes`
    /// (see [`arch_list_flags`]).
    matrix_gencodes: Option<Vec<Gencode>>,
}

/// What every job of one variant shares.
struct Shared<'a> {
    project: &'a Project,
    variant: &'a VariantPlan,
    torch: &'a TorchEnv,
    cxx_path: PathBuf,
    cxx_id: String,
    /// Host code gets `-fno-gnu-unique`: two kernels loaded into one process must not share
    /// a static local or template static member through a GNU-unique symbol.
    no_gnu_unique: bool,
    defines: Vec<(String, Option<String>)>,
    /// `-I` dirs of every unit before its own `include`: HF's target-wide `csrc`.
    include_dirs: Vec<PathBuf>,
    /// `--cuda-capabilities` left part of the matrix out: CUDA objects are named after their
    /// capabilities, so the whole matrix's objects stay cached beside them.
    narrowed: bool,
    /// `CXXFLAGS` of the environment, after each unit's own host flags.
    env_cxx_flags: &'a [String],
    system_include_dirs: Vec<PathBuf>,
}

/// Fill in the compile jobs, link job, capabilities and dtypes of a variant of a compiled
/// project, and return the notes about what it left out. `work` is the variant's scratch
/// directory.
pub(super) fn fill_compiled_variant(
    project: &Project,
    bindings: &Bindings,
    toolchain: &Toolchain,
    torch: &TorchEnv,
    settings: &PlanSettings,
    work: &Path,
    variant: &mut VariantPlan,
) -> Result<Vec<String>, PlanError> {
    let backend = variant.backend;
    let nvcc = toolchain.nvcc.as_ref().filter(|_| backend == Backend::Cuda);
    let archs = match nvcc {
        Some(nvcc) => {
            bounds::check_cuda(project, nvcc)?;
            cuda_archs(project, nvcc, settings.cuda_capabilities.as_deref())?
        }
        None => VariantArchs::default(),
    };
    let units = units_of(
        project,
        bindings,
        toolchain,
        backend,
        nvcc.is_some(),
        &archs,
    );
    let cxx = toolchain.cxx.as_ref();
    let mut system_include_dirs = torch.flags.include_dirs.clone();
    system_include_dirs.extend(nvcc.map(|n| n.include_dir.clone()));
    let shared = Shared {
        project,
        variant,
        torch,
        cxx_path: cxx.map(|c| c.path.clone()).unwrap_or_else(|| "c++".into()),
        cxx_id: cxx.map(|c| c.version.clone()).unwrap_or_default(),
        no_gnu_unique: cxx.is_some_and(|c| c.has_gnu_unique()),
        defines: defines(bindings, torch, variant)?,
        include_dirs: extension_include_dirs(project),
        system_include_dirs,
        narrowed: archs.matrix_archs.is_some(),
        env_cxx_flags: &settings.cxx_flags,
    };
    let compile = compile_jobs(&shared, &units, nvcc);
    let mut link = link_job(&shared, &compile, nvcc, work);
    link.manylinux = settings.manylinux.clone();

    variant.compile = compile;
    variant.link = Some(link);
    variant.capabilities = archs.capabilities;
    variant.dtypes = archs.dtypes;
    variant.archs = archs.archs;
    variant.ptx = archs.ptx;
    variant.matrix_archs = archs.matrix_archs;
    Ok(archs.notes)
}

/// The units of a variant: the bindings, then each kernel of `backend` with the gencodes of
/// its capabilities (a CUDA kernel with none is one HF skips, below its `cuda-minver`).
fn units_of<'a>(
    project: &'a Project,
    bindings: &'a Bindings,
    toolchain: &Toolchain,
    backend: Backend,
    cuda: bool,
    archs: &VariantArchs,
) -> Vec<Unit<'a>> {
    let mut units: Vec<Unit> = Vec::new();
    for src in &bindings.src {
        units.extend(unit(
            src,
            &bindings.include,
            &[],
            &bindings.cxx_flags,
            Vec::new(),
        ));
    }
    let dep_includes = |depends: &[Dependency]| -> Vec<PathBuf> {
        depends
            .iter()
            .filter_map(|d| toolchain.deps.iter().find(|h| h.dependency == *d))
            .flat_map(|h| h.include_dirs.iter().cloned())
            .collect()
    };
    for kernel in project.kernels.iter().filter(|k| k.backend == backend) {
        let gencodes = match cuda {
            true => match archs.per_kernel.get(&kernel.name) {
                Some(gencodes) => gencodes.clone(),
                None => continue,
            },
            false => Vec::new(),
        };
        for src in &kernel.src {
            let unit = unit(
                src,
                &kernel.include,
                &kernel.cuda_flags,
                &kernel.cxx_flags,
                gencodes.clone(),
            );
            let matrix = archs.matrix_per_kernel.get(&kernel.name);
            units.extend(unit.map(|u| Unit {
                dep_includes: dep_includes(&kernel.depends),
                matrix_gencodes: matrix.filter(|m| **m != u.gencodes).cloned(),
                ..u
            }));
        }
    }
    units
}

/// The defines every unit of the variant gets, as HF's CMake gives them to the whole extension
/// target: torch's, the backend's, the stable-ABI target, `NDEBUG` and `TORCH_EXTENSION_NAME`.
/// Every kernel unit sees the op namespace too (kernels may register ops or name the module
/// with it); the object cache recompiles for a new namespace (a new commit) only the units
/// whose files spell it.
fn defines(
    bindings: &Bindings,
    torch: &TorchEnv,
    variant: &VariantPlan,
) -> Result<Vec<(String, Option<String>)>, PlanError> {
    let backend = variant.backend;
    let mut defines: Vec<(String, Option<String>)> = torch.flags.defines.clone();
    defines.push(("TORCH_EXTENSION_NAME".into(), Some(variant.id.clone())));
    defines.extend(backend_defines(backend));
    if backend == Backend::Cuda {
        defines.extend(torch.flags.cuda_variant_defines.iter().cloned());
    }
    if let Some(target) = bindings
        .stable_abi
        .as_ref()
        .and_then(|s| s.for_backend(backend))
    {
        defines.push(stable_abi_define(target, &torch.info)?);
    }
    // HF builds in CMake's Release configuration: `-O3` (added by the compile command) and
    // `-DNDEBUG` for every unit.
    defines.push(("NDEBUG".into(), None));
    defines.sort();
    Ok(defines)
}

/// What HF's preamble adds for the backend with `add_compile_definitions` (every unit, C++ and
/// device code alike): `<BACKEND>_KERNEL`, and `USE_<BACKEND>` for the GPU backends.
fn backend_defines(backend: Backend) -> Vec<(String, Option<String>)> {
    let kernel = format!("{}_KERNEL", backend.as_str().to_uppercase());
    let uses = match backend {
        Backend::Cuda => Some(("USE_CUDA", Some("1"))),
        Backend::Rocm => Some(("USE_ROCM", Some("1"))),
        Backend::Xpu => Some(("USE_XPU", None)),
        _ => None,
    };
    let mut defines = vec![(kernel, None)];
    defines.extend(uses.map(|(n, v)| (n.to_string(), v.map(String::from))));
    defines
}

/// HF's target-wide include directory: `target_include_directories(... PRIVATE csrc)` in
/// kernel-builder's `define_gpu_extension_target`, relative to the project root. Left out when
/// the project has no `csrc` (the compilers would ignore it).
fn extension_include_dirs(project: &Project) -> Vec<PathBuf> {
    let csrc = project.root.join("csrc");
    match csrc.is_dir() {
        true => vec![csrc],
        false => Vec::new(),
    }
}

/// One compile job per unit (how each runs is the schedule's: `schedule::choose`).
fn compile_jobs(shared: &Shared, units: &[Unit], nvcc: Option<&Nvcc>) -> Vec<CompileJob> {
    let mut compile = Vec::new();
    for unit in units {
        match (unit.lang, nvcc) {
            (Lang::Cxx, _) => compile.push(cxx_job(shared, unit)),
            (Lang::Cuda, Some(nvcc)) => compile.push(cuda_job(shared, unit, nvcc)),
            (Lang::Cuda, None) => {} // .cu in a non-CUDA variant is not compiled
        }
    }
    compile
}

/// HF's `TORCH_TARGET_VERSION` for a stable-ABI target, which torch's headers refuse above their
/// own version; checked here first, as HF's preamble does, to say which setting is wrong.
fn stable_abi_define(
    target: &Version,
    torch: &TorchInfo,
) -> Result<(String, Option<String>), PlanError> {
    let (major, minor) = target.major_minor();
    let (tmajor, tminor) = torch.major_minor();
    if (major, minor) > (u64::from(tmajor), u64::from(tminor)) {
        return Err(PlanError::StableAbiNewerThanTorch {
            target: target.to_string(),
            torch: torch.version.clone(),
        });
    }
    Ok(target_version_define(major, minor))
}

/// A unit for `src`, or `None` for files that are not compiled (headers listed in `src`).
fn unit<'a>(
    src: &'a Path,
    include: &'a [PathBuf],
    cuda_flags: &'a [String],
    cxx_flags: &'a [String],
    gencodes: Vec<Gencode>,
) -> Option<Unit<'a>> {
    let lang = match src.extension()?.to_str()? {
        "cu" => Lang::Cuda,
        "cpp" | "cc" | "cxx" | "c" => Lang::Cxx,
        _ => return None,
    };
    Some(Unit {
        src,
        lang,
        include,
        cuda_flags,
        cxx_flags,
        gencodes,
        dep_includes: Vec::new(),
        matrix_gencodes: None,
    })
}

/// Paths of the Python environment (torch's headers: `__FILE__` in the TORCH_CHECKs of their
/// inline functions), of the dependencies' headers and of the project (its own `__FILE__`s,
/// debug info) written relative to them, so that checkouts and machines with the same toolchain
/// and sources build byte-identical objects (docs/reproducible.md). GCC uses the last map that
/// matches: the project's, then a dependency's, win over the environment's.
fn prefix_maps(shared: &Shared, unit: &Unit) -> Vec<String> {
    let info = &shared.torch.info;
    let mut maps: Vec<(PathBuf, String)> = vec![
        (info.site_packages.clone(), "site-packages".into()),
        (info.python_include.clone(), "python-include".into()),
    ];
    for dir in &unit.dep_includes {
        let tail: Vec<_> = dir.components().rev().take(2).collect();
        let named: PathBuf = tail.into_iter().rev().collect();
        maps.push((dir.clone(), named.display().to_string()));
    }
    maps.push((shared.project.root.clone(), ".".into()));
    maps.into_iter()
        .map(|(from, to)| format!("-ffile-prefix-map={}={to}", from.display()))
        .collect()
}

/// The job as the host C++ compiler runs it; `cuda_job` adjusts it for nvcc.
fn cxx_job(shared: &Shared, unit: &Unit) -> CompileJob {
    let Shared {
        project, variant, ..
    } = shared;
    let rel = unit.src.to_string_lossy().replace(['/', '\\'], "__");
    let object = variant.obj_dir.join(format!("{rel}.o"));
    // HF's order: the target's `csrc`, then the unit's `include`; last the headers kbuild
    // generates (`registration.h`, which HF writes beside the bindings, and `kbuild_dtypes.h`).
    let mut include_dirs = shared.include_dirs.clone();
    include_dirs.extend(unit.include.iter().map(|i| project.root.join(i)));
    include_dirs.push(variant.generated_include.clone());
    let mut flags = vec!["-fPIC".to_string()];
    flags.extend(prefix_maps(shared, unit));
    if shared.no_gnu_unique {
        flags.push("-fno-gnu-unique".to_string());
    }
    flags.extend(unit.cxx_flags.iter().cloned());
    flags.extend(shared.env_cxx_flags.iter().cloned());
    CompileJob {
        label: format!("{} [{}]", unit.src.display(), variant.backend),
        lang: unit.lang,
        compiler: shared.cxx_path.clone(),
        host_compiler: None,
        source: project.root.join(unit.src),
        depfile: object.with_extension("d"),
        object,
        std: shared.torch.flags.std.clone(),
        include_dirs,
        system_include_dirs: shared
            .system_include_dirs
            .iter()
            .chain(&unit.dep_includes)
            .cloned()
            .collect(),
        defines: shared.defines.clone(),
        flags,
        host_flags: Vec::new(),
        gencodes: Vec::new(),
        compiler_id: shared.cxx_id.clone(),
    }
}

/// nvcc drives the host compiler: its flags go through `-Xcompiler`, and every capability of
/// the unit gets a `-gencode` (with PTX where the capability rules embed it).
fn cuda_job(shared: &Shared, unit: &Unit, nvcc: &Nvcc) -> CompileJob {
    let mut job = cxx_job(shared, unit);
    let flags = &shared.torch.flags;
    job.defines.extend(flags.cuda_defines.iter().cloned());
    // kernel-builder's `get_torch_gpu_compiler_flags` (the CUDA-only `GPU_FLAGS`): fp8 code
    // (e.g. paged-attention's kv-cache conversions) is compiled in from CUDA 11.8 on.
    if nvcc.version >= (11, 8) {
        job.defines.push(("ENABLE_FP8".into(), None));
    }
    job.defines.sort();
    job.std = flags.cuda_std.clone();
    job.host_flags = std::mem::take(&mut job.flags);
    // CMake starts every nvcc command with it (nvcc >= 10.2): a host-only flag in a kernel's
    // `cuda-flags` (`-Wno-…`, `-fopenmp`) reaches the host compiler instead of failing nvcc.
    job.flags = vec!["-forward-unknown-to-host-compiler".to_string()];
    // cudafe++ names the unit's module (which anonymous-namespace device names carry) after a
    // hash of the source's absolute path; named by its path in the project, one nvcc builds the
    // same code in every checkout (kbuild's own steps write a module id of their own).
    job.flags.push(format!(
        "-Xcudafe=--orig_src_path_name={}",
        unit.src.display()
    ));
    job.flags.extend(flags.cuda_flags.iter().cloned());
    // As HF's `cuda_kernel_component`: nvcc before 12.8 does not know this flag, so a kernel
    // that sets it for newer nvcc still builds with an older one.
    let known = |f: &&String| nvcc.version >= (12, 8) || !is_template_stub_flag(f);
    job.flags
        .extend(unit.cuda_flags.iter().filter(known).cloned());
    job.flags
        .extend(fatbin_compression(nvcc.version, unit.cuda_flags).map(String::from));
    job.gencodes = unit.gencodes.clone();
    if let Some(matrix) = &unit.matrix_gencodes {
        job.flags.extend(arch_list_flags(matrix, &job.gencodes));
    }
    if shared.narrowed {
        job.object = job
            .object
            .with_extension(format!("{}.o", gencode_tag(&job.gencodes)));
        job.depfile = job.object.with_extension("d");
    }
    job.compiler = nvcc.path.clone();
    job.host_compiler = Some(shared.cxx_path.clone());
    job.compiler_id = format!("{} | host {}", nvcc.id, shared.cxx_id);
    job
}

/// nvcc's `__CUDA_ARCH_LIST__` (the unit's capabilities, `750,800,900`) set to the whole
/// matrix's for a unit `--cuda-capabilities` narrowed. CCCL (which torch's CUDA headers pull in)
/// names its arch-dependent inline namespaces after the list, so every device pass's code
/// depends on all the unit's capabilities; with the whole matrix's list, a narrowed unit's
/// device passes are byte for byte those of the full build, which the device step cache then
/// reuses. The host code is the full build's too: on the GPUs the narrowed variant serves, it
/// runs as the full variant does (CUB picks its policy among the listed architectures by the
/// one the driver loads). The union with `gencodes` keeps every compiled capability listed.
fn arch_list_flags(matrix: &[Gencode], gencodes: &[Gencode]) -> [String; 2] {
    let values: std::collections::BTreeSet<u32> = (matrix.iter().chain(gencodes))
        .map(|g| g.capability.major * 100 + g.capability.minor * 10)
        .collect();
    // nvcc splits an option's value at commas unless they are escaped.
    let list: Vec<String> = values.iter().map(u32::to_string).collect();
    [
        "-U__CUDA_ARCH_LIST__".to_string(),
        format!("-D__CUDA_ARCH_LIST__={}", list.join("\\,")),
    ]
}

/// `sm80-sm90a-sm120ptx`: the capabilities of an object, in its file name.
fn gencode_tag(gencodes: &[Gencode]) -> String {
    let one = |g: &Gencode| {
        let c = g.capability;
        let suffix = c.suffix.map(String::from).unwrap_or_default();
        let ptx = if g.ptx { "ptx" } else { "" };
        format!("sm{}{}{suffix}{ptx}", c.major, c.minor)
    };
    gencodes.iter().map(one).collect::<Vec<_>>().join("-")
}

/// The fatbinary's compression: `--compress-mode=size` (a ~5x smaller `.so`, measured in
/// bench/results) where every driver that runs the variant's CUDA decompresses it. CUDA 13 code
/// needs driver 580 or newer, which reads every compress mode; CUDA 12 code runs on drivers from
/// 525.60.13, but `size` needs 550.54.14, so CUDA 12 keeps nvcc's default. A kernel's own
/// `--compress-mode` in `cuda-flags` wins. The rule: docs/binary-size.md.
fn fatbin_compression(nvcc: (u32, u32), kernel_flags: &[String]) -> Option<&'static str> {
    let own = kernel_flags
        .iter()
        .any(|f| f.starts_with("--compress-mode") || f.starts_with("-compress-mode"));
    (nvcc.0 >= 13 && !own).then_some("--compress-mode=size")
}

/// `-static-global-template-stub=true|false` (nvcc 12.8 and later).
fn is_template_stub_flag(flag: &str) -> bool {
    matches!(
        flag.strip_prefix("-static-global-template-stub="),
        Some("true" | "false")
    )
}

/// Link every object of the variant into `<work>/<id>.abi3.so` against torch (and cudart).
fn link_job(shared: &Shared, compile: &[CompileJob], nvcc: Option<&Nvcc>, work: &Path) -> LinkJob {
    let flags = &shared.torch.flags;
    let mut libs = flags.libs.clone();
    let mut lib_dirs = flags.lib_dirs.clone();
    if let Some(nvcc) = nvcc {
        libs.extend(flags.cuda_libs.iter().cloned());
        libs.push(nvcc.cudart_lib());
        lib_dirs.push(nvcc.lib_dir.clone());
    }
    LinkJob {
        linker: shared.cxx_path.clone(),
        objects: compile.iter().map(|j| j.object.clone()).collect(),
        output: work.join(format!("{}.abi3.so", shared.variant.id)),
        lib_dirs,
        libs,
        flags: vec!["-shared".into(), "-Wl,--no-as-needed".into()],
        manylinux: None,
    }
}

#[cfg(test)]
mod tests {
    use super::fatbin_compression;

    #[test]
    fn fatbin_is_compressed_for_size_from_cuda_13_only() {
        assert_eq!(
            fatbin_compression((13, 0), &[]),
            Some("--compress-mode=size")
        );
        assert_eq!(
            fatbin_compression((13, 2), &[]),
            Some("--compress-mode=size")
        );
        assert_eq!(fatbin_compression((12, 9), &[]), None);
        assert_eq!(fatbin_compression((12, 4), &[]), None);
    }

    #[test]
    fn a_kernels_own_compress_mode_wins() {
        for own in ["--compress-mode=none", "-compress-mode=speed"] {
            assert_eq!(
                fatbin_compression((13, 2), &[own.to_string()]),
                None,
                "{own}"
            );
        }
    }
}
