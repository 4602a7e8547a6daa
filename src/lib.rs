//! kbuild: build GPU kernels for the Hugging Face Kernel Hub and publish them.
//!
//! The modules follow the pipeline: config → toolchain → plan → depends → compile → link →
//! package → publish, and `orchestrator` runs the stages in order. `process` starts every
//! external program (`reaper` kills what is left of them if kbuild is killed), `files` reads the project's files, `schedule` runs units of work in
//! parallel, `managed` installs toolchains and keeps kbuild.lock, `report` is the one output
//! seam, and `commands` turns resolved settings into one library call each. See ARCHITECTURE.md.

#![warn(clippy::too_many_lines)]

pub mod check;
pub mod clean;
pub mod cli;
pub mod commands;
pub mod compile;
pub mod config;
pub mod depends;
pub mod develop;
pub mod env;
pub mod error;
pub mod files;
pub mod hint;
pub mod init;
pub mod jobserver;
pub mod link;
pub mod managed;
pub mod orchestrator;
pub mod package;
pub mod plan;
pub mod portable;
pub mod process;
pub mod publish;
pub mod pyproject;
pub mod reaper;
pub mod redact;
pub mod report;
pub mod schedule;
pub mod sign;
pub mod toolchain;
pub mod update_config;
pub mod verify;
