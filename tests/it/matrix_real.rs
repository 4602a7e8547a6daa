//! The real matrix: a cpu fixture built for torch 2.14 (a managed toolchain that
//! `kbuild toolchain install --torch 2.14` provisioned) and 2.15 (the test Python) in one run,
//! each variant loaded by `kernels` under its own torch. Needs the 2.14 toolchain, so it runs
//! when `KBUILD_TEST_MATRIX` is set (scripts/test installs the toolchain and sets it).

use std::process::Command;

use crate::common::kbuild::{fixture, kbuild, run, stdout_json};

const LOAD: &str = r#"
import pathlib, sys, torch, kernels
root = pathlib.Path(sys.argv[1])
k = kernels.get_local_kernel(root, backend="cpu")
x = torch.randn(1000)
torch.testing.assert_close(k.relu(x), torch.clamp(x, min=0), rtol=0, atol=0)
print(torch.__version__.split("+")[0], pathlib.Path(k.__file__).parent.name)
"#;

#[test]
fn one_build_makes_a_variant_per_torch_each_loaded_by_its_own_torch() {
    if std::env::var_os("KBUILD_TEST_MATRIX").is_none() {
        eprintln!("skipped: set KBUILD_TEST_MATRIX after `kbuild toolchain install --torch 2.14`");
        return;
    }
    let project = fixture("relu-v5");
    let out = run(kbuild(project.path()).args([
        "build",
        "--torch",
        "2.14,2.15",
        "--backend",
        "cpu",
        "--json",
    ]));
    assert!(out.status.success());
    // Each unit says which torch's variant it is: `[cpu]` alone would name both.
    let mut compiled: Vec<String> = stdout_json(&out)["compiled"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap().to_string())
        .collect();
    compiled.sort();
    assert_eq!(
        compiled,
        [
            "relu_cpu/relu_cpu.cpp [torch214-cpu]",
            "relu_cpu/relu_cpu.cpp [torch215-cpu]",
            "torch-ext/torch_binding.cpp [torch214-cpu]",
            "torch-ext/torch_binding.cpp [torch215-cpu]",
        ]
    );
    let mut names: Vec<String> = stdout_json(&out)["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    let arch = format!("{}-linux", std::env::consts::ARCH);
    assert_eq!(
        names,
        [
            format!("torch214-cxx11-cpu-{arch}"),
            format!("torch215-cxx11-cpu-{arch}")
        ]
    );

    let managed = kbuild::managed::toolchains_dir().unwrap();
    let py214 = kbuild::managed::for_torch(&managed, None, "2.14")
        .unwrap()
        .expect("the torch 2.14 toolchain is installed")
        .python;
    for (python, torch, variant) in [
        (py214, "2.14", &names[0]),
        (crate::common::kbuild::python(), "2.15", &names[1]),
    ] {
        let mut cmd = Command::new(&python);
        cmd.args(["-c", LOAD])
            .arg(project.path())
            .env("HF_HUB_OFFLINE", "1");
        let out = run(&mut cmd);
        assert!(
            out.status.success(),
            "torch {torch} could not load its variant"
        );
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(said.trim().starts_with(torch), "{said}");
        assert!(said.contains(variant.as_str()), "{said}");
    }
}
