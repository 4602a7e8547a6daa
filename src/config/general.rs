//! `[general]` and its sub-tables (`hub`, `cuda`, `neuron`, `xpu`, `tpu`), including the edition.

use std::ops::Range;

use toml::de::DeValue;

use super::error::{ConfigError, ErrorKind};
use super::model::{
    Backend, BackendGeneral, CudaGeneral, Edition, General, Hub, KernelDependency, KernelPin,
};
use super::reader::{KeySpec, Sp, Table, key, key_v5, spec, version};
use super::suggest;

const GENERAL: &[KeySpec<'static>] = &[
    key("name", "name = \"my-kernel\""),
    key("version", "version = 1"),
    key("license", "license = \"apache-2.0\""),
    key("upstream", "upstream = \"https://github.com/org/repo\""),
    key("source", "source = \"https://github.com/org/repo\""),
    key("backends", "backends = [\"cuda\"]"),
    key("hub", "[general.hub]"),
    key("python-depends", "python-depends = [\"einops\"]"),
    key("cuda", "[general.cuda]"),
    key("neuron", "[general.neuron]"),
    key("xpu", "[general.xpu]"),
    key("edition", "edition = 5"),
    key_v5(
        "kernel-depends",
        "kernel-depends = [{ repo-id = \"org/kernel\", version = 1 }]",
    ),
    key_v5("tpu", "[general.tpu]"),
];

const HUB: &[KeySpec<'static>] = &[
    key("repo-id", "repo-id = \"org/my-kernel\""),
    key("branch", "branch = \"main\""),
];

const CUDA_GENERAL: &[KeySpec<'static>] = &[
    key("minver", "minver = \"12.4\""),
    key("maxver", "maxver = \"13.0\""),
    key(
        "python-depends",
        "python-depends = [\"nvidia-cutlass-dsl\"]",
    ),
    key_v5(
        "kernel-depends",
        "kernel-depends = [{ repo-id = \"org/kernel\", version = 1 }]",
    ),
];

const OTHER_BACKEND_GENERAL: &[KeySpec<'static>] = &[
    key("python-depends", "python-depends = [\"...\"]"),
    key_v5(
        "kernel-depends",
        "kernel-depends = [{ repo-id = \"org/kernel\", version = 1 }]",
    ),
];

const TPU_GENERAL: &[KeySpec<'static>] = &[key("python-depends", "python-depends = []")];

const KERNEL_DEP: &[KeySpec<'static>] = &[
    key("repo-id", "repo-id = \"org/kernel\""),
    key("version", "version = 1"),
    key("revision", "revision = \"<git revision>\""),
];

const MISSING_BACKENDS: &str = ": the backends this kernel supports (a build.toml without it \
                                predates the v4 format: migrate it with HF's `kernel-builder \
                                update-build`)";

/// `python-depends` that HF's kernel-builder resolves (kernels-data's python_dependencies.json),
/// in `[general]` and in each backend's table.
pub(crate) const GENERAL_PYTHON_DEPENDS: &[&str] = &["einops", "helion", "tvm-ffi"];
pub(crate) const CUDA_PYTHON_DEPENDS: &[&str] = &["nvidia-cutlass-dsl"];
const NEURON_PYTHON_DEPENDS: &[&str] = &["nki"];
const XPU_PYTHON_DEPENDS: &[&str] = &["onednn"];
const TPU_PYTHON_DEPENDS: &[&str] = &[];

/// Every backend-specific dependency list, to say where a misplaced one belongs.
const BACKEND_PYTHON_DEPENDS: [(&str, &[&str]); 4] = [
    ("cuda", CUDA_PYTHON_DEPENDS),
    ("neuron", NEURON_PYTHON_DEPENDS),
    ("xpu", XPU_PYTHON_DEPENDS),
    ("tpu", TPU_PYTHON_DEPENDS),
];

pub(crate) fn read_edition(general: &Table<'_, '_>) -> Result<Edition, ConfigError> {
    let spec = spec(GENERAL, "edition");
    match general.integer(spec)? {
        None => Ok(Edition::V4),
        Some(Sp { v: 5, .. }) => Ok(Edition::V5),
        Some(Sp { v, span }) => Err(general.src.error(
            &span,
            ErrorKind::Edition,
            format!("unsupported edition `{v}`"),
            "kbuild reads `edition = 5` and the edition-less v4 format (no `edition` key); \
             migrate older files with HF's `kernel-builder update-build`"
                .to_string(),
        )),
    }
}

pub(crate) fn read_general(
    t: &Table<'_, '_>,
    v5: bool,
) -> Result<(General, Range<usize>), ConfigError> {
    let g = |name| spec(GENERAL, name);
    if t.get("backends").is_none() {
        // Files older than v4 have no `backends` and other unknown keys; say that first.
        return Err(t.missing(g("backends"), MISSING_BACKENDS));
    }
    t.check_keys(GENERAL, v5)?;
    let name = read_name(t)?;
    let version = read_major_version(t)?;
    let license = read_license(t)?;
    let upstream = git_url(t, g("upstream"))?;
    let source = git_url(t, g("source"))?;
    let backends = read_backends(t, g("backends"))?;
    let hub = match t.table(g("hub"))? {
        Some(h) => read_hub(&h)?,
        None => Hub::default(),
    };
    let general_python = python_depends(t, g("python-depends"), GENERAL_PYTHON_DEPENDS)?;
    let cuda = match t.table(g("cuda"))? {
        Some(c) => read_cuda_general(&c, v5)?,
        None => CudaGeneral::default(),
    };
    let other = |name, keys, valid| read_backend_general(t, name, keys, valid, v5);
    let neuron = other("neuron", OTHER_BACKEND_GENERAL, NEURON_PYTHON_DEPENDS)?;
    let xpu = other("xpu", OTHER_BACKEND_GENERAL, XPU_PYTHON_DEPENDS)?;
    let tpu = other("tpu", TPU_GENERAL, TPU_PYTHON_DEPENDS)?;
    let general = General {
        name: name.v,
        version,
        license,
        upstream,
        source,
        backends,
        hub,
        python_depends: general_python,
        kernel_depends: kernel_depends(t, g("kernel-depends"))?,
        cuda,
        neuron,
        xpu,
        tpu,
    };
    Ok((general, name.span))
}

/// `name`: a valid kernels-data `KernelName`, with its span for the `torch-ext` check.
fn read_name(t: &Table<'_, '_>) -> Result<Sp<String>, ConfigError> {
    let name = t.required_string(
        spec(GENERAL, "name"),
        ": the kernel's name, lowercase with `-`",
    )?;
    if kernels_data::config::KernelName::new(name.v.clone()).is_err() {
        let fixed = name.v.to_lowercase().replace(['_', ' ', '.'], "-");
        let example = if kernels_data::config::KernelName::new(fixed.clone()).is_ok() {
            format!("e.g. `{fixed}`; ")
        } else {
            String::new()
        };
        return Err(t.invalid(
            &name.span,
            format!("invalid kernel name `{}`", name.v),
            format!(
                "use lowercase letters, digits and `-`, start with a letter, end with a letter or \
                 digit ({example}the Python package name is the name with `-` replaced by `_`)"
            ),
        ));
    }
    Ok(name)
}

/// `version`: the kernel's major version, the `v<N>` branch it is published to.
fn read_major_version(t: &Table<'_, '_>) -> Result<u32, ConfigError> {
    let s = spec(GENERAL, "version");
    let version = t
        .integer(s)?
        .ok_or_else(|| t.missing(s, ": the kernel's major version (branch `v1`)"))?;
    u32::try_from(version.v).map_err(|_| {
        t.invalid(
            &version.span,
            format!(
                "`version` must be a whole number from 0 to {}, found `{}`",
                u32::MAX,
                version.v
            ),
            "write e.g. `version = 1`: the major version, published to the branch `v1`".to_string(),
        )
    })
}

/// `license`: a non-empty Hub license identifier.
fn read_license(t: &Table<'_, '_>) -> Result<String, ConfigError> {
    let license = t.required_string(spec(GENERAL, "license"), ": a Hub license identifier")?;
    if license.v.trim().is_empty() {
        return Err(t.invalid(
            &license.span,
            "`license` is empty".to_string(),
            "write a Hub license identifier, e.g. `license = \"apache-2.0\"`".to_string(),
        ));
    }
    Ok(license.v)
}

/// `[general.<backend>]` for neuron, xpu and tpu: their `python-depends` (from `valid`) and,
/// where `keys` has it, `kernel-depends`.
fn read_backend_general(
    t: &Table<'_, '_>,
    name: &str,
    keys: &[KeySpec<'static>],
    valid: &[&str],
    v5: bool,
) -> Result<BackendGeneral, ConfigError> {
    let Some(o) = t.table(spec(GENERAL, name))? else {
        return Ok(BackendGeneral::default());
    };
    o.check_keys(keys, v5)?;
    Ok(BackendGeneral {
        python_depends: python_depends(&o, &keys[0], valid)?,
        kernel_depends: match keys.get(1) {
            Some(k) => kernel_depends(&o, k)?,
            None => Vec::new(),
        },
    })
}

fn read_backends(t: &Table<'_, '_>, s: &KeySpec<'_>) -> Result<Vec<Backend>, ConfigError> {
    let list = t
        .deduped_strings(s, "backend")?
        .ok_or_else(|| t.missing(s, MISSING_BACKENDS))?;
    if list.v.is_empty() {
        return Err(t.invalid(
            &list.span,
            "`backends` is empty".to_string(),
            "list at least one backend, e.g. `backends = [\"cuda\"]`".to_string(),
        ));
    }
    let mut out = Vec::new();
    for item in &list.v {
        let backend = item.v.parse::<Backend>().map_err(|e| {
            let names: Vec<&str> = Backend::ALL.iter().map(|b| b.as_str()).collect();
            t.invalid(
                &item.span,
                e.to_string(),
                suggest::did_you_mean(&item.v, &names, "backends"),
            )
        })?;
        out.push(backend);
    }
    Ok(out)
}

fn read_hub(t: &Table<'_, '_>) -> Result<Hub, ConfigError> {
    t.check_keys(HUB, false)?;
    let repo_id = t.string(&HUB[0])?;
    if let Some(r) = &repo_id {
        let valid_part = |p: &str| {
            !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        };
        let ok =
            matches!(r.v.split_once('/'), Some((org, name)) if valid_part(org) && valid_part(name));
        if !ok {
            return Err(t.invalid(
                &r.span,
                format!("invalid Hub repository id `{}`", r.v),
                "write `org/name`, e.g. `repo-id = \"kernels-community/activation\"`".to_string(),
            ));
        }
    }
    Ok(Hub {
        repo_id: repo_id.map(|r| r.v),
        branch: t.string(&HUB[1])?.map(|b| b.v),
    })
}

fn read_cuda_general(t: &Table<'_, '_>, v5: bool) -> Result<CudaGeneral, ConfigError> {
    t.check_keys(CUDA_GENERAL, v5)?;
    Ok(CudaGeneral {
        minver: version(t, &CUDA_GENERAL[0])?,
        maxver: version(t, &CUDA_GENERAL[1])?,
        python_depends: python_depends(t, &CUDA_GENERAL[2], CUDA_PYTHON_DEPENDS)?,
        kernel_depends: kernel_depends(t, &CUDA_GENERAL[3])?,
    })
}

fn git_url(t: &Table<'_, '_>, s: &KeySpec<'_>) -> Result<Option<String>, ConfigError> {
    let Some(url) = t.string(s)? else {
        return Ok(None);
    };
    kernels_data::config::GitUrl::parse(&url.v).map_err(|why| {
        t.invalid(
            &url.span,
            format!("`{}` is not a git URL: {why}", s.name),
            format!("write a URL `git clone` accepts, e.g. `{}`", s.example),
        )
    })?;
    Ok(Some(url.v))
}

fn python_depends(
    t: &Table<'_, '_>,
    s: &KeySpec<'_>,
    valid: &[&str],
) -> Result<Vec<String>, ConfigError> {
    let Some(list) = t.deduped_strings(s, "dependency")? else {
        return Ok(Vec::new());
    };
    for dep in &list.v {
        if valid.contains(&dep.v.as_str()) {
            continue;
        }
        let owner = BACKEND_PYTHON_DEPENDS
            .iter()
            .find(|(_, deps)| deps.contains(&dep.v.as_str()));
        let hint = if let Some((backend, _)) = owner {
            format!(
                "`{}` is a {backend} dependency: list it under `[general.{backend}]` \
                 `python-depends`",
                dep.v
            )
        } else if GENERAL_PYTHON_DEPENDS.contains(&dep.v.as_str()) {
            format!(
                "`{}` is not backend-specific: list it in `[general]` `python-depends`",
                dep.v
            )
        } else if valid.is_empty() {
            "kernel-builder knows no Python dependencies for this backend: remove the entry"
                .to_string()
        } else {
            suggest::did_you_mean(&dep.v, valid, "dependencies here")
        };
        return Err(t.invalid(
            &dep.span,
            format!("unknown Python dependency `{}` in `{}`", dep.v, t.name),
            hint,
        ));
    }
    Ok(list.v.into_iter().map(|d| d.v).collect())
}

fn kernel_depends(
    t: &Table<'_, '_>,
    s: &KeySpec<'_>,
) -> Result<Vec<KernelDependency>, ConfigError> {
    let Some(value) = t.get(s.name) else {
        return Ok(Vec::new());
    };
    let Some(items) = value.get_ref().as_array() else {
        return Err(t.wrong_type(s, value, "an array of tables"));
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let DeValue::Table(entries) = item.get_ref() else {
            return Err(t.wrong_type(s, item, "an array of tables"));
        };
        let name = format!("{}.{}[{i}]", t.name.trim_matches(['[', ']']), s.name);
        let dep = Table::new(t.src, name, item.span(), entries);
        dep.check_keys(KERNEL_DEP, false)?;
        let repo_id = dep.required_string(&KERNEL_DEP[0], ": the Hub repository of the kernel")?;
        let pin = match (dep.integer(&KERNEL_DEP[1])?, dep.string(&KERNEL_DEP[2])?) {
            (Some(v), None) => KernelPin::Version(u64::try_from(v.v).map_err(|_| {
                dep.invalid(
                    &v.span,
                    format!("`version` must be a whole number, found `{}`", v.v),
                    "write e.g. `version = 1`".to_string(),
                )
            })?),
            (None, Some(r)) => KernelPin::Revision(r.v),
            (Some(_), Some(r)) => {
                return Err(dep.src.error(
                    &r.span,
                    ErrorKind::Conflict,
                    format!("`version` and `revision` are exclusive in `{}`", dep.name),
                    "pin the dependency with one of them".to_string(),
                ));
            }
            (None, None) => {
                return Err(dep.missing(&KERNEL_DEP[1], " (or `revision = \"...\"`)"));
            }
        };
        out.push(KernelDependency {
            repo_id: repo_id.v,
            pin,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_depends_resolve_in_kernels_data() {
        // `helion` is newer than kernels-data 0.16.2 (HF's docs list it); the rest must resolve.
        let general: Vec<String> = GENERAL_PYTHON_DEPENDS
            .iter()
            .filter(|d| **d != "helion")
            .map(|d| d.to_string())
            .collect();
        let g = kernels_data::config::General {
            name: kernels_data::config::KernelName::new("parity").unwrap(),
            version: 1,
            license: "mit".into(),
            upstream: None,
            source: None,
            backends: vec![kernels_data::config::Backend::Cuda],
            hub: None,
            python_depends: Some(general.clone()),
            cuda: Some(kernels_data::config::CudaGeneral {
                minver: None,
                maxver: None,
                python_depends: Some(CUDA_PYTHON_DEPENDS.iter().map(|d| d.to_string()).collect()),
            }),
            neuron: None,
            xpu: None,
        };
        let all = g
            .all_python_depends(kernels_data::config::Backend::Cuda)
            .unwrap();
        assert_eq!(all.len(), general.len() + CUDA_PYTHON_DEPENDS.len());
    }
}
