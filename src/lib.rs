//! kbuild: build GPU kernels for the Hugging Face Kernel Hub and publish them.
//!
//! The modules follow the pipeline: config → toolchain → plan → compile → link → package → publish.
//! `report` is the one output seam; `commands` turns resolved settings into pipeline calls.

pub mod cli;
pub mod commands;
pub mod compile;
pub mod config;
pub mod error;
pub mod hint;
pub mod link;
pub mod package;
pub mod plan;
pub mod publish;
pub mod report;
pub mod toolchain;

pub use error::{Error, Result};
