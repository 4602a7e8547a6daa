//! Which Sigstore instance signs and verifies: public-good Sigstore (its trust material as
//! sigstore-rust embeds it), or a private one named by a `ClientTrustConfig` file (the format
//! `sigstore --trust-config` and cosign read: a trusted root and a signing config).

use std::path::{Path, PathBuf};

use serde::Deserialize;
use sigstore_sign::SigningServices;
use sigstore_sign::rekor::RekorApiVersion;
use sigstore_sign::trust_root::{SigningConfig, SigstoreInstance, TrustedRoot};

use super::error::SignError;

/// The instance to use.
#[derive(Debug, Clone, Default)]
pub enum Trust {
    #[default]
    PublicGood,
    /// A `ClientTrustConfig` JSON file (`--trust-config`).
    File(PathBuf),
}

/// An instance's trust material and where it signs.
pub struct Instance {
    pub trusted_root: TrustedRoot,
    signing_config: Option<SigningConfig>,
    shown: PathBuf,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ClientTrustConfig {
    trusted_root: serde_json::Value,
    #[serde(default)]
    signing_config: Option<serde_json::Value>,
}

impl Trust {
    /// `--trust-config FILE` or, without one, public-good Sigstore.
    pub fn from_arg(path: Option<&Path>) -> Trust {
        path.map_or(Trust::PublicGood, |p| Trust::File(p.to_path_buf()))
    }

    /// How errors name it.
    pub fn shown(&self) -> PathBuf {
        match self {
            Trust::PublicGood => PathBuf::from("<public-good Sigstore>"),
            Trust::File(path) => path.clone(),
        }
    }

    /// Read the instance's trust material.
    pub fn load(&self) -> Result<Instance, SignError> {
        match self {
            Trust::PublicGood => {
                let bad = |e: sigstore_sign::trust_root::Error| SignError::PublicGood {
                    message: e.to_string(),
                };
                Ok(Instance {
                    trusted_root: TrustedRoot::from_embedded(SigstoreInstance::PublicGood)
                        .map_err(bad)?,
                    signing_config: SigstoreInstance::PublicGood
                        .embedded_signing_config()
                        .map_err(bad)?,
                    shown: self.shown(),
                })
            }
            Trust::File(path) => load_file(path),
        }
    }
}

fn load_file(path: &Path) -> Result<Instance, SignError> {
    let bad = |message: String| SignError::TrustConfig {
        path: path.to_path_buf(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    let config: ClientTrustConfig =
        serde_json::from_str(&text).map_err(|e| bad(format!("not a ClientTrustConfig: {e}")))?;
    let trusted_root = TrustedRoot::from_json(&config.trusted_root.to_string())
        .map_err(|e| bad(format!("`trustedRoot`: {e}")))?;
    let signing_config = config
        .signing_config
        .map(|value| SigningConfig::from_json(&value.to_string()))
        .transpose()
        .map_err(|e| bad(format!("`signingConfig`: {e}")))?;
    Ok(Instance {
        trusted_root,
        signing_config,
        shown: path.to_path_buf(),
    })
}

impl Instance {
    /// The services to sign with: the signing config's Fulcio, its Rekor (a v1 log where it
    /// has one: a `hashedrekord` 0.0.1 entry with an inclusion promise, as cosign's bundles
    /// carry) and its timestamp authority, if any.
    pub fn services(&self) -> Result<SigningServices, SignError> {
        let bad = |message: &str| SignError::TrustConfig {
            path: self.shown.clone(),
            message: message.to_string(),
        };
        let config = self
            .signing_config
            .as_ref()
            .ok_or_else(|| bad("no `signingConfig`: it names no service to sign with"))?;
        let fulcio = config.fulcio_url().ok_or_else(|| {
            bad("`signingConfig` names no valid certificate authority (`caUrls`)")
        })?;
        let (rekor, version) = match config.rekor_url(Some(1)) {
            Some(v1) => (v1, RekorApiVersion::V1),
            None => {
                let any = config
                    .rekor_url(None)
                    .ok_or_else(|| bad("`signingConfig` names no valid log (`rekorTlogUrls`)"))?;
                let version = RekorApiVersion::from_major(any.major_api_version)
                    .ok_or_else(|| bad("`signingConfig`'s log speaks an API kbuild does not"))?;
                (any, version)
            }
        };
        let mut services =
            SigningServices::new(&fulcio.url, &rekor.url).with_rekor(&rekor.url, version);
        if let Some(tsa) = config.tsa_url() {
            services = services.with_tsa_url(&tsa.url);
        }
        services
            .validate()
            .map_err(|e| bad(&format!("cannot sign with these services: {e}")))?;
        Ok(services)
    }
}
