//! `kbuild develop`: make a built variant importable under its package name in a Python
//! environment, so that `import <package>` (a kernel's own tests) runs the fresh build.
//!
//! The environment gets one `.pth` naming a directory of its own in the build's work area,
//! `<out>/.kbuild/develop/<env>/` (`<env>` names the environment's `sys.prefix` by a hash), which
//! holds a single symbolic link `<package>` to the variant directory `<out>/<variant>/`. A
//! rebuild renames a new variant into that same path, so it is picked up without running
//! `develop` again; a `develop` for another variant in the same environment swaps the link
//! atomically (a new link renamed over the old one). Each environment has its own link, so a
//! `develop` into one never changes what another imports.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::config::Backend;
use crate::hint::Hint;
use crate::orchestrator::Prepared;
use crate::package::BuiltVariant;
use crate::process::{self, CommandFailure, CommandSpec};
use crate::toolchain::{Toolchain, ToolchainError, find_python};

/// Why a variant could not be made importable.
#[derive(Debug, thiserror::Error)]
pub enum DevelopError {
    /// Asking the interpreter for its environment failed.
    #[error("cannot ask `{}` where its packages go", python.display())]
    Python {
        python: PathBuf,
        #[source]
        source: CommandFailure,
    },
    /// `develop` installs exactly one variant; the selection holds another number.
    #[error("`kbuild develop` installs one variant, but {} are selected: [{}]", variants.len(), variants.join(", "))]
    NotOneVariant { variants: Vec<String> },
    /// The environment's interpreter was not found.
    #[error(transparent)]
    Toolchain(Box<ToolchainError>),
    /// The interpreter is not in a virtual environment.
    #[error("`{}` is not a virtual environment's Python", python.display())]
    NotAVenv { python: PathBuf },
    /// The package is installed in the environment already, which would shadow the build.
    #[error("`{}` already exists: an installed `{package}` would be imported instead of the build", path.display())]
    Shadowed { package: String, path: PathBuf },
    /// pytest could not be started.
    #[error("cannot run pytest with `{}`", python.display())]
    Pytest {
        python: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write `{}`", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Hint for DevelopError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            DevelopError::Python { .. } => "check that the interpreter runs on its own".into(),
            DevelopError::NotOneVariant { .. } => "choose one with `--variant` (`kbuild \
                 list-variants` names them) or `--backend`"
                .into(),
            DevelopError::Toolchain(e) => return e.hint(),
            DevelopError::NotAVenv { .. } => "create one (`python -m venv .venv`) and activate \
                 it, or pass `--python <venv>/bin/python`"
                .into(),
            DevelopError::Shadowed { package, .. } => {
                format!("uninstall it first: `pip uninstall {package}`")
            }
            DevelopError::Pytest { .. } => {
                "check that the interpreter runs; install pytest into its environment \
                 (`python -m pip install pytest`)"
                    .into()
            }
            DevelopError::Io { .. } => {
                "check the permissions of the environment and the build directory".into()
            }
        })
    }
}

impl From<ToolchainError> for DevelopError {
    fn from(e: ToolchainError) -> Self {
        DevelopError::Toolchain(Box::new(e))
    }
}

/// What `develop` set up.
#[derive(Debug, Clone, Serialize)]
pub struct Developed {
    /// The import name (`relu`).
    pub package: String,
    pub variant: String,
    /// The `.pth` in the environment's site-packages.
    pub pth: PathBuf,
    /// The link the `.pth` makes importable.
    pub link: PathBuf,
}

/// Make `variant` importable as its package in the environment of `python`.
pub fn develop(variant: &BuiltVariant, python: &Path) -> Result<Developed, DevelopError> {
    let env = environment(python)?;
    let site = env.site;
    let package = variant.kernel_name.replace('-', "_");
    for shadow in [site.join(&package), site.join(format!("{package}.py"))] {
        if std::fs::symlink_metadata(&shadow).is_ok() {
            return Err(DevelopError::Shadowed {
                package: package.clone(),
                path: shadow,
            });
        }
    }
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| DevelopError::Io { path, source }
    };
    let out_dir = variant.dir.parent().unwrap_or(Path::new("."));
    let out_dir = std::path::absolute(out_dir).map_err(io(out_dir))?;
    let dir = out_dir.join(".kbuild/develop").join(env_key(&env.prefix));
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    let link = dir.join(&package);
    // Relative, so that the link survives moving the whole build directory.
    let target = Path::new("../../..").join(&variant.name);
    let tmp = dir.join(format!(".{package}.{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(&target, &tmp).map_err(io(&tmp))?;
    std::fs::rename(&tmp, &link).map_err(io(&link))?;

    let pth = site.join(format!("kbuild_develop_{package}.pth"));
    let line = format!("{}\n", dir.display());
    if std::fs::read_to_string(&pth).ok().as_deref() != Some(line.as_str()) {
        std::fs::write(&pth, line).map_err(io(&pth))?;
    }
    Ok(Developed {
        package,
        variant: variant.name.clone(),
        pth,
        link,
    })
}

/// What `develop --uninstall` removed: the environment's `.pth` and its link, when they were
/// there.
#[derive(Debug, Clone, Serialize)]
pub struct Uninstalled {
    pub package: String,
    pub removed: Vec<PathBuf>,
}

/// Undo [`develop`] of `package` for the environment of `python`: remove its `.pth` (the
/// environment no longer imports the build) and its link under `out_dir`.
pub fn uninstall(
    out_dir: &Path,
    package: &str,
    python: &Path,
) -> Result<Uninstalled, DevelopError> {
    let env = environment(python)?;
    let out_dir = std::path::absolute(out_dir).unwrap_or_else(|_| out_dir.to_path_buf());
    let dir = out_dir.join(".kbuild/develop").join(env_key(&env.prefix));
    let pth = env.site.join(format!("kbuild_develop_{package}.pth"));
    let mut removed = Vec::new();
    for path in [pth, dir.join(package)] {
        match std::fs::remove_file(&path) {
            Ok(()) => removed.push(path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(DevelopError::Io { path, source }),
        }
    }
    // Gone once empty; another package's link keeps it.
    let _ = std::fs::remove_dir(&dir);
    Ok(Uninstalled {
        package: package.to_string(),
        removed,
    })
}

/// What `develop` made importable, and where.
pub struct DevelopedHere {
    /// The environment's interpreter.
    pub python: PathBuf,
    /// The backend of the variant it imports.
    pub backend: Backend,
    /// The build's output directory.
    pub out_dir: PathBuf,
}

/// The variant develop installs and the interpreter it goes into.
pub struct Choice {
    pub variant: String,
    pub backend: Backend,
    pub python: PathBuf,
}

/// Narrow the prepared build to the one variant develop installs, before anything is built:
/// the only one selected; else those built with the environment's own Python (`--python`, the
/// active venv, ./.venv); else, unless `--backend` was given, the backend `kernels` loads with
/// that torch. The interpreter is the one the variant was built with (noarch variants use
/// none: the environment's).
pub fn keep_one_variant(
    prepared: &mut Prepared,
    python: Option<&Path>,
    backend_given: bool,
) -> Result<Choice, DevelopError> {
    let own = || find_python(python, &prepared.project.root).map_err(DevelopError::from);
    let built_with = |i: usize| {
        let torch = prepared.toolchains[i].torch.as_ref();
        torch.map(|t| t.python.path.clone())
    };
    // (plan, variant) of every variant still selected.
    let all: Vec<(usize, usize)> = (prepared.plans.iter().enumerate())
        .flat_map(|(i, plan)| (0..plan.variants.len()).map(move |j| (i, j)))
        .collect();
    let names = |chosen: &[(usize, usize)]| -> Vec<String> {
        let name = |&(i, j): &(usize, usize)| prepared.plans[i].variants[j].name.clone();
        chosen.iter().map(name).collect()
    };
    let mut chosen = all.clone();
    if chosen.len() > 1 {
        let own = own()?.path;
        chosen.retain(|&(i, _)| built_with(i).is_some_and(|p| same_file(&p, &own)));
    }
    if chosen.len() > 1 && !backend_given {
        chosen.retain(|&(i, j)| {
            let backend = prepared.plans[i].variants[j].backend;
            Some(backend) == kernels_backend(&prepared.toolchains[i])
        });
    }
    let &[(i, j)] = chosen.as_slice() else {
        return Err(DevelopError::NotOneVariant {
            variants: names(&all),
        });
    };
    let python = match built_with(i) {
        Some(path) => path,
        None => own()?.path,
    };
    let variant = prepared.plans[i].variants[j].name.clone();
    let backend = prepared.plans[i].variants[j].backend;
    let kept = |k: usize, v: &crate::plan::VariantPlan| k == i && v.name == variant;
    let keep: Vec<bool> = (prepared.plans.iter().enumerate())
        .flat_map(|(k, plan)| plan.variants.iter().map(move |v| (k, v)))
        .flat_map(|(k, v)| std::iter::repeat_n(kept(k, v), v.compile.len()))
        .collect();
    prepared.schedule.retain(&keep);
    for (k, plan) in prepared.plans.iter_mut().enumerate() {
        plan.variants.retain(|v| kept(k, v));
    }
    Ok(Choice {
        variant,
        backend,
        python,
    })
}

/// The pytest plugin `kbuild test` loads: `kernels` loads the backend that was built.
const PYTEST_PLUGIN: &str = include_str!("../templates/pytest/kbuild_backend.py");

/// A run of a project's own tests against what `develop` made importable.
#[derive(Debug, Clone)]
pub struct TestRun {
    /// The environment's interpreter (the one developed into).
    pub python: PathBuf,
    /// The project root: pytest runs there.
    pub project_root: PathBuf,
    /// The build's output directory (the plugin is written under its `.kbuild/`).
    pub out_dir: PathBuf,
    /// The backend `kernels` loads unless a test names one.
    pub backend: Backend,
    /// pytest's arguments; `tests` is added when the project has it and they name no path.
    pub pytest_args: Vec<std::ffi::OsString>,
}

/// Run the project's tests, unchanged, with pytest in `run.python`'s environment; `kernels`
/// loads `run.backend` unless a test says otherwise. Returns pytest's exit status.
pub fn run_tests(run: &TestRun) -> Result<std::process::ExitStatus, DevelopError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| DevelopError::Io { path, source }
    };
    let dir = std::path::absolute(run.out_dir.join(".kbuild/pytest")).map_err(io(&run.out_dir))?;
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    let plugin = dir.join("kbuild_backend.py");
    if std::fs::read_to_string(&plugin).ok().as_deref() != Some(PYTEST_PLUGIN) {
        crate::files::write_atomic(&plugin, PYTEST_PLUGIN.as_bytes()).map_err(io(&plugin))?;
    }
    let mut spec = CommandSpec::new(&run.python);
    spec.args(["-m", "pytest", "-p", "kbuild_backend"]);
    // `tests` unless the arguments name what to run (an existing path).
    let names_path = (run.pytest_args.iter())
        .any(|a| !a.to_string_lossy().starts_with('-') && run.project_root.join(a).exists());
    if !names_path && run.project_root.join("tests").is_dir() {
        spec.arg("tests");
    }
    spec.args(&run.pytest_args);
    let mut path = std::ffi::OsString::from(&dir);
    if let Some(old) = crate::env::var_os("PYTHONPATH").filter(|p| !p.is_empty()) {
        path.push(":");
        path.push(old);
    }
    spec.env.push(("PYTHONPATH".into(), path));
    spec.env
        .push(("KBUILD_TEST_BACKEND".into(), run.backend.as_str().into()));
    spec.cwd = Some(run.project_root.clone());
    // pytest talks to the terminal itself: its output is the command's.
    spec.to_command()
        .status()
        .map_err(|source| DevelopError::Pytest {
            python: run.python.clone(),
            source,
        })
}

/// A virtual environment: its `sys.prefix` and `purelib`.
struct Environment {
    prefix: PathBuf,
    site: PathBuf,
}

/// The name of an environment's directory of links: 16 hex digits of the SHA-256 of its prefix.
fn env_key(prefix: &Path) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(prefix.as_os_str().as_encoded_bytes());
    hex::encode(&digest[..8])
}

/// The environment of `python`, after checking it is a virtual environment.
fn environment(python: &Path) -> Result<Environment, DevelopError> {
    let mut spec = CommandSpec::new(python);
    spec.args([
        "-c",
        "import sys, sysconfig\n\
         print(sys.prefix != sys.base_prefix)\n\
         print(sysconfig.get_paths()['purelib'])\n\
         print(sys.prefix)",
    ]);
    let out = process::run(&spec).map_err(|source| DevelopError::Python {
        python: python.to_path_buf(),
        source,
    })?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    if lines.next() != Some("True") {
        return Err(DevelopError::NotAVenv {
            python: python.to_path_buf(),
        });
    }
    let site = PathBuf::from(lines.next().unwrap_or_default().trim());
    let prefix = PathBuf::from(lines.next().unwrap_or_default().trim());
    Ok(Environment { prefix, site })
}

/// The backend `kernels` loads with this toolchain's torch: cuda for a CUDA build of torch,
/// else cpu (`None` for noarch projects, which have no torch here).
pub fn kernels_backend(toolchain: &Toolchain) -> Option<Backend> {
    let torch = toolchain.torch.as_ref()?;
    Some(match torch.info.cuda {
        Some(_) => Backend::Cuda,
        None => Backend::Cpu,
    })
}

/// The same interpreter path. Not resolved through links: a venv's `bin/python` links to the
/// base interpreter that every venv of it shares.
pub fn same_file(a: &Path, b: &Path) -> bool {
    std::path::absolute(a).ok() == std::path::absolute(b).ok()
}
