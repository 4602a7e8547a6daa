//! kbuild's integration tests: one crate, one binary; `common` holds what they share.

mod common;

mod artifacts;
mod build_faults;
mod build_interrupt;
mod build_pipeline;
mod build_schedule;
mod capabilities_hf;
mod check;
mod compile_cache;
mod compile_command;
mod compile_real;
mod compile_runner;
mod compiler_launcher;
mod config_bad;
mod config_fuzz;
mod config_good;
mod cutlass_deps;
mod develop_pytest;
mod error_output;
mod generated_files;
mod hub_trust;
mod matrix_build;
mod matrix_real;
mod module_graph;
mod noop_fast_path;
mod publish_cli;
mod publish_e2e;
mod publish_faults;
mod publish_links;
mod publish_server;
mod publish_verify;
mod stable_abi;
mod stdout_closed;
mod toolchain_install;
mod wheel_install;
