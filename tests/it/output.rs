//! What a person sees on the terminal: status lines that stay lines in a log taken with
//! `script`, a progress line that names only running units, a no-op build that says one line
//! (as cargo: `Fresh` only with `-v`), and shell completions that offer values, not files.

use std::path::Path;
use std::process::Command;

use crate::common::kbuild::{bin, fixture, kbuild, python, run};
use crate::common::redact::Redact;

/// Run `kbuild -C <project> <args>` under a pseudo-terminal (`script`: stderr is a TTY, so the
/// progress bar draws as it does for a person) and return what the terminal received.
fn under_a_terminal(project: &Path, args: &str) -> String {
    let log = project.join("terminal.log");
    let command = format!(
        "'{}' -C '{}' {args}",
        env!("CARGO_BIN_EXE_kbuild"),
        project.display()
    );
    let out = run(Command::new("script")
        .args(["-qec", &command])
        .arg(&log)
        .env("KBUILD_PYTHON", python())
        .env("TERM", "xterm")
        .env_remove("VIRTUAL_ENV"));
    assert!(out.status.success(), "kbuild {args} failed under script");
    std::fs::read_to_string(&log).expect("script wrote its log")
}

/// The log as a terminal shows it: per line, what is left after the last carriage return or
/// erase-line, without colours.
fn shown_lines(log: &str) -> Vec<String> {
    log.lines()
        .map(|line| {
            let last = line.rsplit(['\r']).next().unwrap_or(line);
            let last = last.rsplit("\x1b[2K").next().unwrap_or(last);
            strip_colours(last)
        })
        .collect()
}

fn strip_colours(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            // CSI: ESC [ parameters, ended by a letter.
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `12.3s` becomes `[secs]` and `-j7` becomes `-j[n]`: what differs between runs.
fn redact_times(text: &str) -> String {
    let mut out = String::new();
    for word in text.split_inclusive([' ', '(', ')']) {
        let (body, end) = match word.char_indices().last() {
            Some((i, c)) if " ()".contains(c) => (&word[..i], &word[i..]),
            _ => (word, ""),
        };
        let seconds = body
            .strip_suffix('s')
            .is_some_and(|n| !n.is_empty() && n.parse::<f64>().is_ok());
        let jobs = body
            .strip_prefix("-j")
            .is_some_and(|n| n.parse::<u32>().is_ok());
        match (seconds, jobs) {
            (true, _) => out.push_str("[secs]"),
            (_, true) => out.push_str("-j[n]"),
            _ => out.push_str(body),
        }
        out.push_str(end);
    }
    out
}

#[test]
fn status_lines_in_a_terminal_log_are_lines_and_the_bar_never_names_a_finished_unit() {
    let project = fixture("relu-v5");
    let log = under_a_terminal(project.path(), "build --backend cpu");

    let shown = shown_lines(&log);
    let status: Vec<String> = shown
        .iter()
        .filter(|l| !l.starts_with("Script "))
        .map(|l| redact_times(l))
        .map(|l| Redact::new().path(project.path(), "[project]").text(&l))
        .collect();
    for line in &status {
        assert_eq!(
            line.trim_end(),
            line,
            "padded to the terminal's width: {log:?}"
        );
    }
    for expected in [
        "   Compiling relu v1 (2 units, -j[n])",
        "    Compiled relu_cpu/relu_cpu.cpp [cpu] ([secs])",
        "    Compiled torch-ext/torch_binding.cpp [cpu] ([secs])",
        "    Finished 1 variant(s) in [secs] (2 compiled, 0 fresh)",
    ] {
        assert!(
            status.iter().any(|l| l == expected),
            "no line `{expected}` in {status:#?}\nlog: {log:?}"
        );
    }
    assert!(
        status
            .iter()
            .any(|l| l.starts_with("    Packaged [project]/build/torch")),
        "{status:#?}"
    );

    // Each frame of the bar names a unit that has not finished at that point of the log.
    let mut finished: Vec<String> = Vec::new();
    for piece in log.split(['\n', '\r']).map(strip_colours) {
        let piece = piece.trim_start_matches("\x1b[2K");
        if let Some(rest) = piece.trim_start().strip_prefix("Compiled ") {
            let label = rest.rsplit_once(" (").map_or(rest, |(l, _)| l);
            finished.push(label.to_string());
        } else if piece.contains("Building [") {
            for label in &finished {
                assert!(
                    !piece.contains(label.as_str()),
                    "the bar names `{label}` after it finished: {piece:?}"
                );
            }
        }
    }
    assert_eq!(finished.len(), 3, "two units and the link: {finished:?}");
}

#[test]
fn a_no_op_build_prints_one_finished_line_and_fresh_lines_only_with_v() {
    let project = fixture("relu-v5");
    let build = |verbose: bool| {
        let mut cmd = kbuild(project.path());
        if verbose {
            cmd.arg("-v");
        }
        run(cmd.args(["build", "--backend", "cpu"]))
    };
    assert!(build(false).status.success());

    let noop = build(false);
    assert!(noop.status.success());
    let redact = Redact::new().path(project.path(), "[project]");
    insta::assert_snapshot!(redact_times(&redact.stderr(&noop)), @"    Finished 1 variant(s) in [secs] (0 compiled, 2 fresh)");

    let verbose = build(true);
    assert!(verbose.status.success());
    let stderr = redact_times(&redact.stderr(&verbose));
    let fresh: Vec<&str> = stderr
        .lines()
        .filter(|l| l.trim_start().starts_with("Fresh "))
        .collect();
    assert_eq!(fresh.len(), 1, "{stderr}");
    assert!(
        fresh[0].starts_with("       Fresh [project]/build/torch"),
        "{stderr}"
    );
}

/// The completion script for `shell`.
fn completions(shell: &str) -> String {
    let out = run(bin().args(["completions", shell]));
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn completions_offer_backend_names_and_no_file_names_for_variant_and_torch() {
    let bash = completions("bash");
    let names = "cann cpu cuda metal neuron rocm tpu xpu";
    let case = |option: &str| {
        let start = bash
            .find(&format!("                {option})\n"))
            .unwrap_or_else(|| panic!("no `{option})` case"));
        let body = &bash[start..];
        body[..body.find(";;").unwrap()].to_string()
    };
    assert!(
        case("--backend").contains(&format!("compgen -W \"{names}\"")),
        "{}",
        case("--backend")
    );
    for option in ["--variant", "--torch"] {
        assert!(!case(option).contains("compgen -f"), "{}", case(option));
    }
    assert!(
        case("--variant").contains("kbuild list-variants"),
        "{}",
        case("--variant")
    );

    let zsh = completions("zsh");
    assert!(zsh.contains(&format!(":NAME:({names})' \\")), "{zsh}");
    let variant = zsh.lines().find(|l| l.contains("'*--variant=")).unwrap();
    assert!(
        variant.ends_with(
            ":NAME:{compadd -- ${(f)\"$(kbuild list-variants 2>/dev/null | cut -d\" \" -f1)\"}}' \\"
        ),
        "{variant}"
    );

    let fish = completions("fish");
    let line = |option: &str| {
        fish.lines()
            .find(|l| l.contains("subcommand build\" -l ") && l.contains(&format!("-l {option} ")))
            .unwrap_or_else(|| panic!("no fish line for --{option}"))
            .to_string()
    };
    assert!(
        line("backend").contains("-a \"cann\\t''"),
        "{}",
        line("backend")
    );
    assert!(
        line("variant")
            .ends_with(" -r -f -a \"(kbuild list-variants 2>/dev/null | cut -d' ' -f1)\""),
        "{}",
        line("variant")
    );
}

/// What bash's completion offers for the last word of `line`, run in `dir` with the
/// binary under test as `kbuild` on PATH.
fn bash_completes(dir: &Path, line: &str) -> Vec<String> {
    let bin_dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_kbuild"), bin_dir.path().join("kbuild"))
        .unwrap();
    let script = format!(
        "source <(kbuild completions bash)\n\
         COMP_LINE='{line}'; COMP_POINT=${{#COMP_LINE}}\n\
         read -ra COMP_WORDS <<< \"$COMP_LINE\"\n\
         [[ \"$COMP_LINE\" == *' ' ]] && COMP_WORDS+=('')\n\
         COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))\n\
         _kbuild kbuild \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"\n\
         printf '%s\\n' \"${{COMPREPLY[@]}}\"\n"
    );
    let path = format!(
        "{}:{}",
        bin_dir.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = run(Command::new("bash")
        .args(["-c", &script])
        .current_dir(dir)
        .env("PATH", path)
        .env("KBUILD_PYTHON", python())
        .env_remove("VIRTUAL_ENV"));
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

#[test]
fn bash_completes_the_variants_of_the_project_and_the_backend_names() {
    let project = fixture("relu-v5");
    let listed = run(kbuild(project.path()).arg("list-variants"));
    let mut variants: Vec<String> = String::from_utf8(listed.stdout)
        .unwrap()
        .lines()
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect();
    variants.sort();
    assert!(!variants.is_empty());
    let mut offered = bash_completes(project.path(), "kbuild build --variant ");
    offered.sort();
    assert_eq!(offered, variants);
    assert_eq!(
        bash_completes(project.path(), "kbuild build --backend c"),
        ["cann", "cpu", "cuda"]
    );
}
