//! `[kernel.<name>]` tables and kbuild's `[kbuild.cuda-capabilities]` matrix.

use std::ops::Range;

use toml::de::DeValue;

use super::capability::Capability;
use super::error::{ConfigError, ErrorKind};
use super::location::Location;
use super::model::{Backend, DType, Dependency, Kernel};
use super::paths::{PathKind, PathRef, include_dirs, path_list};
use super::reader::{self, KeySpec, Sp, Table, article, key};
use super::suggest;
use crate::hint::Hint;

/// A kernel table and the spans the cross-checks need.
pub(crate) struct RawKernel {
    pub kernel: Kernel,
    /// The `[kernel.<name>]` header (or inline definition).
    pub span: Range<usize>,
    pub backend_span: Range<usize>,
    /// `cuda-capabilities` entries with their spans (real capabilities only).
    pub capabilities: Vec<Sp<Capability>>,
}

/// `[kbuild.cuda-capabilities]`: capability keys (with spans) and their dtypes, in file order.
pub(crate) type RawMatrix = Vec<(Sp<Capability>, Vec<DType>)>;

/// `[kernel.*]` keys every backend accepts.
const COMMON: &[KeySpec<'static>] = &[
    key("backend", "backend = \"cuda\""),
    key("depends", "depends = [\"torch\"]"),
    key("src", "src = [\"kernels/relu.cu\"]"),
    key("include", "include = [\"include\"]"),
    key("cxx-flags", "cxx-flags = [\"-O3\"]"),
];

/// Keys that only one backend's kernels accept.
const BACKEND_KEYS: &[(Backend, KeySpec<'static>)] = &[
    (
        Backend::Cuda,
        key(
            "cuda-capabilities",
            "cuda-capabilities = [\"8.0\", \"9.0\"]",
        ),
    ),
    (
        Backend::Cuda,
        key("cuda-flags", "cuda-flags = [\"-lineinfo\"]"),
    ),
    (Backend::Cuda, key("cuda-minver", "cuda-minver = \"12.8\"")),
    (
        Backend::Rocm,
        key("rocm-archs", "rocm-archs = [\"gfx942\"]"),
    ),
    (Backend::Rocm, key("hip-flags", "hip-flags = [\"-O3\"]")),
    (Backend::Xpu, key("sycl-flags", "sycl-flags = [\"-O3\"]")),
];

/// Backends that HF's schema allows `[kernel.*]` tables for.
const KERNEL_BACKENDS: [Backend; 5] = [
    Backend::Cpu,
    Backend::Cuda,
    Backend::Metal,
    Backend::Rocm,
    Backend::Xpu,
];

const MATRIX_KEYS: &[KeySpec<'static>] = &[key(
    "cuda-capabilities",
    "[kbuild.cuda-capabilities] \"9.0\" = [\"float32\", \"float16\", \"bfloat16\"]",
)];

const MATRIX_DTYPES: KeySpec<'static> = key(
    "<capability>",
    "\"9.0\" = [\"float32\", \"float16\", \"bfloat16\"]",
);

/// Read every `[kernel.*]` table, sorted by name.
pub(crate) fn read_kernels(
    root: &Table<'_, '_>,
    paths: &mut Vec<PathRef>,
) -> Result<Vec<RawKernel>, ConfigError> {
    let spec = key("kernel", "[kernel.relu]");
    let Some(all) = root.table(&spec)? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for (name, value) in all.entries() {
        let name_str = name.get_ref().to_string();
        let DeValue::Table(entries) = value.get_ref() else {
            let found = value.get_ref().type_str();
            return Err(root.src.error(
                &value.span(),
                ErrorKind::WrongType,
                format!(
                    "`kernel.{name_str}` must be a table, found {} {found}",
                    article(found)
                ),
                format!("write it as `[kernel.{name_str}]` followed by its keys"),
            ));
        };
        if name_str.is_empty()
            || !name_str
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(root.src.error(
                &name.span(),
                ErrorKind::InvalidValue,
                format!("invalid kernel table name `{name_str}`"),
                "kernel names become file names: use letters, digits, `_` and `-`".to_string(),
            ));
        }
        let t = Table::new(root.src, all.child_name(&name_str), value.span(), entries);
        out.push(read_kernel(&t, name_str, paths)?);
    }
    out.sort_by(|a, b| a.kernel.name.cmp(&b.kernel.name));
    Ok(out)
}

fn read_kernel(
    t: &Table<'_, '_>,
    name: String,
    paths: &mut Vec<PathRef>,
) -> Result<RawKernel, ConfigError> {
    let (backend, backend_span) = read_kernel_backend(t)?;
    let allowed = kernel_keys(backend);
    check_kernel_keys(t, backend, &allowed)?;
    let spec = |n: &str| {
        allowed
            .iter()
            .find(|k| k.name == n)
            .expect("key is in the kernel schema")
    };
    let (depends, depends_locations) = read_depends(t, spec("depends"))?.into_iter().unzip();
    let src = t
        .strings(spec("src"))?
        .ok_or_else(|| t.missing(spec("src"), ": the kernel's source files and headers"))?;
    let src = path_list(t, spec("src"), src, PathKind::Source, paths)?;
    let include = include_dirs(t, spec("include"), paths)?;
    let listed = match backend {
        Backend::Cuda => kernel_capabilities(t, spec("cuda-capabilities"))?,
        _ => None,
    };
    // Keys of other backends were rejected above, so each of these reads its own backend's key.
    let backend_strings = |name: &str| match allowed.iter().find(|k| k.name == name) {
        Some(k) => reader::strings(t, k),
        None => Ok(Vec::new()),
    };
    let cuda_minver = match allowed.iter().find(|k| k.name == "cuda-minver") {
        Some(k) => reader::version(t, k)?,
        None => None,
    };
    let location = t.src.location(t.span.start);
    let cuda_capabilities = listed.as_ref().map(|l| l.iter().map(|c| c.v).collect());
    let capabilities = listed.unwrap_or_default();
    let capability_locations: Vec<Location> = capabilities
        .iter()
        .map(|c| t.src.location(c.span.start))
        .collect();
    let kernel = Kernel {
        name,
        backend,
        src,
        include,
        depends,
        depends_locations,
        cuda_capabilities,
        cuda_flags: backend_strings("cuda-flags")?,
        cxx_flags: reader::strings(t, spec("cxx-flags"))?,
        cuda_minver,
        rocm_archs: match allowed.iter().find(|k| k.name == "rocm-archs") {
            Some(k) => t
                .deduped_strings(k, "architecture")?
                .map(|l| l.v.into_iter().map(|a| a.v).collect())
                .unwrap_or_default(),
            None => Vec::new(),
        },
        hip_flags: backend_strings("hip-flags")?,
        sycl_flags: backend_strings("sycl-flags")?,
        location,
        capability_locations,
    };
    Ok(RawKernel {
        kernel,
        span: t.span.clone(),
        backend_span,
        capabilities,
    })
}

/// `backend`: one that has compiled kernels, with the span of its value.
fn read_kernel_backend(t: &Table<'_, '_>) -> Result<(Backend, Range<usize>), ConfigError> {
    if t.get(COMMON[0].name).is_none() {
        // A misspelled `backend` (`backnd`) is an unknown key, with the key it resembles.
        let any_kernel: Vec<KeySpec<'_>> = (COMMON.iter())
            .chain(BACKEND_KEYS.iter().map(|(_, k)| k))
            .copied()
            .collect();
        t.check_keys(&any_kernel, false)?;
        return Err(t.missing(
            &key("backend", guessed_backend(t)),
            ": the backend this kernel is compiled for",
        ));
    }
    let written = t.required_string(&COMMON[0], ": the backend this kernel is compiled for")?;
    let names: Vec<&str> = KERNEL_BACKENDS.iter().map(|b| b.as_str()).collect();
    match written.v.parse::<Backend>() {
        Ok(b) if KERNEL_BACKENDS.contains(&b) => Ok((b, written.span)),
        Ok(b) => Err(t.invalid(
            &written.span,
            format!("backend `{b}` has no compiled kernels"),
            format!("kernel backends: {}", suggest::list(&names)),
        )),
        Err(e) => Err(t.invalid(
            &written.span,
            e.to_string(),
            suggest::did_you_mean(&written.v, &names, "kernel backends"),
        )),
    }
}

/// `backend = "…"` as its sources suggest: `cuda` for `.cu` files, else `cpu`.
fn guessed_backend(t: &Table<'_, '_>) -> &'static str {
    let cuda = t.get("src").is_some_and(|src| {
        match src.get_ref() {
        DeValue::Array(items) => items.iter().any(|i| {
            matches!(i.get_ref(), DeValue::String(s) if s.ends_with(".cu") || s.ends_with(".cuh"))
        }),
        _ => false,
    }
    });
    match cuda {
        true => "backend = \"cuda\"",
        false => "backend = \"cpu\"",
    }
}

/// The keys a kernel of `backend` accepts: the common ones and its backend's own.
fn kernel_keys(backend: Backend) -> Vec<KeySpec<'static>> {
    COMMON
        .iter()
        .chain(
            BACKEND_KEYS
                .iter()
                .filter(|(b, _)| *b == backend)
                .map(|(_, k)| k),
        )
        .copied()
        .collect()
}

/// A CUDA kernel's own `cuda-capabilities` (with spans); `None` when it lists none, an error
/// when the list is empty.
fn kernel_capabilities(
    t: &Table<'_, '_>,
    s: &KeySpec<'_>,
) -> Result<Option<Vec<Sp<Capability>>>, ConfigError> {
    let Some(list) = t.strings(s)? else {
        return Ok(None);
    };
    if list.v.is_empty() {
        return Err(t.invalid(
            &list.span,
            format!("`cuda-capabilities` in `{}` is empty", t.name),
            "remove the key to build for the project's capabilities, or list some".to_string(),
        ));
    }
    capabilities(t, s, list).map(Some)
}

/// Unknown keys in file order; a key of another backend's kernels says which backend it is for.
fn check_kernel_keys(
    t: &Table<'_, '_>,
    backend: Backend,
    allowed: &[KeySpec<'_>],
) -> Result<(), ConfigError> {
    for (k, _) in t.entries() {
        let name = k.get_ref().as_ref();
        if allowed.iter().any(|s| s.name == name) {
            continue;
        }
        if let Some((owner, _)) = BACKEND_KEYS.iter().find(|(_, s)| s.name == name) {
            return Err(t.src.error(
                &k.span(),
                ErrorKind::UnknownKey,
                format!(
                    "unknown key `{name}` in `{}` (a `{backend}` kernel)",
                    t.name
                ),
                format!("`{name}` applies to `backend = \"{owner}\"` kernels only: remove it"),
            ));
        }
        return t.check_keys(allowed, false);
    }
    Ok(())
}

/// Each entry of `depends` with where it is written (later stages report a missing library
/// there).
fn read_depends(
    t: &Table<'_, '_>,
    s: &KeySpec<'_>,
) -> Result<Vec<(Dependency, Location)>, ConfigError> {
    let list = t.deduped_strings(s, "dependency")?.ok_or_else(|| {
        t.missing(
            s,
            " (or `depends = []`): the C++ libraries the kernel compiles against",
        )
    })?;
    list.v
        .iter()
        .map(|dep| {
            let parsed = dep.v.parse::<Dependency>().map_err(|e| {
                t.invalid(
                    &dep.span,
                    format!("unknown dependency `{}` in `{}`", dep.v, t.name),
                    e.hint().unwrap_or_default(),
                )
            })?;
            Ok((parsed, t.src.location(dep.span.start)))
        })
        .collect()
}

/// Parse a capability list, each error at its own string. Like HF's builder, which intersects
/// the list with what nvcc supports, entries no GPU has (`11.8`) are dropped, with a warning;
/// a list with no real capability left is an error (HF's build fails on it too).
pub(crate) fn capabilities(
    t: &Table<'_, '_>,
    s: &KeySpec<'_>,
    list: Sp<Vec<Sp<String>>>,
) -> Result<Vec<Sp<Capability>>, ConfigError> {
    let mut out: Vec<Sp<Capability>> = Vec::new();
    let mut first_unreal = None;
    for item in list.v {
        let cap = Capability::parse_shape(&item.v)
            .map_err(|e| t.invalid(&item.span, e.to_string(), e.hint().unwrap_or_default()))?;
        if let Err(e) = cap.exists() {
            t.src.warn(
                &item.span,
                format!("{e} in `{}`: no GPU has it, so it is ignored", t.name),
                format!("remove it; {}", e.hint().unwrap_or_default()),
            );
            first_unreal.get_or_insert((item, e));
            continue;
        }
        if out.iter().any(|c| c.v == cap) {
            t.warn_duplicate(&item, s, "capability");
            continue;
        }
        out.push(Sp {
            v: cap,
            span: item.span,
        });
    }
    if out.is_empty()
        && let Some((item, e)) = first_unreal
    {
        return Err(t.invalid(
            &item.span,
            format!("{e}: `{}` in `{}` names no real capability", s.name, t.name),
            format!(
                "list at least one real capability, or remove `{}` to build for the default \
                 set; {}",
                s.name,
                e.hint().unwrap_or_default()
            ),
        ));
    }
    Ok(out)
}

fn parse_capability(
    t: &Table<'_, '_>,
    text: &str,
    span: &Range<usize>,
) -> Result<Capability, ConfigError> {
    text.parse::<Capability>()
        .map_err(|e| t.invalid(span, e.to_string(), e.hint().unwrap_or_default()))
}

fn duplicate_capability(
    t: &Table<'_, '_>,
    cap: Capability,
    first: &Range<usize>,
    second: &Range<usize>,
) -> ConfigError {
    let first = t.src.location(first.start);
    t.src.error(
        second,
        ErrorKind::Duplicate,
        format!(
            "capability `{cap}` is listed twice in `{}` (first on line {})",
            t.name, first.line
        ),
        "remove the second entry".to_string(),
    )
}

/// `[kbuild.cuda-capabilities]`, if present.
pub(crate) fn read_matrix(root: &Table<'_, '_>) -> Result<RawMatrix, ConfigError> {
    let spec = key("kbuild", "[kbuild.cuda-capabilities]");
    let Some(kbuild) = root.table(&spec)? else {
        return Ok(Vec::new());
    };
    kbuild.check_keys(MATRIX_KEYS, false)?;
    let Some(matrix) = kbuild.table(&MATRIX_KEYS[0])? else {
        return Err(kbuild.missing(&MATRIX_KEYS[0], ", or remove `[kbuild]`"));
    };
    let entries = matrix.entries();
    if entries.is_empty() {
        return Err(matrix.invalid(
            &matrix.span,
            "`[kbuild.cuda-capabilities]` is empty".to_string(),
            format!(
                "add a capability with its dtypes, e.g. `{}`, or remove the table to use \
                 kbuild's default capabilities",
                MATRIX_DTYPES.example
            ),
        ));
    }
    let mut out: RawMatrix = Vec::new();
    for (k, value) in entries {
        let cap = parse_capability(&matrix, k.get_ref(), &k.span())?;
        if let Some((prev, _)) = out.iter().find(|(c, _)| c.v == cap) {
            return Err(duplicate_capability(&matrix, cap, &prev.span, &k.span()));
        }
        let dtype_spec = KeySpec {
            name: k.get_ref(),
            ..MATRIX_DTYPES
        };
        let list = matrix
            .unique_strings(&dtype_spec, "dtype")?
            .ok_or_else(|| matrix.wrong_type(&dtype_spec, value, "an array of dtypes"))?;
        if list.v.is_empty() {
            return Err(matrix.invalid(
                &list.span,
                format!("capability `{cap}` has no dtypes in `{}`", matrix.name),
                "list the dtypes to build for it (`float32`, `float16`, `bfloat16`), or remove \
                 the capability"
                    .to_string(),
            ));
        }
        let mut dtypes = Vec::new();
        for d in &list.v {
            let dtype = d.v.parse::<DType>().map_err(|e| {
                matrix.invalid(&d.span, e.to_string(), e.hint().unwrap_or_default())
            })?;
            dtypes.push(dtype);
        }
        dtypes.sort();
        out.push((
            Sp {
                v: cap,
                span: k.span(),
            },
            dtypes,
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use crate::config::values::DEPENDENCY_NAMES;

    #[test]
    fn depends_names_are_the_ones_kernels_data_accepts() {
        // `cutlass_4_4` is newer than kernels-data 0.16.2 (kernels-data at HEAD has it).
        for name in DEPENDENCY_NAMES.iter().filter(|n| **n != "cutlass_4_4") {
            let value = serde_json::Value::String(name.to_string());
            assert!(
                serde_json::from_value::<kernels_data::config::Dependency>(value).is_ok(),
                "kernels-data rejects `{name}`"
            );
        }
        let bogus = serde_json::Value::String("cutlass_3_7".into());
        assert!(serde_json::from_value::<kernels_data::config::Dependency>(bogus).is_err());
    }
}
