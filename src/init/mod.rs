//! `kbuild init`: a new kernel project from the templates under `templates/init/` — an
//! edition-5 build.toml, one op with a CUDA and a CPU implementation, its Python package, a
//! pytest suite, README, .gitignore and a GitHub workflow — that builds and passes its tests as
//! generated.

mod error;

use std::path::{Path, PathBuf};

use minijinja::{Environment, context};

use crate::config::Backend;
pub use error::InitError;

/// What `kbuild init` was asked for, resolved.
#[derive(Debug, Clone)]
pub struct InitSettings {
    /// The project directory (created when missing).
    pub dir: PathBuf,
    /// `[general] name` [default: the directory's name]; HF's `owner/name` form also names the
    /// Hub repository.
    pub name: Option<String>,
    /// `[general.hub] repo-id`, `owner/name`: where `kbuild publish` (and the generated CI)
    /// uploads.
    pub repo: Option<String>,
    /// `cuda`, `cpu` (the backends kbuild builds); at least one.
    pub backends: Vec<String>,
    /// `[general] license`, a Hub license identifier.
    pub license: String,
    /// Replace files that exist instead of refusing.
    pub overwrite: bool,
}

/// A written project.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Scaffolded {
    pub dir: PathBuf,
    pub name: String,
    pub backends: Vec<String>,
    /// `[general.hub] repo-id`, when given.
    pub repo: Option<String>,
    /// Written files, relative to `dir`, in the order written.
    pub files: Vec<String>,
}

/// One file of the skeleton: where it goes and its template.
struct Planned {
    rel: String,
    template: &'static str,
    source: &'static str,
}

macro_rules! template {
    ($file:literal) => {
        ($file, include_str!(concat!("../../templates/init/", $file)))
    };
}

const BUILD_TOML: (&str, &str) = template!("build.toml.j2");
const BINDING_CPP: (&str, &str) = template!("torch_binding.cpp.j2");
const BINDING_H: (&str, &str) = template!("torch_binding.h.j2");
const SCALE_CUDA: (&str, &str) = template!("scale_cuda.cu.j2");
const SCALE_CPU: (&str, &str) = template!("scale_cpu.cpp.j2");
const INIT_PY: (&str, &str) = template!("__init__.py.j2");
const TEST_PY: (&str, &str) = template!("test.py.j2");
const README: (&str, &str) = template!("README.md.j2");
const GITIGNORE: (&str, &str) = template!("gitignore.j2");
const WORKFLOW: (&str, &str) = template!("workflow.yml.j2");

/// Write a new project into `settings.dir`. Nothing is written when a file of the skeleton
/// exists (unless `overwrite`), or when the name, a backend or the license is invalid.
pub fn init(settings: &InitSettings) -> Result<Scaffolded, InitError> {
    let (name, repo) = name_and_repo(settings)?;
    validate_name(&name)?;
    let backends = validate_backends(&settings.backends)?;
    if settings.license.trim().is_empty() || settings.license.contains(['"', '\\', '\n']) {
        return Err(InitError::InvalidLicense {
            license: settings.license.clone(),
        });
    }
    let python_name = name.replace('-', "_");
    let planned = plan_files(&python_name, &backends);
    if !settings.overwrite
        && let Some(existing) = planned.iter().find(|p| settings.dir.join(&p.rel).exists())
    {
        return Err(InitError::Exists {
            path: settings.dir.join(&existing.rel),
        });
    }
    let has = |b: Backend| backends.contains(&b);
    let names: Vec<&str> = backends.iter().map(|b| b.as_str()).collect();
    let ctx = context! {
        name, python_name, license => settings.license, backends => names, repo,
        cuda => has(Backend::Cuda), cpu => has(Backend::Cpu),
        kbuild_version => env!("CARGO_PKG_VERSION"),
    };
    let mut files = Vec::new();
    for file in &planned {
        let text = render(file.template, file.source, &ctx)?;
        let path = settings.dir.join(&file.rel);
        crate::files::write_atomic(&path, text.as_bytes())
            .map_err(|source| InitError::Write { path, source })?;
        files.push(file.rel.clone());
    }
    Ok(Scaffolded {
        dir: settings.dir.clone(),
        name,
        backends: names.iter().map(|b| b.to_string()).collect(),
        repo,
        files,
    })
}

/// The kernel's name and Hub repository: `--repo owner/name` names the repository (and the
/// kernel, unless `--name` does); `--name owner/name`, as HF's `kernel-builder init` takes it,
/// names both; else the directory names the kernel and no repository is set.
fn name_and_repo(settings: &InitSettings) -> Result<(String, Option<String>), InitError> {
    let repo = settings.repo.as_deref().map(validate_repo).transpose()?;
    let hf_form = match settings.name.as_deref() {
        Some(name) if name.contains('/') => Some(validate_repo(name)?),
        _ => None,
    };
    let name = match (&settings.name, &hf_form, &repo) {
        (_, Some((_, short)), _) => short.clone(),
        (Some(name), None, _) => name.clone(),
        (None, _, Some((_, short))) => short.clone(),
        (None, _, None) => default_name(&settings.dir)?,
    };
    let repo = repo.or(hf_form).map(|(full, _)| full);
    Ok((name, repo))
}

/// `owner/name` as the Hub accepts it: the id and its name part.
fn validate_repo(repo: &str) -> Result<(String, String), InitError> {
    let part_ok = |p: &str| {
        !p.is_empty()
            && !p.starts_with(['.', '-'])
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    };
    match repo.split_once('/') {
        Some((owner, name)) if part_ok(owner) && part_ok(name) => {
            Ok((repo.to_string(), name.to_string()))
        }
        _ => Err(InitError::InvalidRepo {
            repo: repo.to_string(),
        }),
    }
}

/// The skeleton's files for this package and these backends.
fn plan_files(python_name: &str, backends: &[Backend]) -> Vec<Planned> {
    let mut out = Vec::new();
    let mut add = |rel: String, (template, source): (&'static str, &'static str)| {
        out.push(Planned {
            rel,
            template,
            source,
        })
    };
    add("build.toml".into(), BUILD_TOML);
    add("torch-ext/torch_binding.cpp".into(), BINDING_CPP);
    add("torch-ext/torch_binding.h".into(), BINDING_H);
    if backends.contains(&Backend::Cuda) {
        add("csrc/scale_cuda.cu".into(), SCALE_CUDA);
    }
    if backends.contains(&Backend::Cpu) {
        add("csrc/scale_cpu.cpp".into(), SCALE_CPU);
    }
    add(format!("torch-ext/{python_name}/__init__.py"), INIT_PY);
    add(format!("tests/test_{python_name}.py"), TEST_PY);
    add("README.md".into(), README);
    add(".gitignore".into(), GITIGNORE);
    add(".github/workflows/build.yml".into(), WORKFLOW);
    out
}

fn render(name: &str, source: &str, ctx: &minijinja::Value) -> Result<String, InitError> {
    let mut env = Environment::new();
    env.set_keep_trailing_newline(true);
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    env.add_template(name, source)
        .and_then(|_| env.get_template(name)?.render(ctx))
        .map_err(|source| InitError::Template {
            name: name.to_string(),
            source,
        })
}

/// The directory's own name, as `cargo init` names a package.
fn default_name(dir: &Path) -> Result<String, InitError> {
    let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    dir.file_name()
        .and_then(|n| n.to_str())
        .map(str::to_string)
        .ok_or(InitError::NoName { dir })
}

/// A kernels-data `KernelName`: what build.toml's `[general] name` accepts.
pub fn validate_name(name: &str) -> Result<(), InitError> {
    if kernels_data::config::KernelName::new(name.to_string()).is_ok() {
        return Ok(());
    }
    let fixed = name
        .to_lowercase()
        .replace(['_', ' ', '.'], "-")
        .trim_matches('-')
        .to_string();
    let suggestion = kernels_data::config::KernelName::new(fixed.clone())
        .is_ok()
        .then_some(fixed);
    Err(InitError::InvalidName {
        name: name.to_string(),
        suggestion,
    })
}

/// The backends asked for, in build.toml's order (cuda first), each once.
fn validate_backends(asked: &[String]) -> Result<Vec<Backend>, InitError> {
    let mut out = Vec::new();
    for name in asked {
        let backend: Option<Backend> = name.trim().parse().ok();
        match backend {
            Some(b) if b.is_supported() => out.push(b),
            _ => {
                return Err(InitError::UnsupportedBackend {
                    backend: name.clone(),
                });
            }
        }
    }
    if out.is_empty() {
        return Err(InitError::NoBackends);
    }
    out.sort_by_key(|b| *b != Backend::Cuda);
    out.dedup();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_kernels_data_refuses_are_refused_with_a_fix() {
        assert!(validate_name("my-kernel").is_ok());
        let err = validate_name("My_Kernel").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid kernel name `My_Kernel`: use lowercase letters, digits and `-`"
        );
        assert!(
            crate::hint::Hint::hint(&err)
                .unwrap()
                .contains("--name my-kernel")
        );
        assert!(validate_name("9lives").is_err());
    }

    #[test]
    fn backends_are_cuda_and_cpu_only_cuda_first() {
        let b =
            |v: &[&str]| validate_backends(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(
            b(&["cpu", "cuda", "cpu"]).unwrap(),
            [Backend::Cuda, Backend::Cpu]
        );
        assert!(matches!(
            b(&["rocm"]),
            Err(InitError::UnsupportedBackend { .. })
        ));
        assert!(matches!(b(&[]), Err(InitError::NoBackends)));
    }

    #[test]
    fn repo_comes_from_repo_or_hfs_owner_slash_name_and_names_the_kernel() {
        let settings = |name: Option<&str>, repo: Option<&str>| InitSettings {
            dir: "/tmp/dir-name".into(),
            name: name.map(String::from),
            repo: repo.map(String::from),
            backends: vec!["cpu".into()],
            license: "mit".into(),
            overwrite: false,
        };
        let got = |name, repo| name_and_repo(&settings(name, repo)).unwrap();
        assert_eq!(got(None, None), ("dir-name".into(), None));
        assert_eq!(
            got(None, Some("me/relu")),
            ("relu".into(), Some("me/relu".into()))
        );
        assert_eq!(
            got(Some("me/relu"), None),
            ("relu".into(), Some("me/relu".into()))
        );
        assert_eq!(
            got(Some("gelu"), Some("me/relu")),
            ("gelu".into(), Some("me/relu".into()))
        );
        assert!(matches!(
            name_and_repo(&settings(None, Some("no-slash"))),
            Err(InitError::InvalidRepo { .. })
        ));
    }
}
