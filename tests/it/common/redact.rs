//! Stable snapshots of kbuild's output: the parts that differ between machines and runs (temp
//! paths, the test Python's paths, timings, hashes) become `[placeholders]`.

use std::path::Path;
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::Value;

/// Text replacements, applied longest first so a path is replaced before a prefix of it.
#[derive(Clone, Default)]
pub struct Redact {
    pairs: Vec<(String, String)>,
    /// Durations (`0.8s`, `(12.0s)`) become `[time]`.
    timings: bool,
}

/// The test Python's executable, site-packages and C headers, as kbuild prints them.
fn python_paths() -> &'static [(String, String)] {
    static PATHS: OnceLock<Vec<(String, String)>> = OnceLock::new();
    PATHS.get_or_init(|| {
        let python = super::kbuild::python();
        let out = Command::new(&python)
            .args([
                "-c",
                "import sysconfig; p = sysconfig.get_paths(); print(p['purelib']); print(p['include'])",
            ])
            .output()
            .expect("python runs");
        let text = String::from_utf8(out.stdout).expect("UTF-8 paths");
        let mut lines = text.lines();
        let site = lines.next().expect("purelib").to_string();
        let include = lines.next().expect("include").to_string();
        vec![
            (python.display().to_string(), "[python]".into()),
            (site, "[site-packages]".into()),
            (include, "[python-include]".into()),
        ]
    })
}

/// `text` with each word that is a number of seconds (`0.8s`, also in brackets) as `[time]`.
fn without_timings(text: &str) -> String {
    let word = |w: &str| {
        let core = w.trim_matches(|c: char| matches!(c, '(' | ')' | ',' | ';'));
        let seconds = core.strip_suffix('s').is_some_and(|n| {
            n.starts_with(|c: char| c.is_ascii_digit()) && n.parse::<f64>().is_ok()
        });
        match seconds {
            true => w.replace(core, "[time]"),
            false => w.to_string(),
        }
    };
    let lines = text
        .lines()
        .map(|line| line.split(' ').map(word).collect::<Vec<_>>().join(" "));
    let mut out = lines.collect::<Vec<_>>().join("\n");
    if text.ends_with('\n') {
        out.push('\n');
    }
    out
}

impl Redact {
    /// Nothing redacted yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Also the test Python's paths (`[python]`, `[site-packages]`, `[python-include]`).
    pub fn python(mut self) -> Self {
        self.pairs.extend(python_paths().iter().cloned());
        self
    }

    /// `path` (as given and canonical) becomes `name`.
    pub fn path(mut self, path: &Path, name: &str) -> Self {
        self.pairs.push((path.display().to_string(), name.into()));
        if let Ok(real) = path.canonicalize() {
            self.pairs.push((real.display().to_string(), name.into()));
        }
        self
    }

    /// The literal `from` becomes `to`.
    pub fn text_of(mut self, from: &str, to: &str) -> Self {
        if !from.is_empty() {
            self.pairs.push((from.into(), to.into()));
        }
        self
    }

    /// Also durations as kbuild prints them (`0.8s`, `(12.0s)`): `[time]`.
    pub fn timings(mut self) -> Self {
        self.timings = true;
        self
    }

    /// `s` with every replacement made.
    pub fn text(&self, s: &str) -> String {
        let mut pairs: Vec<&(String, String)> = self.pairs.iter().collect();
        pairs.sort_by_key(|(from, _)| std::cmp::Reverse(from.len()));
        let mut out = s.to_string();
        for (from, to) in pairs {
            out = out.replace(from.as_str(), to);
        }
        match self.timings {
            true => without_timings(&out),
            false => out,
        }
    }

    /// `out`'s stderr, redacted.
    pub fn stderr(&self, out: &Output) -> String {
        self.text(&String::from_utf8_lossy(&out.stderr))
    }

    /// `out`'s stdout, redacted.
    pub fn stdout(&self, out: &Output) -> String {
        self.text(&String::from_utf8_lossy(&out.stdout))
    }

    /// `value` with every string redacted, and the members named in `keys` (at any depth)
    /// replaced by `"[<key>]"` where they are not null.
    pub fn json(&self, value: &Value, keys: &[&str]) -> Value {
        match value {
            Value::String(s) => Value::String(self.text(s)),
            Value::Array(items) => Value::Array(items.iter().map(|v| self.json(v, keys)).collect()),
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| {
                        let v = if keys.contains(&k.as_str()) && !v.is_null() {
                            Value::String(format!("[{k}]"))
                        } else {
                            self.json(v, keys)
                        };
                        (k.clone(), v)
                    })
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    /// `out` as uv's snapshots show a command: its exit status, then stdout and stderr.
    pub fn output(&self, out: &Output) -> String {
        format!(
            "success: {}\nexit_code: {}\n----- stdout -----\n{}\n----- stderr -----\n{}",
            out.status.success(),
            out.status.code().map_or("none".into(), |c| c.to_string()),
            self.stdout(out),
            self.stderr(out)
        )
    }

    /// `out`'s stdout parsed as JSON, redacted as [`Redact::json`] does.
    pub fn stdout_json(&self, out: &Output, keys: &[&str]) -> Value {
        let value: Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
        self.json(&value, keys)
    }
}
