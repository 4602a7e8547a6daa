//! The shape of `src/`: no import cycle between top-level modules nor between the files of one
//! folder, `crate::error` only in `commands/` and `main.rs`, thin command files, no oversized
//! file and no oversized function. Parses the sources itself, so it needs no `cargo tree` or
//! nightly tooling.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Non-test lines a `src/commands/*.rs` file may have.
const COMMAND_LINES: usize = 120;
/// Non-test lines any `src/` file may have.
const FILE_LINES: usize = 800;
/// Lines a function may span, from its `fn` line to its closing brace.
const FN_LINES: usize = 80;

type Graph = BTreeMap<String, BTreeSet<String>>;

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
    path_heads(&code(text), "crate::")
}

/// The first segment of every path that starts with `prefix` (`crate::`, `super::`,
/// `crate::config::`), each item of a `prefix{a, b::c}` list counted; `*` for a glob.
fn path_heads(code: &str, prefix: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find(prefix) {
        let before = rest[..i].chars().next_back();
        rest = &rest[i + prefix.len()..];
        // `kbuild_crate::`, `$crate::` or the second `super::` of `super::super::` do not start
        // a path.
        if before.is_some_and(|c| c.is_alphanumeric() || matches!(c, '_' | '$' | ':')) {
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
    let text = text.trim_start();
    if text.starts_with('*') {
        return Some("*".to_string());
    }
    let ident: String = text
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!ident.is_empty() && ident != "self").then_some(ident)
}

/// `from → {to}` between top-level modules that exist as files or directories.
fn module_graph() -> Graph {
    let files = sources();
    let modules: BTreeSet<String> = files.iter().filter_map(|(p, _)| module_of(p)).collect();
    let mut graph = Graph::new();
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
fn cycle_through(graph: &Graph, start: &str) -> Option<Vec<String>> {
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

/// The text before its `#[cfg(test)]` module: a test's `super::` is its own file.
fn non_test_text(text: &str) -> String {
    text.lines()
        .take_while(|l| l.trim() != "#[cfg(test)]")
        .collect::<Vec<_>>()
        .join("\n")
}

/// `file → {sibling}` inside one folder whose module path is `module` (`config`): the files
/// are named by stem (`mod` for the folder's root file). `super::x` and `crate::config::x`
/// name the sibling `x` when there is one, else an item of the root file.
fn folder_graph(module: &str, files: &[(String, String)]) -> Graph {
    let stems: BTreeSet<&str> = files.iter().map(|(stem, _)| stem.as_str()).collect();
    let own_path = format!("crate::{module}::");
    let mut graph = Graph::new();
    for (stem, text) in files {
        let code = code(&non_test_text(text));
        let mut heads = path_heads(&code, &own_path);
        if stem != "mod" {
            // In the root file `super::` is the parent folder.
            heads.extend(path_heads(&code, "super::"));
        }
        let edges = graph.entry(stem.clone()).or_default();
        for head in heads {
            let to = if stems.contains(head.as_str()) {
                head
            } else if head == "super" {
                continue;
            } else {
                "mod".to_string()
            };
            if &to != stem {
                edges.insert(to);
            }
        }
    }
    graph
}

/// The file-level import graph of every folder of `src/`, keyed by the folder. A subfolder
/// (`compile/nvcc/`) is a node of its parent's graph, as the file it stands for.
fn folder_graphs() -> BTreeMap<PathBuf, Graph> {
    let mut folders: BTreeMap<PathBuf, Vec<(String, String)>> = BTreeMap::new();
    for (path, text) in sources() {
        let Some(folder) = path.parent().filter(|p| !p.as_os_str().is_empty()) else {
            continue;
        };
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        if stem == "mod"
            && let Some(parent) = folder.parent().filter(|p| !p.as_os_str().is_empty())
        {
            let name = folder.file_name().unwrap().to_string_lossy().into_owned();
            let files = folders.entry(parent.to_path_buf()).or_default();
            files.push((name, String::new()));
        }
        folders
            .entry(folder.to_path_buf())
            .or_default()
            .push((stem, text));
    }
    folders
        .into_iter()
        .map(|(folder, files)| {
            let module = folder
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("::");
            let graph = folder_graph(&module, &files);
            (folder, graph)
        })
        .collect()
}

/// The text with comments, string and char literals blanked to spaces (newlines kept), so the
/// braces left are the code's own.
fn blank_literals(text: &str) -> Vec<char> {
    let mut out: Vec<char> = text.chars().collect();
    let n = out.len();
    let at = |chars: &[char], i: usize| chars.get(i).copied().unwrap_or('\0');
    let blank = |out: &mut Vec<char>, from: usize, to: usize| {
        for c in &mut out[from..to.min(n)] {
            if *c != '\n' {
                *c = ' ';
            }
        }
    };
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut i = 0;
    while i < n {
        let c = out[i];
        let ident_before = i > 0 && is_ident(out[i - 1]);
        // `r` opens a raw string alone or after a lone `b` (`br"…"`), not inside `for` or `bar`.
        let raw_prefix = !ident_before || (out[i - 1] == 'b' && (i < 2 || !is_ident(out[i - 2])));
        if c == '/' && at(&out, i + 1) == '/' {
            let end = (i..n).find(|&j| out[j] == '\n').unwrap_or(n);
            blank(&mut out, i, end);
            i = end;
        } else if c == '/' && at(&out, i + 1) == '*' {
            let (mut depth, mut j) = (1, i + 2);
            while j < n && depth > 0 {
                match (out[j], at(&out, j + 1)) {
                    ('/', '*') => (depth, j) = (depth + 1, j + 2),
                    ('*', '/') => (depth, j) = (depth - 1, j + 2),
                    _ => j += 1,
                }
            }
            blank(&mut out, i, j);
            i = j;
        } else if c == 'r' && raw_prefix && matches!(at(&out, i + 1), '"' | '#') {
            // `r"…"`, `r#"…"#`, `br"…"`; `r#ident` is a raw identifier.
            let hashes = (i + 1..n).take_while(|&j| out[j] == '#').count();
            if at(&out, i + 1 + hashes) != '"' {
                i += 1;
                continue;
            }
            let close: Vec<char> = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            let body = i + 2 + hashes;
            let end = (body..n)
                .find(|&j| out[j..].starts_with(&close))
                .map_or(n, |j| j + close.len());
            blank(&mut out, i, end);
            i = end;
        } else if c == '"' {
            let mut j = i + 1;
            while j < n && out[j] != '"' {
                j += if out[j] == '\\' { 2 } else { 1 };
            }
            blank(&mut out, i, j + 1);
            i = j + 1;
        } else if c == '\'' && at(&out, i + 1) == '\\' {
            let end = (i + 2..n)
                .find(|&j| out[j] == '\'' && j > i + 2)
                .unwrap_or(n);
            blank(&mut out, i, end + 1);
            i = end + 1;
        } else if c == '\'' && at(&out, i + 2) == '\'' {
            blank(&mut out, i, i + 3);
            i += 3;
        } else {
            i += 1;
        }
    }
    out
}

/// The index of the brace that closes the one at `open`.
fn closing_brace(code: &[char], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (j, &c) in code.iter().enumerate().skip(open) {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(j);
                }
            }
            _ => {}
        }
    }
    None
}

/// Whether `word` starts at `i` as a whole word.
fn word_at(code: &[char], i: usize, word: &str) -> bool {
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    let len = word.chars().count();
    code[i..].starts_with(&word.chars().collect::<Vec<_>>())
        && (i == 0 || !is_ident(code[i - 1]))
        && code.get(i + len).is_none_or(|&c| !is_ident(c))
}

/// Each function with a body outside `#[cfg(test)]` modules: its name, the 1-based line of its
/// `fn` and the lines it spans up to its closing brace.
fn function_lengths(text: &str) -> Vec<(String, usize, usize)> {
    let code = blank_literals(text);
    let line_of = |i: usize| code[..i].iter().filter(|&&c| c == '\n').count() + 1;
    let after_spaces = |from: usize| (from..code.len()).find(|&j| !code[j].is_whitespace());
    let mut found = Vec::new();
    let mut i = 0;
    while i < code.len() {
        if code[i..].starts_with(&"#[cfg(test)]".chars().collect::<Vec<_>>()) {
            let next = after_spaces(i + "#[cfg(test)]".len()).unwrap_or(code.len());
            if word_at(&code, next, "mod") {
                let open = (next..code.len()).find(|&j| matches!(code[j], '{' | ';'));
                if let Some(end) = open
                    .filter(|&j| code[j] == '{')
                    .and_then(|j| closing_brace(&code, j))
                {
                    i = end + 1;
                    continue;
                }
            }
        }
        if !word_at(&code, i, "fn") {
            i += 1;
            continue;
        }
        let name_start = after_spaces(i + 2).unwrap_or(code.len());
        let name: String = code[name_start..]
            .iter()
            .take_while(|c| c.is_alphanumeric() || **c == '_')
            .collect();
        if name.is_empty() {
            // `fn(&str) -> bool`, a pointer type.
            i += 2;
            continue;
        }
        // The body is the first `{` outside the signature's brackets; a `;` there ends a
        // declaration (`[u8; 4]` in a parameter does not).
        let mut depth = 0i32;
        let mut body = None;
        for (j, &c) in code.iter().enumerate().skip(name_start) {
            match c {
                '(' | '[' => depth += 1,
                ')' | ']' => depth -= 1,
                ';' if depth == 0 => break,
                '{' if depth == 0 => {
                    body = Some(j);
                    break;
                }
                _ => {}
            }
        }
        if let Some(end) = body.and_then(|open| closing_brace(&code, open)) {
            let first = line_of(i);
            found.push((name, first, line_of(end) - first + 1));
        }
        i = name_start;
    }
    found
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
fn the_parser_sees_imports_between_files_of_a_folder() {
    let file = |stem: &str, text: &str| (stem.to_string(), text.to_string());
    let files = [
        file(
            "mod",
            "mod a;\nmod b;\npub use a::A;\nuse crate::config::c::C;\n",
        ),
        file("a", "use super::b::{self, B};\n// super::c::commented\n"),
        file(
            "b",
            "use super::{Error, c};\nfn f() { super::super::hint::x() }\n",
        ),
        file(
            "c",
            "fn g() -> crate::config::a::A { todo!() }\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n",
        ),
        file("d", "use super::*;\n"),
    ];
    let graph = folder_graph("config", &files);
    let edges = |stem: &str| graph[stem].iter().cloned().collect::<Vec<_>>();
    assert_eq!(edges("mod"), ["c"], "{graph:?}");
    assert_eq!(edges("a"), ["b"], "{graph:?}");
    assert_eq!(edges("b"), ["c", "mod"], "{graph:?}");
    assert_eq!(edges("c"), ["a"], "{graph:?}");
    assert_eq!(edges("d"), ["mod"], "{graph:?}");
    // The planted loop a → b → c → a is found; cutting c's import ends it.
    assert_eq!(cycle_through(&graph, "a").unwrap(), ["a", "b", "c", "a"]);
    let mut cut = graph.clone();
    cut.get_mut("c").unwrap().clear();
    assert_eq!(cycle_through(&cut, "a"), None);
    // The real tree has the edges its files import.
    let real = folder_graphs();
    assert!(
        real[Path::new("package")]["wheel"].contains("variant"),
        "{real:?}"
    );
    assert!(
        real[Path::new("toolchain")]["nvcc"].contains("mod"),
        "{real:?}"
    );
}

#[test]
fn the_function_scanner_skips_literals_comments_and_test_modules() {
    let text = r##"fn short() {
    let s = "}{ fn fake() {";
    let r = (r#"" } "#, br"{");
    let c = ('{', '\'', '\u{7d}');
    // } a closing brace in a comment
    /* { nested /* } */ */
}

pub(crate) fn with_array(x: [u8; 4]) -> impl Fn(&str) -> bool {
    move |s: &'static str| s.len() == x.len()
}

trait T {
    fn declared(&self);
}

#[cfg(test)]
mod tests {
    fn in_a_test() {
    }
}
"##;
    assert_eq!(
        function_lengths(text),
        [
            ("short".to_string(), 1, 7),
            ("with_array".to_string(), 9, 3)
        ]
    );
}

#[test]
fn no_file_imports_a_sibling_that_imports_it_back() {
    let mut cycles = BTreeSet::new();
    for (folder, graph) in folder_graphs() {
        for file in graph.keys() {
            if let Some(mut cycle) = cycle_through(&graph, file) {
                // Each loop once, from its first file by name.
                cycle.pop();
                let first = (0..cycle.len()).min_by_key(|&i| &cycle[i]).unwrap_or(0);
                cycle.rotate_left(first);
                cycle.push(cycle[0].clone());
                cycles.insert(format!("src/{}: {}", folder.display(), cycle.join(" -> ")));
            }
        }
    }
    assert!(
        cycles.is_empty(),
        "import cycles between the files of a folder (move what they share into a file that \
         imports neither):\n{}",
        cycles.into_iter().collect::<Vec<_>>().join("\n")
    );
}

/// Folders whose files share what they need through a file of its own (`compile/error.rs`),
/// never through the folder's `mod.rs`: a child importing its parent's items back is how a
/// folder grows one file that everything leans on.
const ONE_SEAM_FOLDERS: [&str; 5] = ["check", "compile", "compile/nvcc", "config", "schedule"];

#[test]
fn no_child_imports_from_its_own_mod_rs_in_the_one_seam_folders() {
    let graphs = folder_graphs();
    let mut offenders = Vec::new();
    for folder in ONE_SEAM_FOLDERS {
        let graph = graphs
            .get(Path::new(folder))
            .unwrap_or_else(|| panic!("no folder src/{folder}"));
        for (file, edges) in graph {
            if file != "mod" && edges.contains("mod") {
                offenders.push(format!("src/{folder}/{file}.rs"));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "these files import items of their folder's mod.rs (move the item into a file of its \
         own, as compile/error.rs):\n{}",
        offenders.join("\n")
    );
}

#[test]
fn the_plan_says_what_to_compile_and_never_imports_the_schedule() {
    let graph = module_graph();
    assert!(graph["compile"].contains("plan"), "{graph:?}");
    assert!(
        !graph["plan"].contains("schedule"),
        "plan/ imports schedule: how jobs run is the schedule's, decided after the plan"
    );
}

/// `NvccMode`'s variants are named (matched, compared, made) only where the mode is decided:
/// the budget that narrows it and the schedule that turns it into each job's run choice.
#[test]
fn nvcc_mode_is_matched_in_at_most_two_files() {
    let matching: Vec<String> = sources()
        .into_iter()
        .filter(|(_, text)| {
            let code = code(&non_test_text(text));
            ["Steps", "Threads", "Jobserver"]
                .iter()
                .any(|v| code.contains(&format!("NvccMode::{v}")))
        })
        .map(|(path, _)| format!("src/{}", path.display()))
        .collect();
    assert!(
        matching.len() <= 2,
        "`NvccMode` is matched in {} files (compile reads the job's `RunChoice`): {matching:?}",
        matching.len()
    );
}

#[test]
fn no_function_is_over_80_lines() {
    let mut too_long = Vec::new();
    for (path, text) in sources() {
        for (name, line, lines) in function_lengths(&text) {
            if lines > FN_LINES {
                too_long.push(format!(
                    "src/{}:{line}: `{name}` {lines} lines",
                    path.display()
                ));
            }
        }
    }
    assert!(
        too_long.is_empty(),
        "functions over {FN_LINES} lines (split them into named steps):\n{}",
        too_long.join("\n")
    );
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
