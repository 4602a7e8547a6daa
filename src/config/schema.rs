//! The build.toml schema of both editions: reads the parsed document into model pieces, rejecting
//! unknown keys, wrong types and bad values. Filesystem and cross-table checks are in `validate`.

use std::ops::Range;

use toml::de::{DeTable, DeValue};

use super::capability::Capability;
use super::error::{ConfigError, ErrorKind, Source};
use super::general::{read_edition, read_general};
use super::kernels::{self, RawKernel, RawMatrix};
use super::model::{Backend, Edition, General, StableAbi, Torch, TorchNoarch, TvmFfi};
use super::paths::{PathKind, PathRef, include_dirs, path_list};
use super::reader::{KeySpec, Table, key, parse_version, spec, strings, version};
use super::suggest;
use crate::hint::Hint;

/// Everything read from build.toml, with the spans that the later checks need.
pub(crate) struct Raw {
    pub edition: Edition,
    pub general: General,
    /// Span of `name`'s value (the `torch-ext/<python_name>` check points here).
    pub name_span: Range<usize>,
    pub framework: RawFramework,
    /// `[kernel.*]` tables in file order.
    pub kernels: Vec<RawKernel>,
    pub matrix: RawMatrix,
    /// Every path in the file, checked against the project tree later.
    pub paths: Vec<PathRef>,
}

/// `[torch]`, `[torch-noarch]` or `[tvm-ffi]`.
pub(crate) enum RawFramework {
    Torch(Torch),
    Noarch(TorchNoarch),
    TvmFfi(TvmFfi),
}

const TOP: &[KeySpec<'static>] = &[
    key("general", "[general]"),
    key("torch", "[torch]"),
    key("torch-noarch", "[torch-noarch]"),
    key("tvm-ffi", "[tvm-ffi]"),
    key("kernel", "[kernel.<name>]"),
    key("kbuild", "[kbuild.cuda-capabilities]"),
];

const TORCH: &[KeySpec<'static>] = &[
    key("src", "src = [\"torch-ext/torch_binding.cpp\"]"),
    key("include", "include = [\"include\"]"),
    key("minver", "minver = \"2.8\""),
    key("maxver", "maxver = \"2.11\""),
    key("pyext", "pyext = [\"py\", \"json\"]"),
    key("stable-abi", "stable-abi = \"2.10\""),
    key("cxx-flags", "cxx-flags = [\"-O3\"]"),
];

const TVM_FFI: &[KeySpec<'static>] = &[
    key("src", "src = [\"tvm-ffi-ext/binding.cpp\"]"),
    key("include", "include = [\"include\"]"),
    key("pyext", "pyext = [\"py\", \"json\"]"),
    key("cxx-flags", "cxx-flags = [\"-O3\"]"),
];

// HF's parser reads these two with underscores (its docs spell them with dashes).
const NOARCH: &[KeySpec<'static>] = &[
    key("pyext", "pyext = [\"py\"]"),
    key("cuda_capabilities", "cuda_capabilities = [\"9.0\"]"),
    key("rocm_archs", "rocm_archs = [\"gfx942\"]"),
];

/// Read a whole document.
pub(crate) fn read(src: &Source<'_>, doc: &DeTable<'_>) -> Result<Raw, ConfigError> {
    let root = Table::new(src, String::new(), 0..0, doc);
    check_top_level(&root)?;
    let Some(general_table) = root.table(&TOP[0])? else {
        return Err(src.error(
            &(0..0),
            ErrorKind::MissingKey,
            "missing table `[general]`",
            "add `[general]` with `name`, `version`, `license` and `backends`".to_string(),
        ));
    };
    let edition = read_edition(&general_table)?;
    let v5 = edition == Edition::V5;
    let mut paths = Vec::new();
    let (general, name_span) = read_general(&general_table, v5)?;
    let framework = read_framework(&root, v5, &mut paths)?;
    let kernels = kernels::read_kernels(&root, &mut paths)?;
    let matrix = kernels::read_matrix(&root)?;
    Ok(Raw {
        edition,
        general,
        name_span,
        framework,
        kernels,
        matrix,
        paths,
    })
}

fn check_top_level(root: &Table<'_, '_>) -> Result<(), ConfigError> {
    let valid: Vec<&str> = TOP.iter().map(|k| k.name).collect();
    for (k, v) in root.entries() {
        let name = k.get_ref().as_ref();
        if valid.contains(&name) {
            continue;
        }
        let what = if v.get_ref().is_table() {
            format!("unknown table `[{name}]`")
        } else {
            format!("unknown top-level key `{name}`")
        };
        return Err(root.src.error(
            &k.span(),
            ErrorKind::UnknownKey,
            what,
            suggest::did_you_mean(name, &valid, "tables"),
        ));
    }
    Ok(())
}

fn read_framework(
    root: &Table<'_, '_>,
    v5: bool,
    paths: &mut Vec<PathRef>,
) -> Result<RawFramework, ConfigError> {
    let mut found = Vec::new();
    for spec in &TOP[1..4] {
        if let Some(t) = root.table(spec)? {
            found.push((spec.name, t));
        }
    }
    found.sort_by_key(|(_, t)| t.span.start);
    if let [(first, _), (second, later), ..] = &found[..] {
        return Err(root.src.error(
            &later.span,
            ErrorKind::Conflict,
            format!("`[{first}]` and `[{second}]` are exclusive"),
            "keep `[torch]` for compiled kernels, `[torch-noarch]` for pure-Python ones or \
             `[tvm-ffi]` for TVM FFI ones"
                .to_string(),
        ));
    }
    match found.pop() {
        Some(("torch", t)) => Ok(RawFramework::Torch(read_torch(&t, v5, paths)?)),
        Some(("torch-noarch", n)) => Ok(RawFramework::Noarch(read_noarch(&n)?)),
        Some((_, f)) => Ok(RawFramework::TvmFfi(read_tvm_ffi(&f, paths)?)),
        None => Err(root.src.error(
            &(0..0),
            ErrorKind::MissingKey,
            "missing table `[torch]` (or `[torch-noarch]`)",
            "add `[torch]` with `src = [\"torch-ext/torch_binding.cpp\"]`, or `[torch-noarch]` \
             for a pure-Python kernel"
                .to_string(),
        )),
    }
}

fn read_torch(t: &Table<'_, '_>, v5: bool, paths: &mut Vec<PathRef>) -> Result<Torch, ConfigError> {
    t.check_keys(TORCH, v5)?;
    let s = |name| spec(TORCH, name);
    Ok(Torch {
        // HF's default for `src` is empty: a `[torch]` with kernels only is valid.
        src: match t.strings(s("src"))? {
            Some(list) if !list.v.is_empty() => {
                path_list(t, s("src"), list, PathKind::Source, paths)?
            }
            _ => Vec::new(),
        },
        include: include_dirs(t, s("include"), paths)?,
        minver: version(t, s("minver"))?,
        maxver: version(t, s("maxver"))?,
        pyext: pyext(t, s("pyext"))?,
        cxx_flags: strings(t, s("cxx-flags"))?,
        stable_abi: stable_abi(t, s("stable-abi"), v5)?,
    })
}

fn read_noarch(t: &Table<'_, '_>) -> Result<TorchNoarch, ConfigError> {
    t.check_keys(NOARCH, false)?;
    let caps = match t.strings(&NOARCH[1])? {
        Some(list) => kernels::capabilities(t, &NOARCH[1], list)?,
        None => Vec::new(),
    };
    Ok(TorchNoarch {
        pyext: pyext(t, &NOARCH[0])?,
        cuda_capabilities: caps.into_iter().map(|c| c.v).collect::<Vec<Capability>>(),
        rocm_archs: t
            .deduped_strings(&NOARCH[2], "architecture")?
            .map(|l| l.v.into_iter().map(|a| a.v).collect())
            .unwrap_or_default(),
    })
}

fn read_tvm_ffi(t: &Table<'_, '_>, paths: &mut Vec<PathRef>) -> Result<TvmFfi, ConfigError> {
    t.check_keys(TVM_FFI, false)?;
    let s = |name| spec(TVM_FFI, name);
    let src = t
        .strings(s("src"))?
        .ok_or_else(|| t.missing(s("src"), ": the extension's source files and headers"))?;
    Ok(TvmFfi {
        src: path_list(t, s("src"), src, PathKind::Source, paths)?,
        include: include_dirs(t, s("include"), paths)?,
        pyext: pyext(t, s("pyext"))?,
        cxx_flags: strings(t, s("cxx-flags"))?,
    })
}

fn stable_abi(
    t: &Table<'_, '_>,
    s: &KeySpec<'_>,
    v5: bool,
) -> Result<Option<StableAbi>, ConfigError> {
    let Some(value) = t.get(s.name) else {
        return Ok(None);
    };
    match value.get_ref() {
        DeValue::String(_) => Ok(version(t, s)?.map(StableAbi::All)),
        DeValue::Table(entries) if v5 => {
            let per = Table::new(t.src, t.child_name(s.name), value.span(), entries);
            let mut map = std::collections::BTreeMap::new();
            for (k, v) in per.entries() {
                let backend = k.get_ref().parse::<Backend>().map_err(|e| {
                    per.src
                        .error(&k.span(), ErrorKind::UnknownKey, e.to_string(), e.hint())
                })?;
                let spec = KeySpec {
                    name: backend.as_str(),
                    example: "cuda = \"2.10\"",
                    v5_only: false,
                };
                let written = per
                    .string(&spec)?
                    .ok_or_else(|| per.wrong_type(&spec, v, "a string"))?;
                map.insert(backend, parse_version(&per, &spec, &written)?);
            }
            Ok(Some(StableAbi::PerBackend(map)))
        }
        DeValue::Table(_) => Err(t.src.error(
            &value.span(),
            ErrorKind::WrongType,
            "a per-backend `stable-abi` table needs edition 5",
            "write one version (`stable-abi = \"2.10\"`), or add `edition = 5` to `[general]`"
                .to_string(),
        )),
        _ => Err(t.wrong_type(s, value, "a version string or a table of backends")),
    }
}

fn pyext(t: &Table<'_, '_>, s: &KeySpec<'_>) -> Result<Option<Vec<String>>, ConfigError> {
    let Some(list) = t.deduped_strings(s, "extension")? else {
        return Ok(None);
    };
    for ext in &list.v {
        if ext.v.is_empty() || ext.v.contains(['.', '/', '\\', '*']) {
            return Err(t.invalid(
                &ext.span,
                format!("invalid file extension `{}` in `pyext`", ext.v),
                "write extensions without the dot, e.g. `pyext = [\"py\", \"json\"]`".to_string(),
            ));
        }
    }
    Ok(Some(list.v.into_iter().map(|x| x.v).collect()))
}
