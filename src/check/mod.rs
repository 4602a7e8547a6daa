//! `kbuild check`: the Hub's rules on built variants. Every rule takes a verified
//! [`BuiltVariant`]; a variant that cannot be read as one (metadata, digest, files) is itself a
//! finding. Also opens artifacts and wheels, unpacked into a temporary directory.

mod elf;
mod error;
mod rules;

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::package::{self, BuiltVariant, PackageError, name::VariantName};
use crate::toolchain::{FactCache, find_nvcc, find_torch};

pub use error::CheckError;
pub use rules::{CheckOptions, Finding};

/// The findings on one variant.
#[derive(Debug, Clone, Serialize)]
pub struct VariantCheck {
    pub variant: String,
    /// The rules that ran on it (none when it could not be read as a variant).
    pub rules: Vec<&'static str>,
    pub findings: Vec<Finding>,
    /// The commit its provenance records, for the rule across variants (`same-commit`).
    #[serde(skip)]
    pub commit: Option<String>,
}

impl VariantCheck {
    /// Every rule on a variant that reads back verified.
    pub fn of(variant: &BuiltVariant, opts: &CheckOptions) -> Self {
        VariantCheck {
            variant: variant.name.clone(),
            rules: rules_for(variant, opts),
            findings: check_variant(variant, opts),
            commit: variant.commit().map(str::to_string),
        }
    }
}

/// The rule across the variants of one build: they were all built from one commit. With more
/// than one, each variant gets a finding naming the commits and which variants each built.
fn same_commit(checks: &mut [VariantCheck]) {
    let mut by_commit: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for c in checks.iter() {
        if let Some(commit) = &c.commit {
            by_commit
                .entry(commit.clone())
                .or_default()
                .push(c.variant.clone());
        }
    }
    let commits: Vec<(String, Vec<String>)> = by_commit.into_iter().collect();
    for c in checks.iter_mut().filter(|c| c.commit.is_some()) {
        c.rules.push("same-commit");
        if commits.len() > 1 {
            c.findings.push(Finding {
                rule: "same-commit",
                file: "metadata.json".into(),
                message: format!(
                    "the build mixes variants of different commits: {}",
                    package::describe_commits(&commits)
                ),
                fix: "rebuild every variant from one commit with `kbuild build` (publish \
                      refuses a mixed build unless `--allow-mixed`)"
                    .into(),
            });
        }
    }
}

/// The rules [`check_variant`] runs on `variant` (reading it back ran `metadata`, `digest`
/// and `id`); the extension rules only where it has an extension.
fn rules_for(variant: &BuiltVariant, opts: &CheckOptions) -> Vec<&'static str> {
    let mut rules = vec!["metadata", "digest", "id", "layout"];
    if variant.files.iter().any(|f| f.ends_with(".so")) {
        rules.extend(["abi", "python-abi3", "needed", "rpath"]);
        if opts.manylinux.is_some() {
            rules.push("manylinux");
        }
        if opts.cuobjdump.is_some() && variant.backend == "cuda" {
            rules.push("archs");
        }
    }
    rules
}

/// How many distinct rules ran over `checks`.
pub fn rules_count(checks: &[VariantCheck]) -> usize {
    let mut all: Vec<&str> = checks
        .iter()
        .flat_map(|c| c.rules.iter().copied())
        .collect();
    all.sort_unstable();
    all.dedup();
    all.len()
}

/// Check a build directory, a variant directory, an artifact (`.tar.gz`) or a wheel (`.whl`).
pub fn check_path(path: &Path, opts: &CheckOptions) -> Result<Vec<VariantCheck>, CheckError> {
    if std::fs::symlink_metadata(path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
        return Err(CheckError::Missing {
            path: path.to_path_buf(),
        });
    }
    let name = path
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let staging = tempfile::tempdir().map_err(|source| PackageError::Io {
        path: std::env::temp_dir(),
        source,
    })?;
    if name.ends_with(".tar.gz") {
        return Ok(vec![
            match package::unpack_artifact(path, staging.path(), opts.unpack) {
                Ok(v) => VariantCheck::of(&v, opts),
                Err(e) => unreadable(&name, &e),
            },
        ]);
    }
    if name.ends_with(".whl") {
        // A wheel that breaks its own format (an entry outside it, a RECORD that does not
        // match) is a finding on the wheel, like an artifact that cannot be unpacked.
        return match package::unpack_wheel(path, staging.path(), opts.unpack) {
            Ok(()) => dirs_below(staging.path(), opts, false),
            Err(e) => Ok(vec![unreadable(&name, &e)]),
        };
    }
    if path.join("metadata.json").is_file() {
        return Ok(vec![check_dir(path, opts, true)]);
    }
    dirs_below(path, opts, true)
}

fn dirs_below(
    dir: &Path,
    opts: &CheckOptions,
    named: bool,
) -> Result<Vec<VariantCheck>, CheckError> {
    let read = |source| PackageError::Read {
        path: dir.to_path_buf(),
        source,
    };
    let entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(read)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    // Hidden entries are kbuild's own (`.kbuild/`, and the `.stage-*`/`.old-*` a killed build
    // leaves until the next one sweeps them), never variants.
    let hidden = |p: &Path| {
        p.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.'))
    };
    let mut dirs: Vec<&PathBuf> = entries
        .iter()
        .filter(|p| !hidden(p) && p.join("metadata.json").is_file())
        .collect();
    dirs.sort();
    if dirs.is_empty() {
        let mut archives: Vec<String> = entries
            .iter()
            .filter_map(|p| p.file_name()?.to_str())
            .filter(|n| n.ends_with(".tar.gz") || n.ends_with(".whl"))
            .map(str::to_string)
            .collect();
        archives.sort();
        return Err(CheckError::NoVariants {
            path: dir.to_path_buf(),
            archives,
        });
    }
    let mut checks: Vec<VariantCheck> = dirs.iter().map(|d| check_dir(d, opts, named)).collect();
    same_commit(&mut checks);
    Ok(checks)
}

/// `named`: the directory name is the variant name (not so in a wheel, where it is the package).
fn check_dir(dir: &Path, opts: &CheckOptions, named: bool) -> VariantCheck {
    let name = dir
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    // Reading a variant without these fails on the first one opened; name them all instead.
    let missing: Vec<Finding> = ["__init__.py", "_ops.py"]
        .into_iter()
        .filter(|f| !dir.join(f).is_file())
        .map(missing_file)
        .collect();
    let mut check = if !missing.is_empty() {
        VariantCheck {
            variant: name.clone(),
            rules: vec!["layout"],
            findings: missing,
            commit: None,
        }
    } else {
        match BuiltVariant::read(dir) {
            Ok(v) => VariantCheck {
                variant: name.clone(),
                ..VariantCheck::of(&v, opts)
            },
            Err(e) => unreadable(&name, &e),
        }
    };
    if named {
        check.rules.push("variant-name");
    }
    if named && VariantName::parse(&name).is_none() {
        check.findings.insert(0, Finding {
            rule: "variant-name",
            file: format!("{name}/"),
            message: "not a variant name kernels recognizes (`torch<ver>-<abi>-<compute>-<arch>-<os>`)".into(),
            fix: "keep the directory name `kbuild build` gave it".into(),
        });
    }
    check
}

fn unreadable(name: &str, e: &PackageError) -> VariantCheck {
    let (rule, file) = match e {
        PackageError::Digest { .. } => ("digest", "metadata.json".to_string()),
        PackageError::Metadata { .. } => ("metadata", "metadata.json".to_string()),
        PackageError::Namespace { path, .. } => (
            "id",
            path.file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned(),
        ),
        PackageError::TooLarge { .. }
        | PackageError::Damaged { .. }
        | PackageError::Artifact { .. } => ("archive", format!("{name}/")),
        PackageError::Wheel { .. } => ("wheel", format!("{name}/")),
        _ => ("layout", format!("{name}/")),
    };
    // The causes too: "cannot unpack `x`: it is damaged" says little without "unexpected EOF".
    let mut message = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        message.push_str(&format!(": {c}"));
        cause = c.source();
    }
    let message = message
        .replace('\n', " ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let fix = crate::hint::Hint::hint(e).unwrap_or_else(|| "rebuild it with `kbuild build`".into());
    VariantCheck {
        variant: name.to_string(),
        rules: vec![rule],
        findings: vec![Finding {
            rule,
            file,
            message,
            fix,
        }],
        commit: None,
    }
}

/// The rules on a variant that reads back verified (metadata, digest and `id` already hold).
pub fn check_variant(variant: &BuiltVariant, opts: &CheckOptions) -> Vec<Finding> {
    let mut out = Vec::new();
    let compiled = matches!(
        VariantName::parse(&variant.name),
        Some(VariantName::Compiled { .. } | VariantName::StableAbi { .. })
    );
    let mut needed = vec![
        "__init__.py".to_string(),
        "_ops.py".into(),
        "metadata.json".into(),
    ];
    if compiled {
        needed.push(format!("{}.abi3.so", variant.id));
    }
    for file in needed {
        if !variant.files.contains(&file) {
            out.push(missing_file(&file));
        }
    }
    for rel in variant.files.iter().filter(|f| f.ends_with(".so")) {
        out.extend(elf::check_extension(variant, rel, opts));
    }
    out
}

fn missing_file(file: &str) -> Finding {
    Finding {
        rule: "layout",
        file: file.to_string(),
        message: "missing: kernels needs it to load the variant".into(),
        fix: "rebuild the variant with `kbuild build`".into(),
    }
}

/// One line per finding: `<variant>/<file>: [<rule>] <message> (fix: <what to do>)`.
pub fn human(checks: &[VariantCheck]) -> String {
    let mut text = String::new();
    for c in checks {
        for f in &c.findings {
            let file = if f.file.ends_with('/') {
                f.file.clone()
            } else {
                format!("{}/{}", c.variant, f.file)
            };
            text.push_str(&format!(
                "{file}: [{}] {} (fix: {})\n",
                f.rule, f.message, f.fix
            ));
        }
    }
    text
}
/// The `cuobjdump` for the `archs` rule: on PATH or under `CUDA_HOME`, else, when `path`
/// holds a CUDA variant, the one beside the nvcc a build of `project_dir` uses.
pub fn find_cuobjdump(project_dir: &Path, path: &Path) -> Option<PathBuf> {
    on_path().or_else(|| names_cuda(path).then(|| beside_nvcc(project_dir)).flatten())
}

impl VariantCheck {
    /// A CUDA variant (by its name): the `archs` rule applies to it.
    pub fn is_cuda(&self) -> bool {
        matches!(
            VariantName::parse(&self.variant),
            Some(VariantName::Compiled { compute, .. } | VariantName::StableAbi { compute, .. })
                if compute.starts_with("cu")
        )
    }
}

/// Whether `path` or an entry of it names a CUDA variant (`-cu132-`, a wheel's `.cu132`):
/// only then is the toolchain asked where nvcc is.
fn names_cuda(path: &Path) -> bool {
    let cuda = |name: &str| {
        name.match_indices("cu").any(|(i, _)| {
            let before = name[..i].ends_with(['-', '.']);
            before && name[i + 2..].starts_with(|c: char| c.is_ascii_digit())
        })
    };
    let own = path.file_name().is_some_and(|n| cuda(&n.to_string_lossy()));
    let entries = std::fs::read_dir(path).into_iter().flatten().flatten();
    own || entries
        .map(|e| e.file_name())
        .any(|n| cuda(&n.to_string_lossy()))
}

/// `cuobjdump` beside the nvcc a build of this project uses (the pip CUDA next to torch),
/// found as the build finds it, from the toolchain facts it remembered.
fn beside_nvcc(project_dir: &Path) -> Option<PathBuf> {
    let facts = FactCache::open(&project_dir.join("build/.kbuild/toolchain.json"));
    let torch = find_torch(None, project_dir, &facts).ok()?;
    let nvcc = find_nvcc(None, &torch.info, &facts).ok()?;
    let cuobjdump = nvcc.path.with_file_name("cuobjdump");
    cuobjdump.is_file().then_some(cuobjdump)
}

/// `cuobjdump` on PATH, else next to `nvcc` on PATH or under `CUDA_HOME`.
fn on_path() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = crate::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(home) = crate::env::var_os("CUDA_HOME") {
        dirs.push(PathBuf::from(home).join("bin"));
    }
    dirs.into_iter()
        .map(|d| d.join("cuobjdump"))
        .find(|p| p.is_file())
}
