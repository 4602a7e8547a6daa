//! Sigstore keyless signing of a variant's final `metadata.json` (which holds the digest of every
//! other file), as kernels-community's CI signs with `cosign sign-blob --bundle`: a standard
//! bundle written beside it as `metadata.json.sigstore`, which `kernels`
//! (`kernels.verify.verify_variant`, `kernels verify-signature`) and any Sigstore verifier
//! check. The identity is an OIDC token: GitHub Actions' ambient one, or one given. The
//! instance is public-good Sigstore, or the one a trust config names (`trust`); `policy`
//! checks a bundle against the signer a user requires.

mod error;
pub mod policy;
mod record;
mod trust;

use std::path::{Path, PathBuf};

use serde::Serialize;
use sigstore_sign::oidc::IdentityToken;
use sigstore_sign::types::Bundle;
use sigstore_sign::{Signer, SigningContext};
use sigstore_verify::{VerificationPolicy, Verifier};

pub use error::SignError;
pub use policy::{Policy, SignatureCheck, SignatureStatus, check_variant};
pub use record::{RECORD, SignerRecord};
pub use trust::Trust;

use crate::report::Reporter;

/// The bundle's name, beside the variant's metadata.json.
pub const BUNDLE: &str = "metadata.json.sigstore";

/// How to sign.
#[derive(Debug, Clone)]
pub struct SignSettings {
    pub trust: Trust,
    /// An OIDC identity token; `None`: the CI's ambient one (GitHub Actions).
    pub identity_token: Option<String>,
}

/// A variant signed.
#[derive(Debug, Clone, Serialize)]
pub struct Signed {
    pub bundle: PathBuf,
    /// The signer the certificate names (a workflow URI in GitHub Actions).
    pub identity: String,
    pub issuer: String,
}

/// The variant directories at `path`: itself when it holds a metadata.json, else those below
/// it (a build directory; hidden ones are kbuild's own).
pub fn variant_dirs(path: &Path) -> Result<Vec<PathBuf>, SignError> {
    if path.join("metadata.json").is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    if path.is_file() {
        return Err(SignError::NotADirectory {
            path: path.to_path_buf(),
        });
    }
    let entries = std::fs::read_dir(path).map_err(|source| SignError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let mut dirs: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .filter(|p| p.join("metadata.json").is_file())
        .collect();
    dirs.sort();
    if dirs.is_empty() {
        return Err(SignError::NoVariants {
            path: path.to_path_buf(),
        });
    }
    Ok(dirs)
}

/// Sign the metadata.json of each of `dirs`, writing `metadata.json.sigstore` beside it once the
/// bundle verifies against the instance's trusted root. One identity token for all.
pub fn sign_variants(
    dirs: &[PathBuf],
    settings: &SignSettings,
    reporter: &dyn Reporter,
) -> Result<Vec<Signed>, SignError> {
    // First, before a token is asked for: a signature vouches for every file the digest names.
    for dir in dirs {
        crate::package::BuiltVariant::read(dir).map_err(|e| SignError::Variant {
            dir: dir.clone(),
            source: Box::new(e),
        })?;
    }
    let instance = settings.trust.load()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(SignError::Runtime)?;
    let token = runtime.block_on(identity_token(settings.identity_token.as_deref()))?;
    let services = instance.services()?;
    let signer = SigningContext::new(services).signer(token);
    let verifier = Verifier::new(&instance.trusted_root).map_err(|e| SignError::TrustConfig {
        path: settings.trust.shown(),
        message: e.to_string(),
    })?;
    let mut signed = Vec::new();
    for dir in dirs {
        reporter.stage("Signing", &dir.join("metadata.json").display().to_string());
        signed.push(runtime.block_on(sign_one(dir, &signer, &verifier))?);
    }
    Ok(signed)
}

/// The token given, else GitHub Actions' ambient one (requested for audience `sigstore`).
async fn identity_token(given: Option<&str>) -> Result<IdentityToken, SignError> {
    let bad = |e: sigstore_sign::oidc::Error| SignError::BadIdentityToken {
        message: e.to_string(),
    };
    let token = match given {
        Some(jwt) => IdentityToken::from_jwt(jwt.trim()).map_err(bad)?,
        None => IdentityToken::detect_ambient()
            .await
            .map_err(bad)?
            .ok_or(SignError::NoIdentityToken)?,
    };
    if token.is_expired() {
        return Err(SignError::BadIdentityToken {
            message: format!("it expired at {}", token.expiration()),
        });
    }
    Ok(token)
}

async fn sign_one(dir: &Path, signer: &Signer, verifier: &Verifier) -> Result<Signed, SignError> {
    let metadata = dir.join("metadata.json");
    let bytes = std::fs::read(&metadata).map_err(|source| SignError::Read {
        path: metadata.clone(),
        source,
    })?;
    let bundle: Bundle = signer
        .sign(bytes.as_slice())
        .await
        .map_err(|e| SignError::Signing {
            path: metadata.clone(),
            message: e.to_string(),
        })?;
    let unverified = |message: String| SignError::Unverified {
        path: metadata.clone(),
        message,
    };
    let result = verifier
        .verify(
            bytes.as_slice(),
            &bundle,
            &VerificationPolicy::any_identity(),
        )
        .map_err(|e| unverified(e.to_string()))?;
    let json = bundle.to_json().map_err(|e| unverified(e.to_string()))?;
    let path = dir.join(BUNDLE);
    crate::files::write_atomic(&path, json.as_bytes()).map_err(|source| SignError::Write {
        path: path.clone(),
        source,
    })?;
    Ok(Signed {
        bundle: path,
        identity: result
            .identity()
            .map(|i| i.as_str().to_string())
            .unwrap_or_default(),
        issuer: result.issuer().unwrap_or_default().to_string(),
    })
}
