//! What an object depends on: the compiler's Make-style dependency file (the scan of the
//! project's own `#include "…"` lines, which nvcc's `-MD` can miss under `#if __CUDA_ARCH__`,
//! is `files::scan_includes`).

use std::collections::BTreeSet;
use std::path::PathBuf;

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
}
