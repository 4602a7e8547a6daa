//! `kbuild publish` refuses bad inputs before it writes to the Hub, and never prints the
//! credentials an `HF_ENDPOINT` URL carries.

use crate::common::hub::{Hub, TOKEN};
use crate::common::variant::{VariantSpec, write_variant};
use crate::publish_cli::{redacted, without_delays};

const REPO: &str = "org/relu";

/// Requests that changed something on the server (anything but reads).
fn writes(hub: &Hub) -> Vec<String> {
    hub.log()
        .into_iter()
        .filter(|l| !l.starts_with("GET "))
        .collect()
}

#[test]
fn a_branch_name_the_hub_refuses_is_refused_before_the_repository_is_created() {
    let hub = Hub::start(&[]);
    let (project, build) = crate::common::variant::project_with_variant();
    let paths = [(project.path(), "[project]")];
    let mut shown = String::new();
    for bad in [
        "bad name",
        "refs/heads/v1",
        "a..b",
        "v1.lock",
        "-v1",
        "x/",
        "v1~1",
    ] {
        let flag = format!("--branch={bad}");
        let run = hub.publish(&build, &["--repo", REPO, &flag]);
        assert!(!run.ok, "`{bad}` was accepted:\n{}", run.stderr);
        assert_eq!(run.code, Some(1), "{bad}");
        assert!(writes(&hub).is_empty(), "`{bad}`: {:?}", writes(&hub));
        shown.push_str(&redacted(&run.stderr, &hub, &paths));
    }
    insta::assert_snapshot!("bad_branch_names_stderr", shown);
}

#[test]
fn a_variant_whose_op_namespace_is_not_an_identifier_is_refused_before_the_repository_is_created() {
    // What `kbuild build --unique-id my-id` would name its variant.
    let hub = Hub::start(&[]);
    let project = tempfile::tempdir().unwrap();
    let build = project.path().join("build");
    write_variant(
        &build,
        &VariantSpec {
            id: "_relu_cpu_my-id",
            ..VariantSpec::default()
        },
    );
    let run = hub.publish(&build, &["--repo", REPO, "--skip-check"]);
    assert!(!run.ok, "{}", run.stderr);
    assert!(writes(&hub).is_empty(), "{:?}", writes(&hub));
    insta::assert_snapshot!(
        "bad_op_namespace_stderr",
        redacted(&run.stderr, &hub, &[(project.path(), "[project]")])
    );
}

#[test]
fn credentials_in_hf_endpoint_never_appear_in_warnings_errors_or_json() {
    let hub = Hub::start(&[]);
    let (_project, build) = crate::common::variant::project_with_variant();
    let secret = "s3cr3t-pass";
    let endpoint = hub
        .url
        .replace("http://", &format!("http://robot:{secret}@"));
    let env = [
        ("HF_TOKEN", TOKEN),
        ("HF_ENDPOINT", endpoint.as_str()),
        ("KBUILD_HUB_DEADLINE", "20"),
    ];
    // A retry warning, then an error that names the repository URL.
    hub.arm("info:503:1");
    hub.arm("refs:500:9");
    let run = hub.publish_with(&build, &["--repo", REPO, "--json"], &env);
    assert!(!run.ok, "{}", run.stderr);
    for (stream, text) in [("stdout", &run.stdout), ("stderr", &run.stderr)] {
        assert!(
            !text.contains(secret),
            "{stream} shows the password:\n{text}"
        );
    }
    assert!(run.stderr.contains("retrying in"), "{}", run.stderr);
    // The login is not sent (it would replace the token), and shown only as `***`.
    assert!(run.stderr.contains("http://***@"), "{}", run.stderr);
    assert!(!run.stdout.contains("robot") && !run.stderr.contains("robot"));
    // A successful publish's summary names the repository without them too.
    let run = hub.publish_with(&build, &["--repo", REPO, "--json"], &env);
    assert!(run.ok, "{}", run.stderr);
    assert!(!run.stdout.contains(secret) && !run.stderr.contains(secret));
    let url = run.json()["url"].as_str().unwrap().to_string();
    assert_eq!(
        without_delays(&url).replace(&hub.url.replace("http://", ""), "[hub]"),
        "http://[hub]/kernels/org/relu"
    );
}
