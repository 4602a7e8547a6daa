//! Helpers shared by the integration tests.
#![allow(dead_code)] // each test module uses a subset

pub mod fake_cc;
pub mod hub;
pub mod kbuild;
pub mod redact;
pub mod release;
pub mod sigstore;
pub mod variant;
