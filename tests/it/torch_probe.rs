//! The torch probe reads torch's facts from its files instead of importing it, answers exactly
//! what `import torch` answers, and falls back to the import whenever the files are not clear.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use kbuild::toolchain::{FactCache, PROBE_IMPORT_ENV, Python, TORCH_PROBE, TorchInfo};

use crate::common::kbuild::{python, run};

/// The probe's JSON answer from `python` with `PYTHONPATH=pythonpath` (when given), reading
/// files or (`import`) importing torch.
fn probe(python: &Path, pythonpath: Option<&Path>, import: bool) -> Value {
    let mut cmd = Command::new(python);
    cmd.args(["-c", TORCH_PROBE]).env_remove(PROBE_IMPORT_ENV);
    if import {
        cmd.env(PROBE_IMPORT_ENV, "1");
    }
    if let Some(dir) = pythonpath {
        cmd.env("PYTHONPATH", dir);
    }
    let out = run(&mut cmd);
    assert!(out.status.success(), "the probe failed");
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.lines().last().unwrap_or_default()).expect("the probe prints JSON")
}

/// The interpreters with a real torch: the project's, and every toolchain kbuild installed.
fn real_pythons() -> Vec<PathBuf> {
    let mut pythons = vec![python()];
    if let Ok(root) = kbuild::managed::toolchains_dir() {
        let managed = kbuild::managed::installed(&root).unwrap_or_default();
        pythons.extend(managed.into_iter().map(|m| m.python));
    }
    pythons
}

#[test]
fn probe_reads_from_files_the_same_facts_that_importing_torch_gives() {
    for python in real_pythons() {
        let light = probe(&python, None, false);
        let imported = probe(&python, None, true);
        assert_eq!(light["via"], "files", "{light}");
        assert_eq!(imported["via"], "import", "{imported}");
        let fields = light.as_object().unwrap();
        assert!(fields.contains_key("cxx11_abi"), "{light}");
        for (key, value) in fields.iter().filter(|(k, _)| *k != "via") {
            assert_eq!(value, &imported[key], "`{key}` of {}", python.display());
        }
        assert_eq!(
            fields.len(),
            imported.as_object().unwrap().len() - 1,
            "only `why` more"
        );

        let info = Python {
            path: python.clone(),
            origin: "test".into(),
        }
        .torch_info(&FactCache::in_memory())
        .expect("torch_info");
        let from_import: TorchInfo = serde_json::from_value(imported).unwrap();
        assert_eq!(info, from_import);
    }
}

/// A fake `torch` package in `site`: `__init__.py` and the files given as (path, bytes).
fn fake_torch(site: &Path, init: &str, files: &[(&str, &[u8])]) {
    let torch = site.join("torch");
    std::fs::create_dir_all(&torch).unwrap();
    std::fs::write(torch.join("__init__.py"), init).unwrap();
    for (path, bytes) in files {
        let path = torch.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
}

/// A libc10.so built with the new C++ ABI: a c10 function taking a `std::__cxx11::string`.
const NEW_ABI_LIB: &[u8] =
    b"\x7fELF\0\0_ZN3c105helloERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE\0";
/// The same function built with the old ABI (`Ss` is the pre-C++11 `std::string`).
const OLD_ABI_LIB: &[u8] = b"\x7fELF\0\0_ZN3c105helloERKSs\0";
const ATEN_H: &[u8] = b"#error C++23 or later compatible compiler is required to use ATen.\n";

#[test]
fn probe_answers_from_files_without_importing_torch() {
    let version_py = b"from typing import Optional\n__all__ = ['__version__', 'cuda']\n\
                       __version__ = '9.1.0+cpu'\ncuda: Optional[str] = None\n";
    for (lib, abi) in [(NEW_ABI_LIB, true), (OLD_ABI_LIB, false)] {
        let site = tempfile::tempdir().unwrap();
        fake_torch(
            site.path(),
            "raise RuntimeError('the probe imported torch')\n",
            &[
                ("version.py", version_py),
                ("lib/libc10.so", lib),
                ("include/ATen/ATen.h", ATEN_H),
            ],
        );
        let answer = probe(&python(), Some(site.path()), false);
        assert_eq!(answer["via"], "files", "{answer}");
        assert_eq!(answer["version"], "9.1.0+cpu");
        assert_eq!(answer["cuda"], Value::Null);
        assert_eq!(answer["cxx11_abi"], abi);
        assert_eq!(answer["cxx_std"], 23);
        let torch = site.path().join("torch");
        assert_eq!(answer["lib_dir"], torch.join("lib").to_str().unwrap());
        let watch = answer["watch"].as_array().unwrap();
        assert!(watch.contains(&torch.join("lib/libc10.so").to_str().unwrap().into()));
    }
}

#[test]
fn probe_imports_torch_when_its_files_are_missing_or_unclear() {
    let init = "__version__ = '9.2.0+cu999'\n\
                class version:\n    cuda = '99.9'\n\
                class _C:\n    _GLIBCXX_USE_CXX11_ABI = False\n";
    let odd_versions: [Option<&[u8]>; 3] = [
        None,
        Some(b"__version__ = compute()\ncuda = '12.8'\n"),
        Some(b"__version__ = '1.0'\nif True:\n    cuda = '12.8'\n"),
    ];
    for version_py in odd_versions {
        let site = tempfile::tempdir().unwrap();
        let mut files: Vec<(&str, &[u8])> = vec![("lib/libc10.so", NEW_ABI_LIB)];
        files.extend(version_py.map(|v| ("version.py", v)));
        fake_torch(site.path(), init, &files);
        let answer = probe(&python(), Some(site.path()), false);
        assert_eq!(answer["via"], "import", "{answer}");
        assert!(answer["why"].as_str().unwrap().contains("version.py"));
        assert_eq!(answer["version"], "9.2.0+cu999");
        assert_eq!(answer["cuda"], "99.9");
        assert_eq!(
            answer["cxx11_abi"], false,
            "from `_C`, not from the library"
        );
    }

    let site = tempfile::tempdir().unwrap();
    fake_torch(
        site.path(),
        init,
        &[("version.py", b"__version__ = '1.0'\ncuda = None\n")],
    );
    let answer = probe(&python(), Some(site.path()), false);
    assert_eq!(answer["via"], "import", "no libc10.so: {answer}");
    assert_eq!(answer["version"], "9.2.0+cu999");
}

#[test]
fn probe_without_torch_says_no_torch_and_what_to_watch() {
    // `-S`: no site-packages, so no torch.
    let out = run(Command::new(python()).args(["-S", "-c", TORCH_PROBE]));
    let answer: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(answer["error"], "no-torch", "{answer}");
    assert!(!answer["watch"].as_array().unwrap().is_empty());
}
