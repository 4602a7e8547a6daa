//! What an object depends on: the compiler's Make-style dependency file, plus a scan of the
//! project's own `#include "…"` lines (nvcc's `-MD` can miss headers included only under
//! `#if __CUDA_ARCH__ >= …`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The prerequisites of every rule in a Make dependency file, in order, without duplicates.
///
/// Handles what gcc and nvcc write: backslash-newline continuations, `\ ` for a space in a
/// path, `\#` and `$$`, and the empty phony rules of `-MP`. Targets are dropped.
pub fn parse_depfile(text: &str) -> Result<Vec<PathBuf>, String> {
    let joined = text.replace("\\\r\n", " ").replace("\\\n", " ");
    let mut deps = Vec::new();
    let mut seen = BTreeSet::new();
    for (n, line) in joined.lines().enumerate() {
        let words = split_words(line);
        if words.is_empty() {
            continue;
        }
        let Some(colon) = words.iter().position(|w| matches!(w, Word::Colon)) else {
            return Err(format!("rule {} has no `:`: `{line}`", n + 1));
        };
        for word in &words[colon + 1..] {
            if let Word::Path(p) = word
                && seen.insert(p.clone())
            {
                deps.push(PathBuf::from(p));
            }
        }
    }
    Ok(deps)
}

enum Word {
    Path(String),
    /// The unescaped `:` that ends a rule's targets.
    Colon,
}

/// Split one (continuation-joined) line into unescaped words and the rule's colon.
fn split_words(line: &str) -> Vec<Word> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut seen_colon = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.peek() {
                Some(&e @ (' ' | '#' | '\\' | ':')) => {
                    chars.next();
                    word.push(e);
                }
                _ => word.push('\\'),
            },
            '$' if chars.peek() == Some(&'$') => {
                chars.next();
                word.push('$');
            }
            ':' if !seen_colon && matches!(chars.peek(), None | Some(' ' | '\t')) => {
                if !word.is_empty() {
                    words.push(Word::Path(std::mem::take(&mut word)));
                }
                words.push(Word::Colon);
                seen_colon = true;
            }
            ' ' | '\t' => {
                if !word.is_empty() {
                    words.push(Word::Path(std::mem::take(&mut word)));
                }
            }
            _ => word.push(c),
        }
    }
    if !word.is_empty() {
        words.push(Word::Path(word));
    }
    words
}

/// Files reachable from `source` through `#include "…"`, transitively: each name is looked up
/// next to the including file, then in `include_dirs`. Files under `excluded` (toolchain
/// directories) are neither reported nor scanned, and `<…>` includes are ignored: the
/// compiler's dependency file covers those. Names that resolve nowhere are skipped (they may be
/// behind an `#if` that is false here).
pub fn scan_includes(
    source: &Path,
    include_dirs: &[PathBuf],
    excluded: &[PathBuf],
) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut seen = BTreeSet::from([source.to_path_buf()]);
    let mut queue = vec![source.to_path_buf()];
    while let Some(file) = queue.pop() {
        let Ok(bytes) = std::fs::read(&file) else {
            continue;
        };
        let text = String::from_utf8_lossy(&bytes);
        let here = file.parent().unwrap_or(Path::new("."));
        for name in quoted_includes(&text) {
            let candidates =
                std::iter::once(here.to_path_buf()).chain(include_dirs.iter().cloned());
            let Some(hit) = candidates.map(|d| d.join(name)).find(|p| p.is_file()) else {
                continue;
            };
            if excluded.iter().any(|dir| hit.starts_with(dir)) {
                continue;
            }
            if seen.insert(hit.clone()) {
                found.push(hit.clone());
                queue.push(hit);
            }
        }
    }
    found
}

/// The names in `#include "name"` lines (with any spacing around `#`).
fn quoted_includes(text: &str) -> impl Iterator<Item = &str> {
    text.lines().filter_map(|line| {
        let rest = line.trim_start().strip_prefix('#')?.trim_start();
        let rest = rest.strip_prefix("include")?.trim_start();
        let rest = rest.strip_prefix('"')?;
        rest.find('"').map(|end| &rest[..end])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(v: &[&str]) -> Vec<PathBuf> {
        v.iter().map(PathBuf::from).collect()
    }

    #[test]
    fn depfile_continuations_escapes_and_phony_rules_are_understood() {
        let text = "obj/a.o: src/a.cu \\\n  /inc/my\\ header.h inc/b.h \\\n  cost$$.h inc/b.h\n\ninc/b.h:\n/inc/my\\ header.h:\n";
        assert_eq!(
            parse_depfile(text).unwrap(),
            paths(&["src/a.cu", "/inc/my header.h", "inc/b.h", "cost$.h"])
        );
    }

    #[test]
    fn depfile_with_target_on_its_own_line_is_understood() {
        // nvcc's layout: `a.o : a.cu \`
        let text = "a.o : a.cu \\\n    /usr/include/x.h \\\n    h.h\n";
        assert_eq!(
            parse_depfile(text).unwrap(),
            paths(&["a.cu", "/usr/include/x.h", "h.h"])
        );
    }

    #[test]
    fn depfile_without_colon_is_an_error() {
        assert_eq!(
            parse_depfile("a.o: a.c\ngarbage here\n").unwrap_err(),
            "rule 2 has no `:`: `garbage here`"
        );
    }

    #[test]
    fn quoted_includes_skip_system_includes_and_comments() {
        let src = "#include \"a.h\"\n  #  include \"sub/b.cuh\" // x\n#include <torch/all.h>\n// #include \"c.h\"\n";
        assert_eq!(
            quoted_includes(src).collect::<Vec<_>>(),
            ["a.h", "sub/b.cuh"]
        );
    }

    #[test]
    fn include_scan_follows_conditional_includes_but_not_toolchain_dirs() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir_all(d.join("inc")).unwrap();
        std::fs::create_dir_all(d.join("torch")).unwrap();
        std::fs::write(
            d.join("k.cu"),
            "#if __CUDA_ARCH__ >= 800\n#include \"sm80.cuh\"\n#endif\n#include \"t.h\"\n#include \"missing.h\"\n",
        )
        .unwrap();
        std::fs::write(d.join("inc/sm80.cuh"), "#include \"common.h\"\n").unwrap();
        std::fs::write(d.join("inc/common.h"), "#include \"k.cu\"\n").unwrap();
        std::fs::write(d.join("torch/t.h"), "#include \"never.h\"\n").unwrap();
        let found = scan_includes(
            &d.join("k.cu"),
            &[d.join("inc"), d.join("torch")],
            &[d.join("torch")],
        );
        assert_eq!(found, vec![d.join("inc/sm80.cuh"), d.join("inc/common.h")]);
    }
}
