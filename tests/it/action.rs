//! The GitHub Action (`action.yml` at the root) run here as GitHub runs a composite action: its
//! steps in order, read from the file itself, `if:` and `${{ inputs.* }}` evaluated, each `run:`
//! in bash with GITHUB_ACTION_PATH / GITHUB_PATH / GITHUB_OUTPUT / RUNNER_TEMP, the PATH without
//! cargo or `target/`. `uses:` steps (the toolchain cache) cannot run here and are listed.
//! The expression evaluator knows only the forms action.yml uses: a new form fails the test.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common::hub::{Hub, TOKEN};
use crate::common::kbuild::{bin, python, repo, run};
use crate::common::release::{plain_path, release_wheel, yaml};

struct Runner {
    inputs: BTreeMap<String, String>,
    temp: PathBuf,
    env: Vec<(String, String)>,
    outputs: BTreeMap<String, BTreeMap<String, String>>,
    skipped: Vec<String>,
    log: String,
}

impl Runner {
    fn new(action: &Value, given: &[(&str, &str)], temp: &Path) -> Runner {
        let mut inputs = BTreeMap::new();
        for (name, spec) in action["inputs"].as_object().expect("inputs") {
            let default = spec["default"].as_str().unwrap_or("").to_string();
            inputs.insert(name.clone(), default);
        }
        for (name, value) in given {
            assert!(
                inputs.contains_key(*name),
                "action.yml has no input `{name}`"
            );
            inputs.insert(name.to_string(), value.to_string());
        }
        Runner {
            inputs,
            temp: temp.to_path_buf(),
            env: Vec::new(),
            outputs: BTreeMap::new(),
            skipped: Vec::new(),
            log: String::new(),
        }
    }

    /// `${{ inputs.NAME }}` and `${{ steps.ID.outputs.KEY }}` substituted.
    fn expand(&self, text: &str) -> String {
        let mut out = String::new();
        let mut rest = text;
        while let Some(start) = rest.find("${{") {
            out.push_str(&rest[..start]);
            let end = rest[start..].find("}}").expect("closing }}") + start;
            out.push_str(&self.value(rest[start + 3..end].trim()));
            rest = &rest[end + 2..];
        }
        out + rest
    }

    fn value(&self, expr: &str) -> String {
        if let Some(name) = expr.strip_prefix("inputs.") {
            return self
                .inputs
                .get(name)
                .cloned()
                .unwrap_or_else(|| panic!("input {name}"));
        }
        if let Some(rest) = expr.strip_prefix("steps.") {
            let (id, key) = rest.split_once(".outputs.").expect("steps.ID.outputs.KEY");
            return self
                .outputs
                .get(id)
                .and_then(|o| o.get(key))
                .cloned()
                .unwrap_or_default();
        }
        panic!("the test's evaluator does not know `{expr}`: teach it, or keep action.yml simple")
    }

    /// `inputs.NAME == 'LIT'` or `inputs.NAME != 'LIT'`.
    fn condition(&self, expr: &str) -> bool {
        let (lhs, op, rhs) = if let Some((l, r)) = expr.split_once("!=") {
            (l, false, r)
        } else if let Some((l, r)) = expr.split_once("==") {
            (l, true, r)
        } else {
            panic!("the test's evaluator does not know the condition `{expr}`")
        };
        let literal = rhs.trim().trim_matches('\'');
        (self.value(lhs.trim()) == literal) == op
    }

    fn run_step(&mut self, step: &Value, path: &str) -> bool {
        let name = step["name"].as_str().unwrap_or("(unnamed)").to_string();
        if step.get("uses").is_some() {
            self.skipped
                .push(format!("{name} (uses {})", step["uses"].as_str().unwrap()));
            return true;
        }
        if let Some(cond) = step.get("if").and_then(Value::as_str)
            && !self.condition(cond)
        {
            self.skipped.push(format!("{name} (if: {cond})"));
            return true;
        }
        let github_output = self.temp.join(format!("output-{}", self.outputs.len()));
        std::fs::write(&github_output, "").unwrap();
        let github_path = self.temp.join("github_path");
        let added: Vec<String> = std::fs::read_to_string(&github_path)
            .unwrap_or_default()
            .lines()
            .rev()
            .map(String::from)
            .collect();
        let mut path_dirs = added.join(":");
        if !path_dirs.is_empty() {
            path_dirs.push(':');
        }
        let cwd = match step.get("working-directory").and_then(Value::as_str) {
            Some(dir) => PathBuf::from(self.expand(dir)),
            None => self.temp.clone(),
        };
        let mut cmd = Command::new("bash");
        cmd.args(["--noprofile", "--norc", "-eo", "pipefail", "-c"])
            .arg(self.expand(step["run"].as_str().expect("run")))
            .current_dir(&cwd)
            .env_clear()
            .env("PATH", format!("{path_dirs}{path}"))
            .env("HOME", &self.temp)
            .env("GITHUB_ACTION_PATH", repo())
            .env("GITHUB_PATH", &github_path)
            .env("GITHUB_OUTPUT", &github_output)
            .env("RUNNER_TEMP", &self.temp)
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        for (key, value) in step["env"].as_object().into_iter().flatten() {
            cmd.env(key, self.expand(value.as_str().expect("env value")));
        }
        let out = run(&mut cmd);
        self.log.push_str(&format!(
            "== {name}\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
        let id = step["id"].as_str().unwrap_or(&name).to_string();
        let outputs = std::fs::read_to_string(&github_output)
            .unwrap()
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self.outputs.insert(id, outputs);
        out.status.success()
    }

    /// Every step; false at the first that fails (as GitHub stops there).
    fn run_all(&mut self, action: &Value, path: &str) -> bool {
        let steps = action["runs"]["steps"].as_array().expect("steps").clone();
        steps.iter().all(|step| self.run_step(step, path))
    }

    fn action_output(&self, action: &Value, name: &str) -> String {
        self.expand(
            action["outputs"][name]["value"]
                .as_str()
                .expect("output value"),
        )
    }
}

fn action() -> Value {
    let action = yaml(&repo().join("action.yml"));
    assert_eq!(action["runs"]["using"], "composite");
    action
}

/// A `kbuild init --backends cpu` project (`kern` in a temporary directory) and a runner of the
/// action on it: the release wheel, the cpu backend, the test Python, and the inputs `more`.
struct CpuProject {
    _tmp: tempfile::TempDir,
    project: PathBuf,
    action: Value,
    runner: Runner,
}

fn cpu_project(more: &[(&str, &str)]) -> CpuProject {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("kern");
    let out = run(bin()
        .args(["init"])
        .arg(&project)
        .args(["--backends", "cpu"]));
    assert!(out.status.success());
    let temp = tmp.path().join("runner-temp");
    std::fs::create_dir(&temp).unwrap();
    let action = action();
    let (wheel, python) = (release_wheel(), python());
    let mut inputs = vec![
        ("wheel", wheel.to_str().unwrap()),
        ("working-directory", project.to_str().unwrap()),
        ("backends", "cpu"),
        ("python", python.to_str().unwrap()),
    ];
    inputs.extend_from_slice(more);
    let runner = Runner::new(&action, &inputs, &temp);
    CpuProject {
        _tmp: tmp,
        project,
        action,
        runner,
    }
}

#[test]
fn the_action_installs_kbuild_builds_checks_and_publishes_to_the_hub() {
    let hub = Hub::start(&[]);
    let CpuProject {
        _tmp,
        project,
        action,
        mut runner,
    } = cpu_project(&[("publish-repo", "kbuild-test/act")]);
    runner.env = vec![
        ("HF_ENDPOINT".into(), hub.url.clone()),
        ("HF_TOKEN".into(), TOKEN.into()),
    ];
    let ok = runner.run_all(&action, &plain_path(&[]));
    eprintln!("{}\nskipped: {:?}", runner.log, runner.skipped);
    assert!(ok, "a step failed");
    assert!(!runner.log.contains(TOKEN));
    assert_eq!(runner.skipped, ["Cache toolchains (uses actions/cache@v4)"]);

    let installed = runner
        .log
        .lines()
        .find(|l| l.starts_with("installed "))
        .unwrap();
    eprintln!("{installed}");
    let built: Vec<String> = std::fs::read_dir(project.join("build"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    let variants: Vec<String> =
        serde_json::from_str(&runner.action_output(&action, "variants")).unwrap();
    assert_eq!(variants, built);
    let revision = runner.action_output(&action, "revision");
    assert!(
        revision.len() == 40 && revision.chars().all(|c| c.is_ascii_hexdigit()),
        "revision {revision:?}"
    );
    assert!(
        runner
            .action_output(&action, "url")
            .ends_with("kbuild-test/act")
    );
    // The Hub's `v1` branch is at the revision the action reported.
    let (status, body) = hub.request("GET", "/api/kernels/kbuild-test/act/revision/v1", b"");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(&revision), "v1 is not at {revision}: {body}");
    assert_eq!(
        hub.published_init_scale("kbuild-test/act", "torch.ones(3)", 4.0),
        "[4.0, 4.0, 4.0]"
    );
}

#[test]
fn the_action_without_a_publish_repo_builds_and_checks_only() {
    let CpuProject {
        _tmp,
        action,
        mut runner,
        ..
    } = cpu_project(&[]);
    assert!(runner.run_all(&action, &plain_path(&[])), "{}", runner.log);
    assert!(runner.skipped.iter().any(|s| s.starts_with("Publish (if:")));
    assert_eq!(runner.action_output(&action, "revision"), "");
}

#[test]
fn the_action_names_a_missing_wheel_and_stops() {
    let tmp = tempfile::tempdir().unwrap();
    let action = action();
    let mut runner = Runner::new(&action, &[("wheel", "/nonexistent/kbuild.whl")], tmp.path());
    assert!(!runner.run_all(&action, &plain_path(&[])));
    assert!(
        runner
            .log
            .contains("::error::wheel input: /nonexistent/kbuild.whl is not a file"),
        "{}",
        runner.log
    );
}

/// The README's workflow example: every `with:` of its kbuild step is an input of action.yml, and
/// the version it pins is this one.
#[test]
fn the_readme_workflow_passes_only_inputs_the_action_has() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let block = readme
        .split("```yaml\n")
        .nth(1)
        .and_then(|rest| rest.split("\n```").next())
        .expect("a ```yaml block in README.md");
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("workflow.yml");
    std::fs::write(&file, block).unwrap();
    let workflow = yaml(&file);
    let inputs = action()["inputs"].as_object().unwrap().clone();
    let mut seen = 0;
    for job in workflow["jobs"].as_object().unwrap().values() {
        for step in job["steps"].as_array().unwrap() {
            let Some(uses) = step["uses"].as_str() else {
                continue;
            };
            if !uses.contains("/kbuild@") {
                continue;
            }
            seen += 1;
            assert!(
                uses.ends_with(&format!("@v{}", env!("CARGO_PKG_VERSION"))),
                "{uses}"
            );
            for key in step["with"].as_object().unwrap().keys() {
                assert!(
                    inputs.contains_key(key),
                    "README passes `{key}`, not an input of action.yml"
                );
            }
        }
    }
    assert_eq!(seen, 1, "one kbuild step in the README's workflow");
}
