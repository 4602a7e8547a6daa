//! The signer a published repository records: `kbuild publish` writes `signing.json` beside
//! `build/` on the branch when the variants it publishes are signed (by `publish --sign` or an
//! earlier `kbuild sign`), naming the workflow (any ref) or identity and the issuer of their
//! certificates. `kbuild verify` then requires that signer unless told another one, so a variant
//! whose bundle was removed, or one re-signed by another workflow, fails by default.
//!
//! The record is as trustworthy as the repository's write access: whoever can replace the
//! variants can replace it too. It catches a missing or foreign signature among what the
//! repository itself says; to pin a signer independently, pass `--signer-workflow`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::SignError;
use super::policy::{Policy, SignatureCheck, SignatureStatus};

/// The record's name at the top of a published branch (beside `build/`).
pub const RECORD: &str = "signing.json";

/// Who signs a repository's variants.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignerRecord {
    /// The GitHub workflow whose runs sign (`https://github.com/org/repo/.github/workflows/
    /// build.yaml`, any ref), when the certificates name one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    /// The certificates' identity, exactly, when they name no workflow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    /// The OIDC issuer of the certificates.
    pub issuer: String,
    /// The source repository the certificates name, for people reading the record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<String>,
}

impl SignerRecord {
    /// The signer one verified signature names: its workflow without the ref (a release from a
    /// tag and one from `main` are the same signer), else its identity.
    pub fn of(check: &SignatureCheck) -> Option<SignerRecord> {
        if check.status != SignatureStatus::Verified {
            return None;
        }
        let signer = check.signer.clone()?;
        let workflow = (check.source_repository.is_some()
            && signer.contains("/.github/workflows/"))
        .then(|| signer.split('@').next().unwrap_or(&signer).to_string());
        Some(SignerRecord {
            identity: workflow.is_none().then_some(signer),
            workflow,
            issuer: check.issuer.clone()?,
            repository: check.source_repository.clone(),
        })
    }

    /// The signer as what `policy` requires.
    pub fn require(&self, policy: &mut Policy) {
        policy.signer_workflow = self.workflow.clone();
        policy.identity = self.identity.clone();
        policy.issuer = Some(self.issuer.clone());
    }

    /// Whom it names, for messages.
    pub fn signer(&self) -> &str {
        self.workflow
            .as_deref()
            .or(self.identity.as_deref())
            .unwrap_or_default()
    }

    /// The record as published: pretty JSON, one trailing newline.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text.into_bytes()
    }

    /// The record above `path` (a published snapshot: `path` is its top, its `build/`, or a
    /// variant in it), if there is one; a record that does not parse is an error, not ignored.
    pub fn find(path: &Path) -> Result<Option<(SignerRecord, PathBuf)>, SignError> {
        for dir in path.ancestors().take(3) {
            let file = dir.join(RECORD);
            if dir.join("build").is_dir() && file.is_file() {
                return Self::read(&file).map(|r| Some((r, file)));
            }
        }
        Ok(None)
    }

    /// Read a record.
    pub fn read(file: &Path) -> Result<SignerRecord, SignError> {
        let text = std::fs::read_to_string(file).map_err(|source| SignError::Read {
            path: file.to_path_buf(),
            source,
        })?;
        let record: SignerRecord =
            serde_json::from_str(&text).map_err(|e| SignError::BadRecord {
                path: file.to_path_buf(),
                message: e.to_string(),
            })?;
        if record.workflow.is_none() && record.identity.is_none() {
            return Err(SignError::BadRecord {
                path: file.to_path_buf(),
                message: "it names neither a `workflow` nor an `identity`".into(),
            });
        }
        Ok(record)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verified(signer: &str, repository: Option<&str>) -> SignatureCheck {
        SignatureCheck {
            ok: true,
            status: SignatureStatus::Verified,
            signer: Some(signer.into()),
            issuer: Some("https://issuer.example".into()),
            source_repository: repository.map(str::to_string),
            problem: None,
            required_by: None,
        }
    }

    #[test]
    fn a_workflow_signer_is_recorded_without_its_ref_and_an_identity_exactly() {
        let run = "https://github.com/acme/relu/.github/workflows/build.yaml@refs/tags/v1";
        let record =
            SignerRecord::of(&verified(run, Some("https://github.com/acme/relu"))).unwrap();
        assert_eq!(
            record.workflow.as_deref(),
            Some("https://github.com/acme/relu/.github/workflows/build.yaml")
        );
        assert_eq!(record.identity, None);
        let mut policy = Policy::default();
        record.require(&mut policy);
        assert!(policy.pins_a_signer());

        let person = SignerRecord::of(&verified("me@example.com", None)).unwrap();
        assert_eq!(person.identity.as_deref(), Some("me@example.com"));
        assert_eq!(person.workflow, None);
        let unsigned = SignatureCheck {
            status: SignatureStatus::Unsigned,
            ..verified("x", None)
        };
        assert_eq!(SignerRecord::of(&unsigned), None);
    }

    #[test]
    fn a_record_is_read_back_and_one_naming_nobody_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("build")).unwrap();
        let file = dir.path().join(RECORD);
        let record = SignerRecord {
            workflow: Some("https://github.com/a/b/.github/workflows/c.yaml".into()),
            identity: None,
            issuer: "https://issuer.example".into(),
            repository: None,
        };
        std::fs::write(&file, record.to_bytes()).unwrap();
        let variant = dir.path().join("build/v");
        std::fs::create_dir(&variant).unwrap();
        let (found, at) = SignerRecord::find(&variant).unwrap().unwrap();
        assert_eq!((found, at), (record, file.clone()));
        std::fs::write(&file, r#"{"issuer": "https://issuer.example"}"#).unwrap();
        let err = SignerRecord::find(dir.path()).unwrap_err().to_string();
        assert!(err.contains("names neither"), "{err}");
    }
}
