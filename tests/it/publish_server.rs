//! kbuild-hub-server's fidelity, proven by both real clients: what Python's `huggingface_hub`
//! writes, kbuild (hf-hub crate) reads back identically, and the reverse.

use crate::common::hub::Hub;
use crate::common::variant::{CPU_VARIANT, project_with_variant};

#[test]
fn python_lfs_upload_is_recognised_as_unchanged_by_kbuild() {
    let hub = Hub::start(&[]);
    let (_project, build) = project_with_variant();
    // huggingface_hub without Xet: the binary `.so` goes through LFS (batch + basic upload).
    let script = format!(
        "from huggingface_hub import HfApi\n\
         api = HfApi(token='x')\n\
         api.create_repo('org/relu', repo_type='kernel')\n\
         api.create_branch('org/relu', branch='v1', repo_type='kernel')\n\
         api.upload_folder(folder_path={build:?}, path_in_repo='build', repo_id='org/relu', repo_type='kernel', revision='v1')\n\
         files = {{f.path: f for f in api.list_repo_tree('org/relu', repo_type='kernel', revision='v1', recursive=True) if hasattr(f, 'size')}}\n\
         so = files['build/{CPU_VARIANT}/_relu_cpu_abc1234.abi3.so']\n\
         assert so.lfs is not None, so\n\
         print('lfs', so.lfs.sha256)\n",
        build = build.to_string_lossy()
    );
    let out = hub.python_with(&script, &[("HF_HUB_DISABLE_XET", "1")]);
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("lfs "));
    assert!(
        hub.log()
            .iter()
            .any(|l| l.starts_with("PUT /_lfs/") && l.ends_with("-> 200"))
    );

    let s = hub
        .publish(&build, &["--repo", "org/relu", "--json"])
        .success()
        .json();
    assert_eq!(s["unchanged"], 5, "{s}");
    assert_eq!(s["added"], serde_json::json!([]));
    assert_eq!(s["updated"], serde_json::json!([]));
    assert_eq!(s["card"], "added");
}

#[test]
fn listings_are_paginated_and_both_clients_follow_the_pages() {
    let hub = Hub::start(&["--page-size", "2"]);
    let (_project, build) = project_with_variant();
    hub.publish(&build, &["--repo", "org/relu"]).success();
    // Unchanged only if hf-hub read every page of the tree.
    let s = hub
        .publish(&build, &["--repo", "org/relu", "--json"])
        .success()
        .json();
    assert_eq!(s["up_to_date"], true, "{s}");
    assert!(hub.log().iter().any(|l| l.contains("cursor=2")));

    let out = hub.python(
        "from huggingface_hub import HfApi\n\
         api = HfApi()\n\
         files = [f.path for f in api.list_repo_tree('org/relu', repo_type='kernel', revision='v1', recursive=True)]\n\
         commits = api.list_repo_commits('org/relu', repo_type='kernel', revision='v1')\n\
         print(len(files), len(commits))\n",
    );
    // .gitattributes, build/, build/<variant>/, five variant files; the initial commit and ours.
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "8 2");
}

#[test]
fn file_metadata_has_the_headers_huggingface_hub_reads() {
    let hub = Hub::start(&[]);
    let (_project, build) = project_with_variant();
    let s = hub
        .publish(&build, &["--repo", "org/relu", "--json"])
        .success()
        .json();
    let commit = s["commits"][0]["oid"].as_str().unwrap().to_string();
    let script = format!(
        "from huggingface_hub import get_hf_file_metadata, hf_hub_url, HfApi\n\
         url = hf_hub_url('org/relu', 'build/{CPU_VARIANT}/_ops.py', repo_type='kernel', revision='v1')\n\
         m = get_hf_file_metadata(url)\n\
         info = HfApi().get_paths_info('org/relu', ['build/{CPU_VARIANT}/_ops.py'], repo_type='kernel', revision='v1')[0]\n\
         assert m.etag == info.blob_id, (m.etag, info.blob_id)\n\
         print(m.commit_hash, m.size == info.size)\n"
    );
    let out = hub.python(&script);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("{commit} True")
    );
}

#[test]
fn missing_revision_and_file_get_the_hub_error_codes() {
    let hub = Hub::start(&[]);
    let (_project, build) = project_with_variant();
    hub.publish(&build, &["--repo", "org/relu"]).success();
    let out = hub.python(
        r#"
from huggingface_hub import hf_hub_download
from huggingface_hub.errors import EntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError

cases = [
    (("org/relu", "README.md", "main"), None),
    (("org/relu", "nope.txt", "main"), EntryNotFoundError),
    (("org/missing", "README.md", "main"), RepositoryNotFoundError),
    (("org/relu", "README.md", "v9"), RevisionNotFoundError),
]
for (repo, name, rev), err in cases:
    try:
        hf_hub_download(repo, name, repo_type="kernel", revision=rev)
        assert err is None, (repo, name, rev)
    except AssertionError:
        raise
    except Exception as e:
        assert err is not None and isinstance(e, err), (repo, name, rev, type(e))
print("ok")
"#,
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ok");
}
