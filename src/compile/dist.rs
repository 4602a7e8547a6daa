//! Distributed compilation on sccache-dist (`KBUILD_DIST=sccache`): asked once per build
//! whether its scheduler has build servers, every unit then runs under sccache, which ships
//! C++ units whole and splits a CUDA unit's nvcc into its steps, sending cudafe++, cicc, ptxas
//! and the host compile to the servers (preprocessing and fatbinary stay here); more units run
//! at once than this machine has cores. A scheduler that is down or has no servers is said
//! once, and the build compiles locally.

use std::path::{Path, PathBuf};

use crate::process::{Cancel, CommandSpec, run_measured};
use crate::report::Reporter;

/// What sccache's client says about its scheduler (`sccache --dist-status`).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum DistStatus {
    /// Connected, with this many build servers and cores among them.
    Ready { servers: u64, cpus: u64 },
    /// Not usable: why, in sccache's words or ours.
    Unavailable(String),
}

/// Ask `sccache` (its client server starts if it is not running) about the scheduler.
pub(crate) fn probe(sccache: &Path) -> DistStatus {
    let mut spec = CommandSpec::new(sccache);
    spec.arg("--dist-status");
    match run_measured(&spec, &Cancel::new()) {
        Ok(m) => parse_status(&String::from_utf8_lossy(&m.output.stdout)),
        Err(e) => DistStatus::Unavailable(format!("`{spec}` failed: {e}")),
    }
}

/// Read sccache's JSON answer: `{"SchedulerStatus":[url,{"num_servers":2,"num_cpus":4,…}]}`
/// when connected, `{"NotConnected":[url,why]}` or `{"Disabled":why}` when not.
pub(crate) fn parse_status(json: &str) -> DistStatus {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(json) else {
        return DistStatus::Unavailable(format!("unexpected answer `{}`", json.trim()));
    };
    if let Some(status) = value.get("SchedulerStatus").and_then(|s| s.get(1)) {
        let count = |k: &str| {
            status
                .get(k)
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(0)
        };
        let (servers, cpus) = (count("num_servers"), count("num_cpus"));
        if servers == 0 {
            return DistStatus::Unavailable("the scheduler has no build servers".into());
        }
        return DistStatus::Ready { servers, cpus };
    }
    let why = match value.as_object().and_then(|o| o.iter().next()) {
        Some((state, detail)) => match detail.as_array() {
            Some(parts) => format!(
                "{state}: {}",
                parts
                    .iter()
                    .map(|p| p.as_str().map_or(p.to_string(), str::to_string))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None => format!("{state}: {}", detail.as_str().unwrap_or_default()),
        },
        None => format!("unexpected answer `{}`", json.trim()),
    };
    DistStatus::Unavailable(why)
}

/// sccache-dist's build servers, ready for this build.
pub(crate) struct Dist {
    /// The launcher for C++ units.
    pub sccache: PathBuf,
    pub servers: u64,
    /// Cores among the servers: how many more units may run at once.
    pub cpus: usize,
}

/// The servers to compile on, or `None` (said once) when the build compiles locally.
pub(crate) fn connect(sccache: &Path, reporter: &dyn Reporter) -> Option<Dist> {
    match probe(sccache) {
        DistStatus::Ready { servers, cpus } => Some(Dist {
            sccache: sccache.to_path_buf(),
            servers,
            cpus: cpus as usize,
        }),
        DistStatus::Unavailable(why) => {
            reporter.warn(&format!(
                "sccache-dist is not available ({why}); compiling locally (CUDA units with \
                 one nvcc each, as planned for sccache)\n\
                 hint: start the scheduler and build servers named in sccache's config \
                 (`SCCACHE_CONF`), or unset `KBUILD_DIST`"
            ));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{DistStatus, parse_status};

    #[test]
    fn dist_status_answers_of_sccache_are_read() {
        let ready = r#"{"SchedulerStatus":["http://127.0.0.1:10600/",{"num_servers":2,"num_cpus":4,"in_progress":0}]}"#;
        assert_eq!(
            parse_status(ready),
            DistStatus::Ready {
                servers: 2,
                cpus: 4
            }
        );
        let down = r#"{"NotConnected":["http://127.0.0.1:10699/","enabled, not connected, will retry in 30.0s"]}"#;
        assert_eq!(
            parse_status(down),
            DistStatus::Unavailable(
                "NotConnected: http://127.0.0.1:10699/, enabled, not connected, will retry in \
                 30.0s"
                    .into()
            )
        );
        let none = r#"{"SchedulerStatus":["http://x/",{"num_servers":0,"num_cpus":0}]}"#;
        assert!(matches!(parse_status(none), DistStatus::Unavailable(w) if w.contains("no build")));
        assert!(matches!(parse_status(r#"{"Disabled":"disabled"}"#),
            DistStatus::Unavailable(w) if w == "Disabled: disabled"));
    }
}
