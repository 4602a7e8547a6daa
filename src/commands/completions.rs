//! `kbuild completions SHELL`: clap's script, with `--variant` completed from `kbuild
//! list-variants` run where the user is (the names follow the toolchain, so no fixed list can
//! hold them). `--backend` gets build.toml's backend names from the clap definition itself.

use clap_complete::Shell;

use super::print;
use crate::cli::{Cli, CompletionsArgs};
use crate::error::Result;

/// The variant names of the project around the shell's directory, one a line.
const VARIANTS: &str = "kbuild list-variants 2>/dev/null | cut -d' ' -f1";

/// Run `kbuild completions`.
pub fn run(args: &CompletionsArgs) -> Result<()> {
    print(&script(args.shell))
}

/// The completion script for `shell`.
pub fn script(shell: Shell) -> String {
    let mut cmd = <Cli as clap::CommandFactory>::command();
    // Generated into memory: clap_complete panics when its writer fails.
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "kbuild", &mut out);
    let generated = String::from_utf8_lossy(&out);
    match shell {
        Shell::Bash => generated.replace(
            "--variant)\n                    COMPREPLY=(\"${cur}\")\n                    \
             if [[ \"${BASH_VERSINFO[0]}\" -ge 4 ]]; then\n                        \
             compopt -o nospace\n                    fi\n",
            &format!(
                "--variant)\n                    COMPREPLY=($(compgen -W \"$({VARIANTS})\" -- \
                 \"${{cur}}\"))\n"
            ),
        ),
        Shell::Zsh => edit_lines(&generated, "'*--variant=[", ":NAME:' \\", |line| {
            let spec = line.trim_end_matches("' \\");
            // Inside zsh's single-quoted spec: the delimiter is quoted with `"`.
            let names = VARIANTS.replace("'", "\"");
            format!("{spec}{{compadd -- ${{(f)\"$({names})\"}}}}' \\")
        }),
        Shell::Fish => edit_lines(&generated, " -l variant ", " -r -f", |line| {
            format!("{line} -a \"({VARIANTS})\"")
        }),
        _ => generated.into_owned(),
    }
}

/// `text` with each line that contains `has` and ends with `ends` rewritten by `edit`.
fn edit_lines(text: &str, has: &str, ends: &str, edit: impl Fn(&str) -> String) -> String {
    text.lines()
        .map(|line| match line.contains(has) && line.ends_with(ends) {
            true => edit(line),
            false => line.to_string(),
        })
        .map(|line| line + "\n")
        .collect()
}
