//! `kbuild publish`: resolve settings (CLI > build.toml > environment), publish, print.

use std::ffi::OsString;
use std::process::ExitCode;

use crate::cli::{GlobalArgs, PublishArgs, RepoTypeArg};
use crate::error::Result;
use crate::package::UnpackLimits;
use crate::publish::{PublishError, PublishSettings, RepoTypeAny, auth, card, publish_blocking};
use crate::publish::{compare::BatchLimits, local::LocalOptions, retry::RetryPolicy};
use crate::report::{Printer, Reporter};

/// Hub used when `HF_ENDPOINT` is not set.
const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

pub fn run(global: &GlobalArgs, args: &PublishArgs, printer: &Printer) -> Result<ExitCode> {
    let settings = resolve(global, args, |k| crate::env::var_os(k))?;
    super::sign::before_publish(args, &settings, printer)?;
    let result = publish_blocking(&settings, printer);
    printer.finish();
    let summary = result?;
    // The commits are made before the summary is printed: a closed stdout cannot undo them,
    // so it ends the command non-zero with a note on stderr that the publish itself completed.
    let printed = if args.json {
        super::print(&format!("{}\n", summary.to_json()))
    } else if args.dry_run {
        super::print(&summary.dry_run_report())
    } else {
        summary.report_closing(printer);
        Ok(())
    };
    if let Err(crate::error::Error::Stdout { source }) = &printed
        && !args.dry_run
        && !summary.commits.is_empty()
    {
        printer.warn(&format!(
            "published to `{}` branch `{}`, but the summary could not be written to stdout: {source}",
            summary.repo, summary.branch
        ));
    }
    printed.map(|()| ExitCode::SUCCESS)
}

/// Settings from the command line, build.toml (when the project has one) and the environment.
/// The environment is read raw: a token that is not UTF-8 is an error, not "no token".
pub fn resolve(
    global: &GlobalArgs,
    args: &PublishArgs,
    env_os: impl Fn(&str) -> Option<OsString>,
) -> Result<PublishSettings> {
    let env = |k: &str| env_os(k).and_then(|v| v.into_string().ok());
    let project = &global.project;
    let config = if project.join("build.toml").is_file() {
        Some(crate::config::load(project)?)
    } else {
        None
    };
    let hub = config
        .as_ref()
        .map(|c| c.general.hub.clone())
        .unwrap_or_default();
    let repo_id = args
        .repo
        .clone()
        .or(hub.repo_id)
        .ok_or(PublishError::NoRepo)?;
    let endpoint = env("HF_ENDPOINT").filter(|e| !e.trim().is_empty());
    let endpoint = endpoint.as_deref().unwrap_or(DEFAULT_ENDPOINT);
    let benchmarks = project.join("benchmarks");
    let unpack = UnpackLimits::from_env(env)?;
    Ok(PublishSettings {
        endpoint: endpoint.trim_end_matches('/').to_string(),
        token: auth::resolve_token(&env_os).map_err(|(source_name, problem)| {
            PublishError::BadToken {
                source_name,
                problem,
            }
        })?,
        repo_id,
        repo_type: match args.repo_type {
            RepoTypeArg::Kernel => RepoTypeAny::Kernel,
            RepoTypeArg::Model => RepoTypeAny::Model,
        },
        private: args.private,
        branch: args.branch.clone().or(hub.branch),
        build_dir: args
            .build_dir
            .clone()
            .unwrap_or_else(|| project.join("build")),
        // Whatever is there (a link too) goes to publish, which refuses anything but a directory.
        benchmarks_dir: std::fs::symlink_metadata(&benchmarks)
            .is_ok()
            .then_some(benchmarks),
        card: card::ProjectCard::find(project)?,
        variants: args.variants.clone(),
        project_version: config.as_ref().map(|c| c.general.version),
        create_pr: args.create_pr,
        dry_run: args.dry_run,
        allow_dirty: args.allow_dirty,
        allow_partial: args.allow_partial,
        // A stand-in binary (not ELF) has no ABI to evaluate; what publish verifies still holds.
        check: (!args.skip_check).then(|| crate::check::CheckOptions {
            manylinux: (args.manylinux != "none").then(|| args.manylinux.clone()),
            cuobjdump: None,
            lenient: true,
            unpack,
        }),
        local: LocalOptions {
            unpack,
            allow_mixed: args.allow_mixed,
            allow_foreign: args.allow_foreign,
        },
        limits: BatchLimits::from_env(env),
        retry: RetryPolicy::from_env(env),
        trust: crate::sign::Trust::from_arg(args.signing.trust_config.as_deref()),
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn endpoint_defaults_to_the_hub_and_drops_a_trailing_slash() {
        let dir = tempfile::tempdir().unwrap();
        let global = GlobalArgs {
            project: dir.path().to_path_buf(),
            verbose: false,
            quiet: false,
        };
        let args = <crate::cli::Cli as clap::Parser>::try_parse_from([
            "kbuild", "publish", "--repo", "org/k",
        ])
        .map(|c| match c.command {
            crate::cli::Command::Publish(a) => a,
            _ => unreachable!("parsed a publish command"),
        })
        .unwrap();
        let s = resolve(&global, &args, |_| None).unwrap();
        assert_eq!(s.endpoint, DEFAULT_ENDPOINT);
        let s = resolve(&global, &args, |k| {
            (k == "HF_ENDPOINT").then(|| "http://127.0.0.1:9/".into())
        })
        .unwrap();
        assert_eq!(s.endpoint, "http://127.0.0.1:9");
        assert_eq!(s.build_dir, Path::new(dir.path()).join("build"));
    }
}
