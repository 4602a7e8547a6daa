//! A variant's `metadata.json.sigstore` against the signer a user requires: the bundle verifies
//! against the instance's trusted root (certificate chain, SCT, transparency log inclusion and
//! checkpoint, signature over metadata.json), and its certificate names the workflow, identity
//! and issuer asked for. `kernels.verify.verify_variant(path, policies=[GitHubWorkflowPolicy(…)])`
//! accepts what this accepts for a workflow.

use std::path::Path;

use serde::Serialize;
use sigstore_sign::types::Bundle;
use sigstore_verify::{VerificationPolicy, VerificationResult, Verifier};

use super::BUNDLE;
use super::error::SignError;
use super::trust::Trust;

/// GitHub Actions' OIDC issuer, which `--signer-workflow` implies.
pub const GITHUB_ISSUER: &str = "https://token.actions.githubusercontent.com";

/// The signer a verification requires.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    pub trust: Trust,
    /// A GitHub workflow, `org/repo/.github/workflows/build.yaml@refs/heads/main` (without
    /// `@<ref>`: any ref), or its `https://github.com/…` URI: the certificate's build signer.
    pub signer_workflow: Option<String>,
    /// The certificate's identity (its SAN), exactly.
    pub identity: Option<String>,
    /// The OIDC issuer [default with `signer_workflow`: GitHub Actions'].
    pub issuer: Option<String>,
}

impl Policy {
    /// Whether a signer is required: then an unsigned variant fails.
    pub fn pins_a_signer(&self) -> bool {
        self.signer_workflow.is_some() || self.identity.is_some() || self.issuer.is_some()
    }

    /// The verifier of this policy's instance.
    pub fn verifier(&self) -> Result<Verifier, SignError> {
        let instance = self.trust.load()?;
        Verifier::new(&instance.trusted_root).map_err(|e| SignError::TrustConfig {
            path: self.trust.shown(),
            message: e.to_string(),
        })
    }

    fn issuer(&self) -> Option<&str> {
        self.issuer
            .as_deref()
            .or(self.signer_workflow.as_ref().map(|_| GITHUB_ISSUER))
    }
}

/// How a variant's signature fared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SignatureStatus {
    /// It verifies, and names the signer required (if one was).
    Verified,
    /// No `metadata.json.sigstore`.
    Unsigned,
    /// It does not verify, or names another signer.
    Failed,
}

/// A variant's signature, checked.
#[derive(Debug, Clone, Serialize)]
pub struct SignatureCheck {
    pub ok: bool,
    pub status: SignatureStatus,
    /// Whom the certificate names (a workflow URI in GitHub Actions).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signer: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_repository: Option<String>,
    /// Why it failed (or why an unsigned variant fails).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// Who asked for the signer checked: `you` (`--signer-workflow`, `--identity`,
    /// `--issuer`) or the record the repository keeps; `None`: no signer was required.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub required_by: Option<String>,
}

impl SignatureCheck {
    fn failed(problem: String) -> SignatureCheck {
        SignatureCheck {
            ok: false,
            status: SignatureStatus::Failed,
            signer: None,
            issuer: None,
            source_repository: None,
            problem: Some(problem),
            required_by: None,
        }
    }
}

/// Check the bundle of the variant in `dir` against `policy` (whose `verifier` is given).
pub fn check_variant(dir: &Path, policy: &Policy, verifier: &Verifier) -> SignatureCheck {
    let bundle_path = dir.join(BUNDLE);
    let Ok(json) = std::fs::read_to_string(&bundle_path) else {
        let pinned = policy.pins_a_signer();
        return SignatureCheck {
            ok: !pinned,
            status: SignatureStatus::Unsigned,
            signer: None,
            issuer: None,
            source_repository: None,
            problem: pinned.then(|| format!("no `{BUNDLE}`: the variant is not signed")),
            required_by: None,
        };
    };
    let bundle = match Bundle::from_json(&json) {
        Ok(bundle) => bundle,
        Err(e) => {
            return SignatureCheck::failed(format!("`{BUNDLE}` is not a Sigstore bundle: {e}"));
        }
    };
    let metadata = match std::fs::read(dir.join("metadata.json")) {
        Ok(bytes) => bytes,
        Err(e) => return SignatureCheck::failed(format!("cannot read metadata.json: {e}")),
    };
    let mut required = VerificationPolicy::any_identity();
    if let Some(identity) = &policy.identity {
        required = required.require_identity(identity.as_str());
    }
    if let Some(issuer) = policy.issuer() {
        required = required.require_issuer(issuer);
    }
    match verifier.verify(metadata.as_slice(), &bundle, &required) {
        Ok(result) => judge(&result, policy),
        Err(e) => SignatureCheck::failed(format!(
            "the signature of metadata.json does not verify: {e}"
        )),
    }
}

/// A bundle that verified, against the workflow the policy requires.
fn judge(result: &VerificationResult, policy: &Policy) -> SignatureCheck {
    let claims = result.certificate().map(|c| &c.ci_claims);
    let signer = claims
        .and_then(|c| c.build_signer_uri.clone())
        .or_else(|| result.identity().map(|i| i.as_str().to_string()));
    let mut check = SignatureCheck {
        ok: true,
        status: SignatureStatus::Verified,
        signer: signer.clone(),
        issuer: result.issuer().map(str::to_string),
        source_repository: claims.and_then(|c| c.source_repository_uri.clone()),
        problem: None,
        required_by: None,
    };
    if let Some(wanted) = &policy.signer_workflow {
        let wanted = workflow_uri(wanted);
        let matches = signer.as_deref().is_some_and(|s| {
            s == wanted || (!wanted.contains('@') && s.starts_with(&format!("{wanted}@")))
        });
        if !matches {
            check.ok = false;
            check.status = SignatureStatus::Failed;
            check.problem = Some(format!(
                "signed by `{}`, not by the workflow `{wanted}`",
                signer
                    .as_deref()
                    .unwrap_or("an identity with no build signer")
            ));
        }
    }
    check
}

/// `org/repo/.github/workflows/x.yaml@ref` as the URI Fulcio writes (`https://github.com/…`).
pub fn workflow_uri(workflow: &str) -> String {
    if workflow.starts_with("https://") {
        workflow.to_string()
    } else {
        format!("https://github.com/{}", workflow.trim_start_matches('/'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workflow_is_named_as_fulcio_names_it() {
        assert_eq!(
            workflow_uri("acme/relu/.github/workflows/build.yaml@refs/heads/main"),
            "https://github.com/acme/relu/.github/workflows/build.yaml@refs/heads/main"
        );
        let uri = "https://github.com/acme/relu/.github/workflows/build.yaml";
        assert_eq!(workflow_uri(uri), uri);
    }
}
