//! `kbuild test`: `kbuild develop` (what can run here), then the project's own tests, unchanged,
//! under pytest, with `kernels` loading the backend that was built.

use std::path::Path;
use std::process::ExitCode;

use super::develop::develop_here;
use crate::cli::{DevelopArgs, TestArgs};
use crate::develop::{TestRun, run_tests};
use crate::error::Result;
use crate::report::Printer;

/// Run `kbuild test`; exits as pytest exits.
pub fn run(project_dir: &Path, args: TestArgs, printer: &Printer) -> Result<ExitCode> {
    let develop = DevelopArgs {
        flags: args.flags,
        dry_run: false,
        uninstall: false,
    };
    let Some(here) = develop_here(project_dir, &develop, printer)? else {
        return Ok(ExitCode::SUCCESS);
    };
    let status = run_tests(&TestRun {
        python: here.python,
        project_root: project_dir.to_path_buf(),
        out_dir: here.out_dir,
        backend: here.backend,
        pytest_args: args.pytest_args,
    })?;
    // pytest's own codes (1 tests failed, 5 none collected…); killed by a signal: 1.
    let code = status
        .code()
        .and_then(|c| u8::try_from(c).ok())
        .unwrap_or(1);
    Ok(ExitCode::from(code))
}
