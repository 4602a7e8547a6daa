//! A variant that a build killed between its two renames left in `.old-<pid>-…/` (where the
//! filesystem has no `RENAME_EXCHANGE`, as on overlayfs) is put back, and said so, by every
//! command that reads the build directory: `check`, `pack` and `publish`, not only the next
//! build.

use std::path::Path;

use crate::common::hub::Hub;
use crate::common::kbuild::{fixture, kbuild, run};

/// Move `build/<variant>` where a build killed mid-swap leaves it; returns the variant's name.
fn strand_a_variant(root: &Path) -> String {
    let build = root.join("build");
    let variant = std::fs::read_dir(&build)
        .unwrap()
        .map(|e| e.unwrap())
        .find(|e| e.path().join("metadata.json").is_file())
        .expect("a built variant")
        .file_name()
        .to_string_lossy()
        .into_owned();
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let aside = build.join(format!(".old-{dead}-Xy12ab"));
    std::fs::create_dir(&aside).unwrap();
    std::fs::rename(build.join(&variant), aside.join(&variant)).unwrap();
    variant
}

fn says_restored(stderr: &[u8], variant: &str) {
    let stderr = String::from_utf8_lossy(stderr);
    let said = format!("{variant}`, which a killed build had moved aside");
    assert!(stderr.contains(&said), "{stderr}");
}

#[test]
fn check_pack_and_publish_put_back_a_variant_a_killed_build_moved_aside() {
    let project = fixture("silu-noarch");
    let root = project.path();
    assert!(run(kbuild(root).arg("build")).status.success());
    for verb in ["check", "pack"] {
        let variant = strand_a_variant(root);
        let out = run(kbuild(root).arg(verb));
        assert!(out.status.success(), "{verb}");
        says_restored(&out.stderr, &variant);
        assert!(
            root.join("build")
                .join(&variant)
                .join("metadata.json")
                .is_file()
        );
    }
    let hub = Hub::start(&[]);
    let variant = strand_a_variant(root);
    let published = hub.publish(
        &root.join("build"),
        &["--repo", "org/silu", "--allow-dirty"],
    );
    assert!(published.ok, "{}", published.stderr);
    says_restored(published.stderr.as_bytes(), &variant);
}
