//! `kbuild build-and-upload` (HF's name): `kbuild build`, then `kbuild publish` of what it wrote.

use std::process::ExitCode;

use crate::cli::{BuildAndUploadArgs, BuildArgs, GlobalArgs, PublishArgs};
use crate::error::Result;
use crate::report::Printer;

/// Run `kbuild build-and-upload`.
pub fn run(global: &GlobalArgs, args: BuildAndUploadArgs, printer: &Printer) -> Result<ExitCode> {
    let publish = PublishArgs {
        repo: args.repo,
        repo_type: args.repo_type,
        private: args.private,
        branch: args.branch,
        variants: args.options.flags.select.variants.clone(),
        build_dir: args.options.flags.out_dir.clone(),
        create_pr: args.create_pr,
        dry_run: false,
        allow_dirty: false,
        allow_partial: false,
        allow_mixed: false,
        allow_foreign: false,
        skip_check: false,
        manylinux: args.options.manylinux.clone(),
        sign: false,
        signing: Default::default(),
        json: args.options.json,
    };
    // One JSON document on stdout: the publish's.
    let mut options = args.options;
    options.json = false;
    let build = BuildArgs {
        options,
        dry_run: false,
        wheel: false,
        artifact: false,
    };
    super::build::run(&global.project, build, printer)?;
    super::publish::run(global, &publish, printer)
}
