//! Publisher trust: Python's `kernels` loads a repo without `trust_remote_code=True` only when
//! its organization's overview says `trustedKernelPublisher: true`. Real projects' tests load
//! `kernels-test/<name>` that way, so the local server must answer for trusted organizations.

use serde_json::Value;

use crate::common::hub::Hub;
use crate::common::variant::{VariantSpec, write_variant};
use crate::publish_e2e::compile_relu;

/// Load `repo` with no trust flag; prints `loaded <module>` or `refused: <kernels' message>`.
fn load_untrusted(repo: &str) -> String {
    format!(
        r#"
import torch
import kernels

try:
    relu = kernels.get_kernel("{repo}", version=1, backend="cpu")
except ValueError as e:
    print("refused:", e)
else:
    x = torch.tensor([-2.0, -0.5, 0.0, 0.5, 3.0])
    assert torch.equal(relu.relu(x), torch.relu(x))
    print("loaded", relu.__name__)
"#
    )
}

/// Publish one real CPU relu variant to every repo in `repos`.
fn publish_relu(hub: &Hub, repos: &[&str]) {
    let project = tempfile::tempdir().unwrap();
    let id = "_relu_cpu_trust001";
    let so = compile_relu(id, project.path());
    let build = project.path().join("build");
    write_variant(
        &build,
        &VariantSpec {
            id,
            so: Some(so),
            ..VariantSpec::default()
        },
    );
    // g++ on this Debian machine pulls in a glibc 2.32 symbol; manylinux is `kbuild check`'s test.
    for repo in repos {
        hub.publish(&build, &["--repo", repo, "--manylinux", "none"])
            .success();
    }
}

#[test]
fn trusted_publisher_loads_without_trust_remote_code_and_others_are_refused() {
    let hub = Hub::start(&["--trusted-publisher", "kernels-test"]);
    publish_relu(&hub, &["kernels-test/x", "other/x"]);

    let trusted = hub.python(&load_untrusted("kernels-test/x"));
    let stdout = String::from_utf8_lossy(&trusted.stdout);
    assert!(stdout.contains("loaded _relu_cpu_trust001"), "{stdout}");

    let untrusted = hub.python(&load_untrusted("other/x"));
    let stdout = String::from_utf8_lossy(&untrusted.stdout);
    assert!(
        stdout.contains("refused:") && stdout.contains("is not from a trusted publisher"),
        "an untrusted organization's kernel was not refused as such: {stdout}"
    );

    let overviews: Vec<String> = hub
        .log()
        .into_iter()
        .filter(|l| l.contains("/api/organizations/"))
        .collect();
    // Each publish asks too (for the load line it prints), then each load.
    assert_eq!(
        overviews,
        [
            "GET /api/organizations/kernels-test/overview -> 200",
            "GET /api/organizations/other/overview -> 200",
            "GET /api/organizations/kernels-test/overview -> 200",
            "GET /api/organizations/other/overview -> 200",
        ]
    );
}

#[test]
fn overview_answers_only_for_known_organizations() {
    let hub = Hub::start(&["--trusted-publisher", "kernels-test"]);
    let (status, body) = hub.request("GET", "/api/organizations/kernels-test/overview", b"");
    assert_eq!(status, 200, "{body}");
    let overview: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(overview["name"], "kernels-test");
    assert_eq!(overview["trustedKernelPublisher"], true);

    let (status, _) = hub.request("GET", "/api/organizations/nobody/overview", b"");
    assert_eq!(
        status, 404,
        "an organization owning nothing has no overview"
    );
}
