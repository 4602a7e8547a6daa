//! The signatures a publish carries: every variant's `metadata.json.sigstore` must verify (a
//! rebuild after signing leaves a stale one), all or none of the variants are signed, by one
//! signer; that signer becomes the branch's `signing.json` (`crate::sign::record`), which
//! `kbuild verify` then requires by default.

use super::error::PublishError;
use super::local::{LocalBuild, LocalFile};
use crate::package::BuiltVariant;
use crate::sign::{BUNDLE, Policy, RECORD, SignatureStatus, SignerRecord, Trust, check_variant};

/// The signer of `build`'s variants, checked against `trust`'s instance; `None` when no
/// variant is signed.
pub fn signer_of(build: &LocalBuild, trust: &Trust) -> Result<Option<SignerRecord>, PublishError> {
    let (signed, unsigned): (Vec<_>, Vec<_>) =
        (build.variants.iter()).partition(|v| v.dir.join(BUNDLE).is_file());
    if signed.is_empty() {
        return Ok(None);
    }
    if !unsigned.is_empty() {
        let names = |vs: &[&BuiltVariant]| vs.iter().map(|v| v.name.clone()).collect();
        return Err(PublishError::PartlySigned {
            signed: names(&signed),
            unsigned: names(&unsigned),
        });
    }
    let policy = Policy {
        trust: trust.clone(),
        ..Policy::default()
    };
    let verifier = policy.verifier()?;
    let mut signers: Vec<(String, SignerRecord)> = Vec::new();
    for variant in signed {
        let check = check_variant(&variant.dir, &policy, &verifier);
        let record = match (check.status, SignerRecord::of(&check)) {
            (SignatureStatus::Verified, Some(record)) => record,
            _ => {
                return Err(PublishError::BadSignature {
                    variant: variant.name.clone(),
                    problem: check
                        .problem
                        .unwrap_or_else(|| "its certificate names no signer".into()),
                    trust: trust.shown(),
                });
            }
        };
        signers.push((variant.name.clone(), record));
    }
    let first = signers[0].1.clone();
    if signers.iter().any(|(_, r)| *r != first) {
        return Err(PublishError::SignersDiffer {
            signers: signers
                .into_iter()
                .map(|(v, r)| (v, r.signer().to_string()))
                .collect(),
        });
    }
    Ok(Some(first))
}

/// The record as a file of the branch.
pub fn record_file(record: &SignerRecord) -> LocalFile {
    LocalFile::from_bytes(RECORD.to_string(), record.to_bytes())
}
