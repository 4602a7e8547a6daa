//! `--unique-id` is checked once, when the arguments are parsed, with the rule `kbuild check`
//! applies to the op namespace it becomes part of: anything but ASCII letters, digits and `_`,
//! nothing, or more than 64 characters is refused with a hint before anything is written, so
//! it never reaches the generated `_ops.py` (a noarch project) nor the C++ compile or the link.

use crate::common::kbuild::{fixture, kbuild, run};

#[test]
fn a_unique_id_that_cannot_be_part_of_a_module_name_is_refused_before_anything_is_written() {
    let long = "x".repeat(300);
    let bad = [
        "x;__import__('os').system('touch P')",
        "../x",
        "a b",
        "a.b",
        long.as_str(),
        "",
    ];
    for fixture_name in ["silu-noarch", "relu-v5"] {
        let project = fixture(fixture_name);
        let root = project.path();
        for id in bad {
            for verb in ["build", "wheel"] {
                let out = run(kbuild(root).args([verb, "--unique-id", id]));
                let stderr = String::from_utf8_lossy(&out.stderr);
                assert_eq!(out.status.code(), Some(2), "{verb} {id:?}: {stderr}");
                assert!(stderr.contains("hint: "), "{stderr}");
                for written in ["build", "dist", "P"] {
                    assert!(
                        !root.join(written).exists(),
                        "{verb} {id:?} wrote `{written}`"
                    );
                }
            }
        }
    }
    let project = fixture("silu-noarch");
    let out = run(kbuild(project.path()).args(["build", "--unique-id", "x;__import__('os')"]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    insta::assert_snapshot!(stderr.trim_end());
}

#[test]
fn the_longest_unique_id_builds_a_noarch_variant_that_kbuild_check_accepts() {
    let project = fixture("silu-noarch");
    let root = project.path();
    let id = format!("Ci_{}", "7".repeat(kbuild::plan::MAX_UNIQUE_ID - 3));
    assert!(
        run(kbuild(root).args(["build", "--unique-id", &id]))
            .status
            .success()
    );
    let ops = walkdir::WalkDir::new(root.join("build"))
        .into_iter()
        .map(|e| e.unwrap().into_path())
        .find(|p| p.ends_with("_ops.py"))
        .expect("an _ops.py");
    let text = std::fs::read_to_string(ops).unwrap();
    assert!(text.contains(&format!("_{id}")), "{text}");
    assert!(run(kbuild(root).arg("check")).status.success());
}
