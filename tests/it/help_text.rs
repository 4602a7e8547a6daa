//! `--help` lists what each command takes, and only that.

use crate::common::kbuild::{bin, run};

fn help(args: &[&str]) -> String {
    let out = run(bin()
        .args(args)
        .arg("--help")
        .env_remove("KBUILD_COMPILER_LAUNCHER"));
    assert!(out.status.success());
    String::from_utf8(out.stdout).expect("help is UTF-8")
}

#[test]
fn wheel_help_lists_no_build_only_options() {
    let text = help(&["wheel"]);
    for build_only in ["--wheel", "--artifact", "--dry-run"] {
        assert!(!text.contains(build_only), "{build_only}:\n{text}");
    }
    // The options only: their prose belongs to other tests.
    let options: Vec<&str> = text
        .lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with('-'))
        .collect();
    insta::assert_snapshot!(options.join("\n"));
}

#[test]
fn wheel_refuses_build_only_options() {
    let out = run(bin().args(["wheel", "--dry-run"]));
    assert_eq!(out.status.code(), Some(2), "a usage error");
}
