//! Every command block of README.md runs as written: the `sh` blocks in one shell, in README
//! order, as a reader in a virtual environment with torch and `kernels` would type them (with
//! `kbuild` and `kbuild-hub-server` on PATH); `toml` blocks are build.toml that check-config
//! accepts. A block that needs the network (PyPI, the real Hub) or a GPU says so after its
//! language (```` ```sh needs-network ````) and is the only kind left out.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::hub::server_bin;
use crate::common::kbuild::{kbuild, python, repo, run};

/// A fenced block of README.md.
#[derive(Debug)]
struct Block {
    /// 1-based line of the opening fence.
    line: usize,
    language: String,
    /// The words after the language: `needs-network`, `needs-gpu`.
    marks: Vec<String>,
    text: String,
}

fn readme_blocks() -> Vec<Block> {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let mut blocks = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in readme.lines().enumerate() {
        match (line.strip_prefix("```"), open.take()) {
            (Some(_), Some(block)) => blocks.push(block),
            (Some(info), None) => {
                let mut words = info.split_whitespace().map(String::from);
                open = Some(Block {
                    line: i + 1,
                    language: words.next().unwrap_or_default(),
                    marks: words.collect(),
                    text: String::new(),
                });
            }
            (None, Some(mut block)) => {
                block.text.push_str(line);
                block.text.push('\n');
                open = Some(block);
            }
            (None, None) => {}
        }
    }
    assert!(open.is_none(), "README.md ends inside a code block");
    blocks
}

/// What the test does with each block; a block it cannot place fails the test.
#[derive(Debug, PartialEq)]
enum Use {
    Run,
    CheckConfig,
    /// Output or a tree, not something to type.
    Shown,
    /// Needs the network or a GPU, as its marks say.
    LeftOut,
}

fn use_of(block: &Block) -> Use {
    let known = ["needs-network", "needs-gpu"];
    for mark in &block.marks {
        assert!(
            known.contains(&mark.as_str()),
            "README.md:{}: unknown mark `{mark}` (known: {known:?})",
            block.line
        );
    }
    match (block.language.as_str(), block.marks.is_empty()) {
        (_, false) => Use::LeftOut,
        ("sh", true) => Use::Run,
        ("toml", true) => Use::CheckConfig,
        ("text", true) => Use::Shown,
        // Workflow YAML (the action's example): `tests/it/action.rs` checks it against action.yml.
        ("yaml", true) => Use::Shown,
        (other, true) => panic!(
            "README.md:{}: a ```{other} block is neither run nor marked: give it `sh`, `toml` or \
             `text`, or mark it `needs-network` / `needs-gpu`",
            block.line
        ),
    }
}

/// A directory whose `kbuild` and `kbuild-hub-server` are the binaries under test.
fn bin_dir(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_kbuild"), bin.join("kbuild")).unwrap();
    std::os::unix::fs::symlink(server_bin(), bin.join("kbuild-hub-server")).unwrap();
    bin
}

#[test]
fn every_readme_command_block_runs_as_written() {
    let blocks = readme_blocks();
    let script: String = blocks
        .iter()
        .filter(|b| use_of(b) == Use::Run)
        .map(|b| format!("# README.md:{}\n{}", b.line, b.text))
        .collect();
    assert!(
        script.contains("get_local_kernel") && script.contains("get_kernel("),
        "the load examples are among the blocks that run:\n{script}"
    );

    let home = tempfile::tempdir().unwrap();
    let python = python();
    let venv_bin = python.parent().unwrap();
    let path = format!(
        "{}:{}:{}",
        bin_dir(home.path()).display(),
        venv_bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let work = home.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    // A bound on the whole script: a server that never says `listening` must not hang the test.
    let mut shell = Command::new("timeout");
    shell
        .args(["600", "bash", "-euo", "pipefail", "-c", &script])
        .current_dir(&work)
        .env("PATH", path)
        .env("VIRTUAL_ENV", venv_bin.parent().unwrap())
        .env("HF_HOME", home.path().join("hf"))
        .env_remove("HF_TOKEN")
        .env_remove("HF_ENDPOINT")
        .env_remove("KBUILD_PYTHON")
        // Its own process group: whatever the script left running is stopped below.
        .process_group(0);
    let child = shell.spawn().expect("bash starts");
    let group = child.id();
    let out = child.wait_with_output().unwrap();
    let _ = Command::new("kill")
        .args(["-TERM", "--", &format!("-{group}")])
        .output();
    assert!(
        out.status.success(),
        "the README's commands failed ({}); the script was:\n{script}",
        out.status
    );

    // The build.toml fragments, added to the project the commands made.
    let project = work.join("my-kernel");
    let manifest = std::fs::read_to_string(project.join("build.toml")).unwrap();
    for block in blocks.iter().filter(|b| use_of(b) == Use::CheckConfig) {
        std::fs::write(
            project.join("build.toml"),
            format!("{manifest}\n{}", block.text),
        )
        .unwrap();
        let out = run(kbuild(&project).arg("check-config"));
        assert!(
            out.status.success(),
            "README.md:{}: check-config refuses the block",
            block.line
        );
    }
}
