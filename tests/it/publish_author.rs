//! What a kernel author reads from a publish: the card is the project's own `CARD.md` when it
//! has one (rendered as HF's kernel-builder renders it; `kbuild fill-card` shows it first),
//! `layers` are listed as layers, and a publish ends with the repository's URL and the line
//! that loads it.

use std::path::Path;

use crate::common::hub::Hub;
use crate::common::kbuild::{bin, run};
use crate::common::variant::{CPU_VARIANT, project_with_variant, redigest};
use crate::publish_cli::redacted;

const REPO: &str = "org/relu";

/// A card template as a project writes one for HF's kernel-builder.
const CARD: &str = "---
library_name: kernels
{% if license %}license: {{ license }}
{% endif %}---

# {{ repo_id }}

{% if functions %}
Functions:
{% for f in functions %}
- `{{ f }}`
{% endfor %}
{% endif %}
{% if layers %}
Layers:
{% for l in layers %}
- `{{ l }}`
{% endfor %}
{% endif %}
Benchmark: {{ has_benchmark }}.
";

/// Give the variant a `layers` submodule that `__all__` exports, as HF's relu example does.
fn add_layers(variant: &Path) {
    std::fs::create_dir_all(variant.join("layers")).unwrap();
    std::fs::write(
        variant.join("layers/__init__.py"),
        "import torch\n\nfrom .. import relu\n\n\nclass ReLU(torch.nn.Module):\n    \
         def forward(self, x):\n        return relu(x)\n",
    )
    .unwrap();
    let init = variant.join("__init__.py");
    let text = std::fs::read_to_string(&init).unwrap();
    let text = text.replace(
        "__all__ = [\"relu\"]",
        "from . import layers\n\n__all__ = [\"layers\", \"relu\"]",
    );
    std::fs::write(&init, text).unwrap();
    redigest(variant);
}

fn readme_on_main(hub: &Hub) -> String {
    let (status, card) = hub.request("GET", "/kernels/org/relu/resolve/main/README.md", b"");
    assert_eq!(status, 200);
    card
}

#[test]
fn the_projects_card_md_is_what_lands_on_the_hub_and_fill_card_shows_it_first() {
    let hub = Hub::start(&[]);
    let (project, build) = project_with_variant();
    add_layers(&build.join(CPU_VARIANT));
    std::fs::write(project.path().join("CARD.md"), CARD).unwrap();
    let filled = run(bin()
        .arg("-C")
        .arg(project.path())
        .args(["fill-card", "--repo", REPO]));
    assert!(filled.status.success());
    let filled = String::from_utf8(filled.stdout).unwrap();
    insta::assert_snapshot!(filled);

    hub.publish(&build, &["--repo", REPO]).success();
    assert_eq!(readme_on_main(&hub), filled);
}

#[test]
fn without_a_card_md_kbuilds_card_lists_layers_as_layers() {
    let hub = Hub::start(&[]);
    let (_project, build) = project_with_variant();
    add_layers(&build.join(CPU_VARIANT));
    hub.publish(&build, &["--repo", REPO]).success();
    let card = readme_on_main(&hub);
    assert!(
        card.contains("## Functions\n\n- `relu`\n\n## Layers\n\n- `ReLU`\n"),
        "{card}"
    );
}

#[test]
fn a_broken_card_md_is_refused_at_its_line_before_anything_is_sent() {
    let hub = Hub::start(&[]);
    let (project, build) = project_with_variant();
    std::fs::write(
        project.path().join("CARD.md"),
        "# x\n\n{% if functions %}\nno end\n",
    )
    .unwrap();
    let run = hub.publish(&build, &["--repo", REPO]);
    assert!(!run.ok);
    assert!(
        run.stderr
            .contains("error: cannot render the project's card")
            && run.stderr.contains("CARD.md")
            && run.stderr.contains("kbuild fill-card"),
        "{}",
        run.stderr
    );
    assert_eq!(hub.commits_made(), 0);
}

#[test]
fn a_publish_ends_with_the_url_and_the_line_that_loads_it() {
    let hub = Hub::start(&[]);
    let (project, build) = project_with_variant();
    let run = hub.publish(&build, &["--repo", REPO]).success();
    let tail: Vec<&str> = run.stderr.lines().rev().take(3).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    insta::assert_snapshot!(redacted(
        &tail.join("\n"),
        &hub,
        &[(project.path(), "[project]")]
    ));
    let json = hub
        .publish(&build, &["--repo", REPO, "--json"])
        .success()
        .json();
    assert_eq!(json["trusted_publisher"], false);
    assert_eq!(
        json["load"],
        r#"kernels.get_kernel("org/relu", version=1, backend="cpu", trust_remote_code=True)"#
    );
}

#[test]
fn a_second_create_pr_says_up_to_date_once_and_reports_no_empty_commit() {
    let hub = Hub::start(&[]);
    let (_project, build) = project_with_variant();
    hub.publish(&build, &["--repo", REPO]).success();
    let variant = build.join(CPU_VARIANT);
    std::fs::write(
        variant.join("__init__.py"),
        "from ._ops import ops\n# two\n",
    )
    .unwrap();
    redigest(&variant);
    hub.publish(&build, &["--repo", REPO, "--create-pr"])
        .success();
    let again = hub
        .publish(&build, &["--repo", REPO, "--create-pr"])
        .success();
    assert!(again.stderr.contains("Up to date"), "{}", again.stderr);
    assert!(
        !again.stderr.contains("Committed 0 file(s)"),
        "{}",
        again.stderr
    );
    assert!(
        again.stderr.contains("Review ") && again.stderr.contains("(load it once merged)"),
        "{}",
        again.stderr
    );
}
