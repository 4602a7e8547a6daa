//! The shape of `src/`: no import cycle between top-level modules, `crate::error` only in
//! `commands/` and `main.rs`, thin command files and no oversized file. Parses the sources
//! itself, so it needs no `cargo tree` or nightly tooling.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Non-test lines a `src/commands/*.rs` file may have.
const COMMAND_LINES: usize = 120;
/// Non-test lines any `src/` file may have.
const FILE_LINES: usize = 800;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `src/`, relative to it.
fn sources() -> Vec<(PathBuf, String)> {
    let root = src();
    let mut files: Vec<(PathBuf, String)> = walkdir::WalkDir::new(&root)
        .into_iter()
        .map(|e| e.expect("walk src/"))
        .filter(|e| e.path().extension().is_some_and(|x| x == "rs"))
        .map(|e| {
            let rel = e.path().strip_prefix(&root).unwrap().to_path_buf();
            (rel, std::fs::read_to_string(e.path()).expect("read source"))
        })
        .collect();
    files.sort();
    files
}

/// The top-level module a file belongs to (`plan/jobs.rs` → `plan`); `None` for the crate
/// roots.
fn module_of(rel: &Path) -> Option<String> {
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(name, "lib" | "main")).then(|| name.to_string())
}

/// The text without `//` comments, so prose that mentions `crate::x` does not count.
fn code(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The top-level modules named after `crate::`: `crate::plan::X` and `use crate::{a, b::c}`.
fn referenced_modules(text: &str) -> BTreeSet<String> {
    let code = code(text);
    let mut found = BTreeSet::new();
    let mut rest = code.as_str();
    while let Some(i) = rest.find("crate::") {
        let before = rest[..i].chars().next_back();
        rest = &rest[i + "crate::".len()..];
        // `kbuild_crate::` or `$crate::` are not this crate's paths.
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let end = group
                .char_indices()
                .find(|&(_, c)| {
                    depth += match c {
                        '{' => 1,
                        '}' => -1,
                        _ => 0,
                    };
                    depth == 0
                })
                .map_or(group.len(), |(i, _)| i);
            let mut item_depth = 0;
            let mut items = vec![String::new()];
            for c in group[..end].chars() {
                match c {
                    '{' => item_depth += 1,
                    '}' => item_depth -= 1,
                    ',' if item_depth == 0 => items.push(String::new()),
                    _ => {}
                }
                items.last_mut().unwrap().push(c);
            }
            found.extend(
                items
                    .iter()
                    .filter_map(|item| first_ident(item.trim_start_matches(','))),
            );
        } else {
            found.extend(first_ident(rest));
        }
    }
    found
}

fn first_ident(text: &str) -> Option<String> {
    let ident: String = text
        .trim_start()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!ident.is_empty() && ident != "self").then_some(ident)
}

/// `from → {to}` between top-level modules that exist as files or directories.
fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let files = sources();
    let modules: BTreeSet<String> = files.iter().filter_map(|(p, _)| module_of(p)).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (path, text) in &files {
        let Some(from) = module_of(path) else {
            continue;
        };
        let edges = graph.entry(from.clone()).or_default();
        for to in referenced_modules(text) {
            if to != from && modules.contains(&to) {
                edges.insert(to);
            }
        }
    }
    graph
}

/// A cycle through `start`, as the modules along it, if there is one.
fn cycle_through(graph: &BTreeMap<String, BTreeSet<String>>, start: &str) -> Option<Vec<String>> {
    let mut stack = vec![(start.to_string(), vec![start.to_string()])];
    let mut seen = BTreeSet::new();
    while let Some((node, path)) = stack.pop() {
        for next in graph.get(&node).into_iter().flatten() {
            if next == start {
                let mut cycle = path.clone();
                cycle.push(start.to_string());
                return Some(cycle);
            }
            if seen.insert(next.clone()) {
                let mut longer = path.clone();
                longer.push(next.clone());
                stack.push((next.clone(), longer));
            }
        }
    }
    None
}

fn non_test_lines(text: &str) -> usize {
    text.lines()
        .take_while(|l| l.trim() != "#[cfg(test)]")
        .count()
}

#[test]
fn the_parser_sees_use_lists_and_qualified_paths() {
    let text = "use crate::{Result, config::{self, Project}, plan};\n\
                fn f() -> crate::link::X { crate::toolchain::y() } // crate::commented\n";
    let found: Vec<String> = referenced_modules(text).into_iter().collect();
    assert_eq!(found, ["Result", "config", "link", "plan", "toolchain"]);
    // The real tree has the edges every build takes.
    let graph = module_graph();
    assert!(graph["compile"].contains("plan"), "{graph:?}");
    assert!(graph["orchestrator"].contains("compile"), "{graph:?}");
    // And a loop two modules away is found.
    let edges = |pairs: &[(&str, &str)]| {
        let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (a, b) in pairs {
            g.entry(a.to_string()).or_default().insert(b.to_string());
        }
        g
    };
    let looped = edges(&[("a", "b"), ("b", "c"), ("c", "a")]);
    assert_eq!(cycle_through(&looped, "a").unwrap(), ["a", "b", "c", "a"]);
    assert_eq!(cycle_through(&edges(&[("a", "b"), ("b", "c")]), "a"), None);
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let graph = module_graph();
    let cycles: BTreeSet<String> = graph
        .keys()
        .filter_map(|m| cycle_through(&graph, m))
        .map(|cycle| cycle.join(" -> "))
        .collect();
    assert!(
        cycles.is_empty(),
        "import cycles between src/ modules:\n{}",
        cycles.into_iter().collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn only_commands_and_main_use_the_crate_error() {
    let offenders: Vec<String> = sources()
        .into_iter()
        .filter(|(path, _)| {
            !(path.starts_with("commands") || path == Path::new("main.rs"))
                && path != Path::new("error.rs")
        })
        .filter(|(_, text)| referenced_modules(text).contains("error"))
        .map(|(path, _)| format!("src/{}", path.display()))
        .collect();
    assert!(
        offenders.is_empty(),
        "`crate::error` is for commands/ and main.rs only; stages return their own errors: {offenders:?}"
    );
}

#[test]
fn command_files_stay_thin_and_no_file_is_oversized() {
    let mut too_long = Vec::new();
    for (path, text) in sources() {
        let lines = non_test_lines(&text);
        let limit = if path.starts_with("commands") {
            COMMAND_LINES
        } else {
            FILE_LINES
        };
        if lines > limit {
            too_long.push(format!(
                "src/{}: {lines} lines (limit {limit})",
                path.display()
            ));
        }
    }
    assert!(
        too_long.is_empty(),
        "files over their limit:\n{}",
        too_long.join("\n")
    );
}
