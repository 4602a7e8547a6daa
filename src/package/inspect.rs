//! What kbuild reads from a variant's Python files: the op namespace that the extension and
//! `_ops.py` use, and the public functions (`__all__`) of `__init__.py`.

use std::path::{Path, PathBuf};

use super::digest::open_regular;
use super::error::PackageError;

/// Whether `s` is a Python module name (what metadata `id` must be).
pub fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// The `.so` files must be `<id>.*.so`, and `_ops.py` must import and use `torch.ops.<id>`.
pub fn check_namespace<'a>(
    dir: &Path,
    id: &str,
    files: impl Iterator<Item = &'a str>,
) -> Result<(), PackageError> {
    let mismatch = |path: PathBuf, found: &str| PackageError::Namespace {
        path,
        expected: id.to_string(),
        found: found.to_string(),
    };
    for file in files.filter(|f| !f.contains('/') && f.ends_with(".so")) {
        let module = file.split('.').next().unwrap_or_default();
        if module != id {
            return Err(mismatch(dir.join(file), module));
        }
    }
    let ops_path = dir.join("_ops.py");
    let ops = read_text(&ops_path)?;
    let mut uses = 0;
    for namespace in namespaces(&ops) {
        if namespace != id {
            return Err(mismatch(ops_path, namespace));
        }
        uses += 1;
    }
    if uses == 0 {
        return Err(PackageError::Metadata {
            path: ops_path,
            message: format!("no `torch.ops.{id}`: the ops of this variant are not reachable"),
        });
    }
    Ok(())
}

/// Every `torch.ops.<name>` and `from . import <name>` in `_ops.py`.
fn namespaces(ops: &str) -> impl Iterator<Item = &str> {
    let ident_end = |s: &str| {
        s.find(|c: char| !(c == '_' || c.is_ascii_alphanumeric()))
            .unwrap_or(s.len())
    };
    let mut out = Vec::new();
    for marker in ["torch.ops.", "from . import "] {
        let mut rest = ops;
        while let Some(at) = rest.find(marker) {
            let tail = &rest[at + marker.len()..];
            let name = &tail[..ident_end(tail)];
            if !name.is_empty() {
                out.push(name);
            }
            rest = tail;
        }
    }
    out.into_iter()
}

/// The names in `__all__ = [...]` of `<dir>/__init__.py` (none when it has no `__all__`).
pub fn public_functions(dir: &Path) -> Result<Vec<String>, PackageError> {
    let path = dir.join("__init__.py");
    if std::fs::symlink_metadata(&path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
        return Ok(Vec::new());
    }
    Ok(dunder_all(&read_text(&path)?))
}

/// Read a variant's text file, through `open_regular` like every read of a variant.
fn read_text(path: &Path) -> Result<String, PackageError> {
    let mut text = String::new();
    std::io::Read::read_to_string(&mut open_regular(path)?, &mut text).map_err(|source| {
        PackageError::Read {
            path: path.to_path_buf(),
            source,
        }
    })?;
    Ok(text)
}

/// Quoted strings up to the closing `close`, and what follows it.
fn quoted_until(src: &str, close: char) -> (Vec<String>, &str) {
    let mut out = Vec::new();
    let mut rest = src;
    loop {
        let next_quote = rest.find(['"', '\'']);
        let next_close = rest.find(close);
        match (next_quote, next_close) {
            (Some(q), Some(c)) if q < c => {
                let quote = rest[q..].chars().next().unwrap_or('"');
                let body = &rest[q + 1..];
                let Some(end) = body.find(quote) else {
                    return (out, "");
                };
                out.push(body[..end].to_string());
                rest = &body[end + 1..];
            }
            (_, Some(c)) => return (out, &rest[c + 1..]),
            _ => return (out, ""),
        }
    }
}

/// The names in `__all__ = [...]`.
fn dunder_all(src: &str) -> Vec<String> {
    let Some(at) = src.find("__all__") else {
        return Vec::new();
    };
    let rest = &src[at..];
    let Some(open) = rest.find(['[', '(']) else {
        return Vec::new();
    };
    let close = if rest[open..].starts_with('[') {
        ']'
    } else {
        ')'
    };
    quoted_until(&rest[open + 1..], close).0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_finds_ops_and_imports() {
        let src = "import torch\nfrom . import _relu_cpu_abc\nops = torch.ops._relu_cpu_abc\n\
                   def add_op_namespace_prefix(op_name: str):\n    return f\"_relu_cpu_abc::{op_name}\"\n";
        let found: Vec<&str> = namespaces(src).collect();
        assert_eq!(found, ["_relu_cpu_abc", "_relu_cpu_abc"]);
    }

    #[test]
    fn functions_come_from_dunder_all() {
        let init = "from ._ops import ops\n__all__ = [\n  \"relu\",\n  'gelu_fast',\n]\n";
        assert_eq!(dunder_all(init), ["relu", "gelu_fast"]);
        assert!(dunder_all("import torch\n").is_empty());
    }

    #[test]
    fn identifiers_are_python_module_names() {
        assert!(is_identifier("_relu_cpu_1a2b3c4"));
        assert!(!is_identifier("1abc"));
        assert!(!is_identifier("a-b"));
        assert!(!is_identifier(""));
    }
}
