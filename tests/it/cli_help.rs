//! `kbuild --help` and every verb's `--help`, pinned whole. The verbs come from clap's model of
//! the CLI, so a new verb or subverb without a snapshot fails here.

use clap::CommandFactory as _;
use kbuild::cli::Cli;

use crate::common::kbuild::{bin, run};

/// Every command path below `kbuild` (`["build"]`, `["toolchain", "install"]`, …), in the order
/// `--help` lists them, without clap's own `help`.
fn command_paths(cmd: &clap::Command, prefix: &[String], out: &mut Vec<Vec<String>>) {
    for sub in cmd.get_subcommands() {
        if sub.get_name() == "help" {
            continue;
        }
        let mut path = prefix.to_vec();
        path.push(sub.get_name().to_string());
        out.push(path.clone());
        command_paths(sub, &path, out);
    }
}

/// stdout of `kbuild ARGS… --help` at a fixed width (clap wraps to `COLUMNS`).
fn help(args: &[String]) -> String {
    let out = run(bin()
        .args(args)
        .arg("--help")
        .env("COLUMNS", "100")
        .env_remove("KBUILD_COMPILER_LAUNCHER"));
    assert!(out.status.success(), "`kbuild {args:?} --help` failed");
    assert!(
        out.stderr.is_empty(),
        "`kbuild {args:?} --help` wrote stderr"
    );
    String::from_utf8(out.stdout).expect("help is UTF-8")
}

#[test]
fn top_level_help_lists_every_verb() {
    insta::assert_snapshot!("help", help(&[]));
}

#[test]
fn every_verb_and_subverb_has_its_help_pinned() {
    let mut paths = Vec::new();
    command_paths(&Cli::command(), &[], &mut paths);
    let names: Vec<String> = paths.iter().map(|p| p.join(" ")).collect();
    // The verbs themselves, so that a removed verb shows here and not only as an unused snapshot.
    insta::assert_snapshot!("verbs", names.join("\n"));
    for path in &paths {
        insta::assert_snapshot!(format!("help_{}", path.join("_")), help(path));
    }
}
