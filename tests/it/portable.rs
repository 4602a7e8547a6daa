//! Portable builds: on this machine (a glibc and libstdc++ newer than manylinux_2_28 allows)
//! kbuild links extensions that pass HF's manylinux_2_28 rule with no flag, still run, get the
//! `manylinux_2_28` wheel tag auditwheel agrees with, and name what it cannot make portable.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::kbuild::{fixture, kbuild, python, run, stdout_json};
use kbuild::portable::{Fixes, SHIMS, compat_source, dynamic_symbols};

/// The variant's extension after `kbuild build --backend cpu --unique-id port` in `root`.
fn build(root: &Path, extra: &[&str]) -> (std::process::Output, PathBuf) {
    let out = run(kbuild(root)
        .args(["build", "--backend", "cpu", "--unique-id", "port", "--json"])
        .args(extra));
    assert!(out.status.success(), "the build failed");
    let variant = PathBuf::from(stdout_json(&out)["variants"][0]["path"].as_str().unwrap());
    let so = std::fs::read_dir(&variant)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".abi3.so"))
        .expect("an extension");
    (out, so)
}

fn check(path: &Path) -> std::process::Output {
    run(kbuild(path).arg("check").arg(path))
}

#[test]
fn every_shim_and_a_pin_compile_with_the_host_compiler() {
    let dir = tempfile::tempdir().unwrap();
    let fixes = Fixes {
        pins: vec![("dlopen".into(), "dlopen@GLIBC_2.2.5".into())],
        shims: SHIMS.iter().map(|s| s.name).collect(),
    };
    let source = dir.path().join("compat.cc");
    std::fs::write(&source, compat_source(&fixes)).unwrap();
    let out = run(Command::new("c++")
        .args(["-x", "c++", "-std=c++17", "-O2", "-fPIC", "-Wall", "-c"])
        .arg(&source)
        .arg("-o")
        .arg(dir.path().join("compat.o")));
    assert!(out.status.success(), "the compat unit does not compile");
}

#[test]
fn calls_into_new_glibc_are_bound_to_old_versions_and_the_extension_runs_the_same() {
    let project = fixture("portable-probe");
    let root = project.path();
    // As linked, it is not portable: the rule the fix has to satisfy.
    let raw_dir = root.join("raw");
    let raw_dir = raw_dir.to_str().unwrap();
    let (_, raw) = build(root, &["--manylinux", "none", "--out-dir", raw_dir]);
    let refused = check(raw.parent().unwrap());
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stdout);
    for symbol in [
        "stat@GLIBC_2.33",
        "dlopen@GLIBC_2.34",
        "pthread_create@GLIBC_2.34",
    ] {
        assert!(said.contains(symbol), "{said}");
    }

    let (_, so) = build(root, &[]);
    let checked = check(so.parent().unwrap());
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stdout)
    );
    let imports = dynamic_symbols(&so).unwrap();
    let version_of = |name: &str| {
        let import = imports.iter().find(|s| s.name == name && !s.defined);
        import.and_then(|s| s.version.clone())
    };
    assert_eq!(version_of("dlopen").as_deref(), Some("GLIBC_2.2.5"));
    assert_eq!(version_of("__xstat").as_deref(), Some("GLIBC_2.2.5"));
    assert_eq!(version_of("__libc_single_threaded"), None);
    assert!(!imports.iter().any(|s| s.name.starts_with("__wrap_")));

    // Both extensions answer the same: stat's result and size, a thread ran, libm opened, a
    // shared_ptr's count.
    let probe = |so: &Path| {
        let code = format!(
            "import torch\ntorch.ops.load_library({so:?})\n\
             print(torch.ops._probe_cpu_port.probe('build.toml'), \
             torch.ops._probe_cpu_port.probe('/nonexistent'))",
            so = so.display().to_string()
        );
        let out = run(Command::new(python()).args(["-c", &code]).current_dir(root));
        assert!(out.status.success(), "the extension does not run");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let size = std::fs::metadata(root.join("build.toml")).unwrap().len();
    assert_eq!(
        probe(&so),
        format!("[0, {size}, 1, 1, 42] [-1, 0, 1, 1, 42]\n")
    );
    assert_eq!(probe(&raw), probe(&so));
}

#[test]
fn an_import_with_no_older_version_is_named_at_build_time_with_its_object() {
    let project = fixture("portable-probe");
    let root = project.path();
    let source = root.join("probe_cpu/probe.cpp");
    let text = std::fs::read_to_string(&source).unwrap();
    std::fs::write(
        &source,
        format!("#include <unistd.h>\n{text}\nvoid close_all() {{ closefrom(3); }}\n"),
    )
    .unwrap();
    let (out, so) = build(root, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "`_probe_cpu_port.abi3.so` is not manylinux_2_28: it imports `closefrom@GLIBC_2.34` \
             (referenced by `probe_cpu__probe.cpp.o`), which has no older version kbuild can bind it to"
        ) && stderr.contains("hint: `kbuild check` and `kbuild publish` refuse it"),
        "{stderr}"
    );
    let refused = check(so.parent().unwrap());
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stdout);
    assert!(said.contains("closefrom@GLIBC_2.34"), "{said}");
    // Everything else was fixed.
    assert_eq!(said.lines().count(), 1, "{said}");
}

#[test]
fn the_hf_relu_cpu_wheel_is_tagged_manylinux_2_28_and_auditwheel_agrees() {
    let project = fixture("relu-v5");
    let root = project.path();
    let out = run(kbuild(root).args(["wheel", "--backend", "cpu", "--json"]));
    assert!(out.status.success());
    let checked = check(&root.join("build"));
    assert!(
        checked.status.success(),
        "kbuild check refuses the relu build"
    );
    let wheel = PathBuf::from(stdout_json(&out)["variants"][0]["wheel"].as_str().unwrap());
    let name = wheel.file_name().unwrap().to_string_lossy().into_owned();
    assert_eq!(
        name,
        "relu-1+torch215.cxx11.cpu-cp39-abi3-manylinux_2_28_x86_64.whl"
    );

    let auditwheel = python().parent().unwrap().join("auditwheel");
    assert!(auditwheel.is_file(), "scripts/setup installs auditwheel");
    let shown = run(Command::new(&auditwheel)
        .args(["show", "--json"])
        .arg(&wheel));
    assert!(shown.status.success());
    let report: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    // The symbols allow manylinux_2_N with N ≤ 28; what auditwheel calls external are torch's
    // own libraries, which the wheel's torch requirement brings.
    let sym_tag = report["sym_tag"].as_str().unwrap();
    let glibc: u32 = sym_tag
        .strip_prefix("manylinux_2_")
        .and_then(|t| t.strip_suffix("_x86_64"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{sym_tag}"));
    assert!(glibc <= 28, "{sym_tag}");
    let external: Vec<&String> = report["external_libs"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert!(
        external
            .iter()
            .all(|l| l.starts_with("libc10") || l.starts_with("libtorch")),
        "{external:?}"
    );
}

/// `kbuild build --backend cpu -v` in `root` (the op namespace follows the sources): its stderr
/// and the variant's extension, read as bytes.
fn build_verbose(root: &Path) -> (String, Vec<u8>) {
    let out = run(kbuild(root).args(["build", "--backend", "cpu", "-v"]));
    assert!(out.status.success(), "the build failed");
    let variant = std::fs::read_dir(root.join("build"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().contains("-cpu-"))
        .expect("a variant");
    let so = std::fs::read_dir(&variant)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".abi3.so"))
        .expect("an extension");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (stderr, std::fs::read(so).unwrap())
}

/// The extension links (`-shared`) a build's `-v` shows.
fn links(stderr: &str) -> usize {
    stderr.lines().filter(|l| l.contains(" -shared ")).count()
}

/// Append `code` to the fixture's kernel source.
fn edit_probe(root: &Path, code: &str) {
    let source = root.join("probe_cpu/probe.cpp");
    let text = std::fs::read_to_string(&source).unwrap();
    std::fs::write(&source, format!("{text}\n{code}\n")).unwrap();
}

#[test]
fn a_relink_whose_objects_import_what_they_did_links_once_and_writes_the_same_extension() {
    let project = fixture("portable-probe");
    let root = project.path();
    let (cold, _) = build_verbose(root);
    assert_eq!(
        links(&cold),
        2,
        "a first link, then one with the compat unit"
    );
    // An edit that calls nothing new: the op namespace (and the extension's name) changes.
    edit_probe(root, "int probe_edit() { return 7; }");
    let (again, once) = build_verbose(root);
    assert!(
        again.contains("linked once, with the last link's compat unit"),
        "{again}"
    );
    assert_eq!(links(&again), 1, "{again}");
    // The older extension is gone from the work directory.
    let work: Vec<String> = walkdir::WalkDir::new(root.join("build/.kbuild"))
        .into_iter()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".abi3.so"))
        .collect();
    assert_eq!(work.len(), 1, "{work:?}");
    // A cold build of the same sources links twice and writes the same bytes.
    std::fs::remove_dir_all(root.join("build")).unwrap();
    let (cold, twice) = build_verbose(root);
    assert_eq!(links(&cold), 2);
    assert!(once == twice, "one link and two give different extensions");
    let variants = root.join("build");
    assert!(check(&variants).status.success());
}

#[test]
fn a_relink_that_calls_into_new_glibc_links_twice_and_binds_the_new_call() {
    let project = fixture("portable-probe");
    let root = project.path();
    build_verbose(root);
    edit_probe(
        root,
        "#include <sys/stat.h>\nint probe_lstat(const char* p) { struct stat st {}; return lstat(p, &st); }",
    );
    let (again, so) = build_verbose(root);
    assert!(!again.contains("linked once"), "{again}");
    assert_eq!(links(&again), 2, "{again}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.so");
    std::fs::write(&path, so).unwrap();
    let imports = dynamic_symbols(&path).unwrap();
    let lstat = imports
        .iter()
        .find(|s| s.name.contains("lstat") && !s.defined);
    assert!(
        lstat.is_none_or(|s| s.version.as_deref() != Some("GLIBC_2.33")),
        "{lstat:?}"
    );
    assert!(check(&root.join("build")).status.success());
}
