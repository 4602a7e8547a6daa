//! Organizations: the overview Python's `kernels` reads to decide whether a repo's publisher is
//! trusted (`trustedKernelPublisher`), so that loading it needs no `trust_remote_code=True`.

use hyper::StatusCode;
use serde_json::{Value, json};

use crate::context::{Ctx, HandlerResult};
use crate::http::{error, json_resp};
use crate::store::{RepoKind, Store, StoreError};

pub fn overview(ctx: &Ctx<'_>, org: &str) -> HandlerResult {
    match overview_json(ctx.store, &ctx.state.trusted_publishers, org)? {
        Some(body) => Ok(json_resp(StatusCode::OK, &body)),
        None => Ok(error(StatusCode::NOT_FOUND, None, "Organization not found")),
    }
}

/// The overview of `org`, or `None` when the server knows no such organization: one exists
/// once it owns a repository, or when `--trusted-publisher` names it.
fn overview_json(
    store: &Store,
    trusted: &[String],
    org: &str,
) -> Result<Option<Value>, StoreError> {
    let count = |kind| store.count_repos(kind, org);
    let (models, datasets, spaces, kernels) = (
        count(RepoKind::Model)?,
        count(RepoKind::Dataset)?,
        count(RepoKind::Space)?,
        count(RepoKind::Kernel)?,
    );
    let is_trusted = trusted.iter().any(|t| t == org);
    if !is_trusted && models + datasets + spaces + kernels == 0 {
        return Ok(None);
    }
    Ok(Some(json!({
        "name": org,
        "fullname": org,
        "avatarUrl": "",
        "isVerified": false,
        "isFollowing": false,
        "numUsers": 0,
        "numModels": models,
        "numDatasets": datasets,
        "numSpaces": spaces,
        "numKernels": kernels,
        "numFollowers": 0,
        "numPapers": 0,
        "trustedKernelPublisher": is_trusted,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::RepoId;

    fn store_with_kernel(owner: &str) -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let repo = RepoId {
            kind: RepoKind::Kernel,
            owner: owner.into(),
            name: "k".into(),
        };
        store.create_repo(&repo, false).unwrap();
        (dir, store)
    }

    #[test]
    fn only_organizations_named_trusted_are_trusted_publishers() {
        let (_dir, store) = store_with_kernel("other");
        let trusted = vec!["kernels-test".to_string()];

        let listed = overview_json(&store, &trusted, "kernels-test")
            .unwrap()
            .expect("a listed organization exists without repos");
        assert_eq!(listed["trustedKernelPublisher"], json!(true));
        assert_eq!(listed["numKernels"], json!(0));

        let owner = overview_json(&store, &trusted, "other")
            .unwrap()
            .expect("an organization owning a repo exists");
        assert_eq!(owner["trustedKernelPublisher"], json!(false));
        assert_eq!(owner["name"], json!("other"));
        assert_eq!(owner["numKernels"], json!(1));
        assert_eq!(owner["numModels"], json!(0));
    }

    #[test]
    fn unknown_organization_has_no_overview() {
        let (_dir, store) = store_with_kernel("other");
        assert_eq!(
            overview_json(&store, &["kernels-test".to_string()], "nobody").unwrap(),
            None
        );
    }

    #[test]
    fn deleted_repos_no_longer_make_an_organization() {
        let (_dir, store) = store_with_kernel("other");
        let repo = RepoId {
            kind: RepoKind::Kernel,
            owner: "other".into(),
            name: "k".into(),
        };
        store.delete_repo(&repo).unwrap();
        assert_eq!(overview_json(&store, &[], "other").unwrap(), None);
    }
}
