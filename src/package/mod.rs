//! Hub variant writer and reader: generated files, metadata.json with digest, staged and renamed
//! into place; [`BuiltVariant`] is a variant on disk, read back and verified; wheels and
//! artifacts are written from a `BuiltVariant`.

mod artifact;
mod digest;
mod error;
mod generate;
mod hash;
mod inspect;
mod metadata;
pub mod name;
mod partial;
mod stage;
pub mod tree;
pub mod unpack;
mod variant;
mod wheel;
mod wheel_read;

pub use artifact::{Packed, artifact_name, pack, unpack_artifact, write_artifact};
pub use digest::{VariantDigest, open_regular};
pub use error::PackageError;
pub use generate::{capabilities_py, capability_table, dtypes_h, ops_py, registration_h};
pub use hash::{HashCheck, HashStatus, hash_variants};
pub use metadata::{
    BackendInfo, BuilderVersion, CapabilityDtypes, GitStatus, KbuildSection, KernelDependencyEntry,
    Metadata, NVCC_STEPS, ONE_NVCC, Provenance, nvcc_record, steps_recorded,
};
pub use partial::{NarrowVariants, PartialVariant, check_partial, record_partial};
pub use stage::{
    Stage, Swept, restore_moved_aside, restored_note, sweep_stale, sweep_stale_temps,
    write_if_changed,
};
pub use unpack::UnpackLimits;
pub use variant::{
    BuiltVariant, Install, Installed, by_commit, describe_commits, install_variant, metadata_for,
};
pub use wheel::{Wheel, write_wheel};
pub use wheel_read::unpack_wheel;

use crate::plan::VariantPlan;

/// Write the generated headers a variant's sources include (before compiling).
pub fn write_headers(variant: &VariantPlan) -> Result<(), PackageError> {
    let dir = &variant.generated_include;
    write_if_changed(&dir.join("registration.h"), registration_h()?.as_bytes())?;
    write_if_changed(&dir.join("kbuild_dtypes.h"), dtypes_h(variant)?.as_bytes())?;
    Ok(())
}
