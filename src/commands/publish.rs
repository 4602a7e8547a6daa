//! `kbuild publish`: resolve settings (CLI > build.toml > environment), publish, print.

use std::process::ExitCode;

use crate::cli::{GlobalArgs, PublishArgs, RepoTypeArg};
use crate::error::{Error, Result};
use crate::publish::plan::BatchLimits;
use crate::publish::{PublishError, PublishSettings, PublishSummary, RepoTypeAny, auth, publish};
use crate::report::{Printer, Verbosity};

/// Hub used when `HF_ENDPOINT` is not set.
const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

pub fn run(global: &GlobalArgs, args: &PublishArgs, verbosity: Verbosity) -> Result<ExitCode> {
    let settings = resolve(global, args, |k| std::env::var(k).ok())?;
    let printer = Printer::new(verbosity, args.json);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|source| Error::Runtime { source })?;
    let result = runtime.block_on(publish(&settings, &printer));
    printer.finish();
    let summary = result?;
    if args.json {
        let json = serde_json::to_string_pretty(&summary).map_err(|source| Error::Json {
            what: "the publish summary",
            source,
        })?;
        println!("{json}");
    } else if args.dry_run {
        print!("{}", dry_run_report(&summary));
    }
    Ok(ExitCode::SUCCESS)
}

/// Settings from the command line, build.toml (when the project has one) and the environment.
pub fn resolve(
    global: &GlobalArgs,
    args: &PublishArgs,
    env: impl Fn(&str) -> Option<String>,
) -> Result<PublishSettings> {
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
    let endpoint = env("HF_ENDPOINT")
        .filter(|e| !e.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_ENDPOINT.to_string())
        .trim_end_matches('/')
        .to_string();
    let benchmarks = project.join("benchmarks");
    Ok(PublishSettings {
        endpoint,
        token: auth::resolve_token(&env),
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
        benchmarks_dir: benchmarks.is_dir().then_some(benchmarks),
        variants: args.variants.clone(),
        project_version: config.as_ref().map(|c| c.general.version),
        create_pr: args.create_pr,
        dry_run: args.dry_run,
        allow_dirty: args.allow_dirty,
        limits: batch_limits(&env),
    })
}

/// Per-commit limits; `KBUILD_PUBLISH_BATCH_FILES` / `KBUILD_PUBLISH_BATCH_BYTES` override them
/// (for servers with smaller request limits, and for tests).
fn batch_limits(env: impl Fn(&str) -> Option<String>) -> BatchLimits {
    let default = BatchLimits::default();
    let num = |k: &str| {
        env(k)
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|n| *n > 0)
    };
    BatchLimits {
        max_files: num("KBUILD_PUBLISH_BATCH_FILES").map_or(default.max_files, |n| n as usize),
        max_bytes: num("KBUILD_PUBLISH_BATCH_BYTES").unwrap_or(default.max_bytes),
    }
}

/// The plan of a `--dry-run`, one line per file.
fn dry_run_report(s: &PublishSummary) -> String {
    let mut out = format!("Dry run: {} branch `{}`", s.url, s.branch);
    if s.repo_created {
        out.push_str(" (the repository would be created)");
    } else if s.branch_created {
        out.push_str(" (the branch would be created from `main`)");
    }
    out.push('\n');
    for p in &s.added {
        out.push_str(&format!("  add     {p}\n"));
    }
    for p in &s.updated {
        out.push_str(&format!("  update  {p}\n"));
    }
    for p in &s.deleted {
        out.push_str(&format!("  delete  {p}\n"));
    }
    out.push_str(&format!(
        "{} added, {} updated, {} deleted, {} unchanged, {} bytes to upload; README.md on main: {}\nNothing was written.\n",
        s.added.len(),
        s.updated.len(),
        s.deleted.len(),
        s.unchanged,
        s.bytes,
        s.card
    ));
    out
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn batch_limits_come_from_the_environment_when_set() {
        let limits = batch_limits(|k| (k == "KBUILD_PUBLISH_BATCH_FILES").then(|| "3".to_string()));
        assert_eq!(limits.max_files, 3);
        assert_eq!(limits.max_bytes, BatchLimits::default().max_bytes);
        assert_eq!(
            batch_limits(|_| Some("0".into())).max_files,
            BatchLimits::default().max_files
        );
    }

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
