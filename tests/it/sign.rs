//! Sigstore signing (issue #38), offline: `kbuild publish --sign` in a GitHub-Actions-shaped
//! environment gets a certificate from the stand-in's Fulcio and a log entry from its Rekor
//! (`devtools/sigstore-standin`: real CA, CT and log cryptography on loopback), publishes the
//! bundle with the variant to kbuild-hub-server, and the variant downloaded back verifies with
//! an independent verifier, sigstore-python through `kernels.verify.verify_variant` with a
//! `GitHubWorkflowPolicy`, given the stand-in's trusted root; a changed file, another workflow
//! and a missing bundle fail, there and in `kbuild verify`. No identity token: a clear error.

use std::path::{Path, PathBuf};

use crate::common::hub::{Hub, TOKEN};
use crate::common::kbuild::{copy_dir, kbuild, repo, run};
use crate::common::sigstore::StandIn;

const VARIANT: &str = "torch215-cxx11-cpu-x86_64-linux";
const REPOSITORY: &str = "acme/relu";
const WORKFLOW: &str = "https://github.com/acme/relu/.github/workflows/build.yaml@refs/heads/main";

/// A Sigstore stand-in and a Hub on loopback, the relu fixture's cpu variant built, and the
/// environment of a GitHub Actions run of `acme/relu`'s `build.yaml` with a Hub token.
struct Signing {
    standin: StandIn,
    hub: Hub,
    dir: tempfile::TempDir,
    project: PathBuf,
    env: Vec<(String, String)>,
    trust: PathBuf,
}

impl Signing {
    fn start() -> Signing {
        let standin = StandIn::start();
        let dir = tempfile::tempdir().unwrap();
        let project = built(dir.path());
        let mut env = standin.actions_env(REPOSITORY, "build.yaml");
        env.push(("HF_TOKEN".into(), TOKEN.into()));
        let trust = standin.trust_config();
        Signing {
            standin,
            hub: Hub::start(&[]),
            dir,
            project,
            env,
            trust,
        }
    }
}

/// The relu fixture's cpu variant, built under `dir`.
fn built(dir: &Path) -> PathBuf {
    let project = dir.join("relu");
    copy_dir(&repo().join("tests/fixtures/relu-v5"), &project);
    let out = run(kbuild(&project)
        .args(["build", "--backend", "cpu"])
        .env("KBUILD_CACHE_DIR", dir.join("cache")));
    assert!(out.status.success(), "the build fails");
    project
}

/// `kbuild verify ARGS` of the version published to `hub`, with the stand-in's trust config.
fn verify(project: &Path, hub: &Hub, standin: &StandIn, args: &[&str]) -> (bool, String) {
    let mut cmd = kbuild(project);
    cmd.args([
        "verify",
        "--repo",
        "acme/relu",
        "--version",
        "1",
        "--trust-config",
    ])
    .arg(standin.trust_config())
    .args(args)
    .env("HF_ENDPOINT", &hub.url)
    .env("HF_TOKEN", TOKEN);
    let out = run(&mut cmd);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// Download the published variant with huggingface_hub and check it with `kernels`' verifier
/// (sigstore-python) given the stand-in's trusted root: the result's name for the right
/// workflow, another workflow, `kernels`' stock policy, a changed file and no bundle.
const INDEPENDENT: &str = r##"
import json, shutil, sys
from pathlib import Path
from huggingface_hub import snapshot_download
import kernels.verify as kv
from sigstore.models import TrustedRoot
from sigstore.verify import Verifier

trusted_root, workflow, work = sys.argv[1], sys.argv[2], Path(sys.argv[3])
root = TrustedRoot.from_file(trusted_root)
# verify_variant asks Verifier.production(): the private instance's root instead.
kv.Verifier.production = classmethod(lambda cls, offline=False: Verifier(trusted_root=root))
local = snapshot_download("acme/relu", repo_type="kernel", revision="v1",
                          allow_patterns="build/*", local_dir=work / "download")
variant = Path(local) / "build" / "torch215-cxx11-cpu-x86_64-linux"
policy = lambda uri: kv.GitHubWorkflowPolicy(repo_id="acme/relu", signer_uris=[uri])
name = lambda result: type(result).__name__
out = {
    "bundle": (variant / "metadata.json.sigstore").is_file(),
    "right_workflow": name(kv.verify_variant(variant, policies=[policy(workflow)])),
    "other_workflow": name(kv.verify_variant(
        variant, policies=[policy(workflow.replace("build.yaml", "other.yaml"))])),
    "stock_policy": name(kv.verify_variant(variant)),
}
changed = shutil.copytree(variant, work / "changed")
(changed / "_ops.py").write_text((changed / "_ops.py").read_text() + "# changed\n")
out["changed_file"] = name(kv.verify_variant(changed, policies=[policy(workflow)]))
unsigned = shutil.copytree(variant, work / "unsigned")
(unsigned / "metadata.json.sigstore").unlink()
out["no_bundle"] = name(kv.verify_variant(unsigned, policies=[policy(workflow)]))
print(json.dumps(out, sort_keys=True))
"##;

#[test]
fn a_variant_published_with_sign_verifies_with_kernels_and_rejects_changes_and_other_signers() {
    let Signing {
        standin,
        hub,
        dir: _dir,
        project,
        env,
        trust,
    } = Signing::start();
    let with: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let args = [
        "--repo",
        "acme/relu",
        "--sign",
        "--trust-config",
        trust.to_str().unwrap(),
    ];
    let published = hub.publish_with(&project.join("build"), &args, &with);
    assert!(published.ok, "{}\n{}", published.stdout, published.stderr);
    assert!(
        published.stderr.contains(&format!("by {WORKFLOW}")),
        "{}",
        published.stderr
    );

    let work = tempfile::tempdir().unwrap();
    let root = standin.trusted_root();
    let script_args = [
        root.to_str().unwrap(),
        WORKFLOW,
        work.path().to_str().unwrap(),
    ];
    let out = hub.python(&format!(
        "import sys; sys.argv = ['x'] + {script_args:?}\n{INDEPENDENT}"
    ));
    let found: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        found,
        serde_json::json!({
            "bundle": true,
            "right_workflow": "Success",
            "other_workflow": "SignatureVerificationFailure",
            "stock_policy": "SignatureVerificationFailure",
            "changed_file": "DigestVerificationFailure",
            "no_bundle": "SignatureBundleMissing",
        })
    );

    // kbuild's own verifier agrees.
    let (ok, stdout) = verify(&project, &hub, &standin, &["--signer-workflow", WORKFLOW]);
    assert!(ok, "{stdout}");
    assert!(
        stdout.contains(&format!(
            "  signature: ok, signed by {WORKFLOW} (https://token.actions.githubusercontent.com)\n"
        )),
        "{stdout}"
    );
    let other = "acme/relu/.github/workflows/other.yaml";
    let (ok, stdout) = verify(&project, &hub, &standin, &["--signer-workflow", other]);
    assert!(!ok, "{stdout}");
    assert!(
        stdout.contains(&format!(
            "  signature: FAILED\n    signed by `{WORKFLOW}`, not by the workflow \
             `https://github.com/{other}`\n"
        )),
        "{stdout}"
    );
    let bundle = project
        .join("build")
        .join(VARIANT)
        .join("metadata.json.sigstore");
    std::fs::remove_file(&bundle).unwrap();
    let local = project.join("build").join(VARIANT);
    let out = run(kbuild(&project)
        .arg("verify")
        .arg(&local)
        .args(["--signer-workflow", other, "--trust-config"])
        .arg(&trust));
    assert!(!out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(
            "  signature: MISSING\n    no `metadata.json.sigstore`: the variant is not signed\n"
        ),
        "{stdout}"
    );
}

#[test]
fn sign_takes_a_given_identity_token_and_without_one_fails_with_a_hint_and_writes_nothing() {
    let standin = StandIn::start();
    let dir = tempfile::tempdir().unwrap();
    let project = built(dir.path());
    let variant = project.join("build").join(VARIANT);
    let bundle = variant.join("metadata.json.sigstore");
    let trust = standin.trust_config();
    let out = run(kbuild(&project)
        .args(["sign", "--trust-config"])
        .arg(&trust)
        .env_remove("SIGSTORE_ID_TOKEN")
        .env_remove("GITHUB_ACTIONS")
        .env_remove("ACTIONS_ID_TOKEN_REQUEST_URL")
        .env_remove("ACTIONS_ID_TOKEN_REQUEST_TOKEN"));
    assert!(!out.status.success());
    insta::assert_snapshot!("sign_without_a_token", String::from_utf8_lossy(&out.stderr));
    assert!(!bundle.exists(), "nothing is written without a token");

    let token = standin.token("acme/relu", "release.yaml");
    // A variant whose files no longer match its digest is not signed: the signature would vouch
    // for them.
    let ops = variant.join("_ops.py");
    let original = std::fs::read(&ops).unwrap();
    std::fs::write(&ops, [original.as_slice(), b"# changed\n"].concat()).unwrap();
    let out = run(kbuild(&project)
        .args(["sign", "--trust-config"])
        .arg(&trust)
        .args(["--identity-token", &token]));
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("error: refusing to sign")
            && stderr.contains("File hash mismatch for _ops.py"),
        "{stderr}"
    );
    assert!(!bundle.exists());
    std::fs::write(&ops, original).unwrap();
    let out = run(kbuild(&project)
        .args(["sign", "--json", "--trust-config"])
        .arg(&trust)
        .args(["--identity-token", &token]));
    assert!(out.status.success());
    let signed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let release = "https://github.com/acme/relu/.github/workflows/release.yaml@refs/heads/main";
    assert_eq!(signed[0]["identity"], release, "{signed}");
    assert!(bundle.is_file());
    let out = run(kbuild(&project)
        .args([
            "verify",
            "--signer-workflow",
            "acme/relu/.github/workflows/release.yaml",
        ])
        .arg("--trust-config")
        .arg(&trust));
    assert!(out.status.success(), "any ref of the workflow");

    // Public-good Sigstore does not know the stand-in's CA: the same bundle does not verify.
    let out = run(kbuild(&project).args(["verify", "--signer-workflow", release]));
    assert!(!out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("  signature: FAILED\n    the signature of metadata.json does not verify"),
        "{stdout}"
    );
}

/// The snapshot of `acme/relu` v1 (its `build/` and `signing.json`), downloaded with
/// huggingface_hub into `dir`.
fn download(hub: &Hub, dir: &Path) -> PathBuf {
    let out = hub.python(&format!(
        "from huggingface_hub import snapshot_download\n\
         snapshot_download('acme/relu', repo_type='kernel', revision='v1', local_dir={:?})",
        dir.to_str().unwrap()
    ));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir.to_path_buf()
}

#[test]
fn the_signer_a_publish_records_is_required_by_default_and_a_stale_bundle_is_not_published() {
    let Signing {
        standin,
        hub,
        dir,
        project,
        env,
        trust,
    } = Signing::start();
    let with: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let publish = |extra: &[&str]| {
        let mut args = vec![
            "--repo",
            "acme/relu",
            "--trust-config",
            trust.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        hub.publish_with(&project.join("build"), &args, &with)
    };
    let published = publish(&["--sign"]);
    assert!(published.ok, "{}\n{}", published.stderr, published.stdout);
    let workflow = WORKFLOW.split('@').next().unwrap();
    assert!(
        published.stderr.contains(&format!(
            "Recording signer {workflow} (https://token.actions."
        )),
        "{}",
        published.stderr
    );

    // No signer asked for: the one the repository records is required, and named as such.
    let (ok, stdout) = verify(&project, &hub, &standin, &[]);
    assert!(ok, "{stdout}");
    insta::assert_snapshot!("verify_requires_the_recorded_signer", stdout);

    // A downloaded snapshot carries the record: a variant re-signed by another workflow of the
    // same repository, or with its bundle removed, fails; the signer asked for wins.
    let snapshot = download(&hub, &dir.path().join("snapshot"));
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(snapshot.join("signing.json")).unwrap()).unwrap();
    assert_eq!(record["workflow"], workflow, "{record}");
    let verify_local = |extra: &[&str]| {
        let out = run(kbuild(&project)
            .arg("verify")
            .arg(snapshot.join("build"))
            .arg("--trust-config")
            .arg(&trust)
            .args(extra));
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    assert!(verify_local(&[]).0, "{}", verify_local(&[]).1);
    let token = standin.token("acme/relu", "release.yaml");
    let out = run(kbuild(&project)
        .arg("sign")
        .arg(snapshot.join("build"))
        .arg("--trust-config")
        .arg(&trust)
        .args(["--identity-token", &token]));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (ok, stdout) = verify_local(&[]);
    assert!(!ok, "{stdout}");
    let release = "https://github.com/acme/relu/.github/workflows/release.yaml@refs/heads/main";
    assert!(
        stdout.contains(&format!(
            "  signature: FAILED\n    signed by `{release}`, not by the workflow `{workflow}`\n    \
             signer required by the repository's record `{}`",
            snapshot.join("signing.json").display()
        )),
        "{stdout}"
    );
    let (ok, stdout) = verify_local(&[
        "--signer-workflow",
        "acme/relu/.github/workflows/release.yaml",
    ]);
    assert!(ok, "{stdout}");
    std::fs::remove_file(
        snapshot
            .join("build")
            .join(VARIANT)
            .join("metadata.json.sigstore"),
    )
    .unwrap();
    let (ok, stdout) = verify_local(&[]);
    assert!(!ok, "{stdout}");
    assert!(stdout.contains("  signature: MISSING\n"), "{stdout}");

    // metadata.json changed after signing: its bundle no longer verifies, and publish says so
    // before anything is sent.
    let variant = project.join("build").join(VARIANT);
    let metadata = variant.join("metadata.json");
    let original = std::fs::read(&metadata).unwrap();
    std::fs::write(&metadata, [original.as_slice(), b"\n"].concat()).unwrap();
    let stale = publish(&[]);
    assert!(!stale.ok, "{}", stale.stderr);
    assert!(
        stale.stderr.contains(&format!(
            "error: the signature of variant `{VARIANT}` does not verify against"
        )) && stale
            .stderr
            .contains("hint: a rebuild after signing makes the bundle stale"),
        "{}",
        stale.stderr
    );
    std::fs::write(&metadata, &original).unwrap();

    // Published unsigned over a branch that records a signer: a warning, and the variant then
    // fails verification by default.
    std::fs::remove_file(variant.join("metadata.json.sigstore")).unwrap();
    let unsigned = publish(&[]);
    assert!(unsigned.ok, "{}", unsigned.stderr);
    assert!(
        unsigned
            .stderr
            .contains("`v1` records a signer in `signing.json`, but these variants are not signed"),
        "{}",
        unsigned.stderr
    );
    let (ok, stdout) = verify(&project, &hub, &standin, &[]);
    assert!(!ok && stdout.contains("  signature: MISSING\n"), "{stdout}");
}
