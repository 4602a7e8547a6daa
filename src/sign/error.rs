//! What can go wrong signing a variant.

use std::path::PathBuf;

use crate::hint::Hint;

/// A signing failure: nothing is written for the variant that failed (a bundle is written only
/// once it verifies against the instance's trusted root).
#[derive(Debug, thiserror::Error)]
pub enum SignError {
    #[error("no identity token to sign with: Sigstore's keyless signing needs an OIDC identity")]
    NoIdentityToken,
    #[error("the identity token cannot be used: {message}")]
    BadIdentityToken { message: String },
    #[error("cannot read the Sigstore trust config `{}`: {message}", path.display())]
    TrustConfig { path: PathBuf, message: String },
    #[error("the public-good Sigstore instance's embedded trust material does not load: {message}")]
    PublicGood { message: String },
    #[error("no variant to sign in `{}` (a variant directory holds a metadata.json)", path.display())]
    NoVariants { path: PathBuf },
    #[error("`{}` is not a directory: kbuild signs variant directories", path.display())]
    NotADirectory { path: PathBuf },
    #[error("cannot read `{}`", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write `{}`", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("signing `{}` failed: {message}", path.display())]
    Signing { path: PathBuf, message: String },
    #[error("the bundle Sigstore returned for `{}` does not verify: {message}", path.display())]
    Unverified { path: PathBuf, message: String },
    #[error("the signer record `{}` is not one kbuild reads: {message}", path.display())]
    BadRecord { path: PathBuf, message: String },
    #[error("cannot start the async runtime signing runs on")]
    Runtime(#[source] std::io::Error),
    /// The variant is not what its metadata.json says: signing it would vouch for other files.
    #[error("refusing to sign `{}`", dir.display())]
    Variant {
        dir: PathBuf,
        #[source]
        source: Box<crate::package::PackageError>,
    },
}

impl Hint for SignError {
    fn hint(&self) -> Option<String> {
        match self {
            SignError::NoIdentityToken => Some(
                "in GitHub Actions give the job `permissions: id-token: write` (kbuild then asks \
                 ACTIONS_ID_TOKEN_REQUEST_URL for a token); elsewhere pass `--identity-token` or \
                 set SIGSTORE_ID_TOKEN"
                    .into(),
            ),
            SignError::BadIdentityToken { .. } => {
                Some("pass an OIDC identity token (a JWT) whose audience is `sigstore`".into())
            }
            SignError::TrustConfig { .. } => Some(
                "give a Sigstore ClientTrustConfig JSON (`mediaType` \
                 application/vnd.dev.sigstore.clienttrustconfig.v0.1+json) with `trustedRoot` and \
                 `signingConfig`, as `sigstore --trust-config` and cosign take"
                    .into(),
            ),
            SignError::PublicGood { .. } => Some("this is a kbuild bug: please report it".into()),
            SignError::NoVariants { .. } => {
                Some("build first (`kbuild build`), or give a variant directory".into())
            }
            SignError::NotADirectory { .. } => Some(
                "sign the variants before packing them (`kbuild sign`, then `kbuild pack`): the \
                 artifact then carries each bundle"
                    .into(),
            ),
            SignError::Read { .. } | SignError::Write { .. } => None,
            SignError::Signing { .. } => Some(
                "check that the instance's Fulcio and Rekor answer (`--trust-config` names them) \
                 and that the identity token has not expired; nothing was written"
                    .into(),
            ),
            SignError::Unverified { .. } => Some(
                "the instance's services do not match its trusted root: check `--trust-config`; \
                 nothing was written"
                    .into(),
            ),
            SignError::BadRecord { .. } => Some(
                "`kbuild publish` writes it from the variants' signatures: publish the signed \
                 variants again, or pass `--signer-workflow`/`--identity` to choose the signer \
                 yourself"
                    .into(),
            ),
            SignError::Runtime(_) => None,
            SignError::Variant { source, .. } => source.hint().or_else(|| {
                Some("rebuild (`kbuild build`), then sign the variant it writes".into())
            }),
        }
    }
}
