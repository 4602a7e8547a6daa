//! The one output seam: progress bars, quiet/verbose and `--json` all go through a `Reporter`;
//! a command's result goes to stdout through [`stdout`].

use std::io::Write as _;
use std::sync::Mutex;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

/// Exit status when stdout's reader went away (`| head -0`): what a shell reports for a
/// process that a closed pipe stopped (128 + SIGPIPE), without a message.
pub const CLOSED_STDOUT_EXIT: u8 = 141;

/// Write a command's result to stdout: the only place kbuild writes there. A closed reader
/// (`EPIPE`) or a full disk (`ENOSPC`) comes back as an error, never a panic; see
/// [`is_closed_stdout`] for how the caller tells them apart.
pub fn stdout(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// The reader of stdout is gone: the output is unwanted, not failed.
pub fn is_closed_stdout(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::BrokenPipe
}

/// Whether kbuild's stderr gets colour: `NO_COLOR` turns it off, `CLICOLOR_FORCE` (not `0`) on,
/// else a terminal that is not `dumb` has it. Asked once; compilers are told the same
/// (`-fdiagnostics-color=always`), as their stderr is a pipe to kbuild.
pub fn stderr_color() -> bool {
    static COLOR: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *COLOR.get_or_init(|| {
        let set = |name: &str| crate::env::var_os(name).filter(|v| !v.is_empty());
        if set("NO_COLOR").is_some() {
            return false;
        }
        if set("CLICOLOR_FORCE").is_some_and(|v| v != "0") {
            return true;
        }
        use std::io::IsTerminal as _;
        std::io::stderr().is_terminal() && crate::env::var("TERM").map_or(true, |t| t != "dumb")
    })
}

/// `text` without ANSI escape sequences (colour codes a compiler wrote).
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\x1b' {
            out.push(c);
            continue;
        }
        // CSI: ESC [ parameters… final byte in `@`..=`~`; any other escape drops one character.
        if chars.next_if_eq(&'[').is_some() {
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
        } else {
            chars.next();
        }
    }
    out
}

/// One diagnostic a compiler printed, with its place: what `--json` reports of a failed compile.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Diagnostic {
    pub file: String,
    pub line: u32,
    /// gcc gives one; nvcc's front end (`file(line): error: …`) does not.
    pub column: Option<u32>,
    /// `error`, `warning`, `note` or `fatal error`.
    pub severity: String,
    pub message: String,
}

/// The diagnostics with a place in `output`: gcc's `file:line:column: error: message` and
/// nvcc's `file(line): error: message` (`error #20-D:` too); other lines (source excerpts,
/// carets, `In file included from`) are context, not diagnostics.
pub fn parse_diagnostics(output: &str) -> Vec<Diagnostic> {
    strip_ansi(output)
        .lines()
        .filter_map(|line| gcc_diagnostic(line).or_else(|| nvcc_diagnostic(line)))
        .collect()
}

const SEVERITIES: [&str; 5] = [
    "fatal error",
    "error",
    "warning",
    "note",
    "catastrophic error",
];

/// `severity: message` (nvcc may add ` #20-D` to the severity).
fn severity_and_message(rest: &str) -> Option<(String, String)> {
    let rest = rest.trim_start();
    SEVERITIES.iter().find_map(|s| {
        let after = rest.strip_prefix(s)?;
        let after = match after.strip_prefix(" #") {
            Some(numbered) => numbered.split_once(':').map(|(_, m)| m)?,
            None => after.strip_prefix(':')?,
        };
        Some((s.to_string(), after.trim().to_string()))
    })
}

/// `file:line:column: severity: message` or `file:line: severity: message`.
fn gcc_diagnostic(line: &str) -> Option<Diagnostic> {
    let mut parts = line.splitn(4, ':');
    let file = parts.next()?.to_string();
    let number = parts.next()?.parse().ok()?;
    let third = parts.next()?;
    let (column, rest) = match third.parse() {
        Ok(column) => (Some(column), parts.next()?.to_string()),
        Err(_) => (None, format!("{third}:{}", parts.next().unwrap_or(""))),
    };
    let (severity, message) = severity_and_message(&rest)?;
    (!file.is_empty()).then_some(Diagnostic {
        file,
        line: number,
        column,
        severity,
        message,
    })
}

/// `file(line): severity: message`.
fn nvcc_diagnostic(line: &str) -> Option<Diagnostic> {
    let (place, rest) = line.split_once("): ")?;
    let (file, number) = place.rsplit_once('(')?;
    let (severity, message) = severity_and_message(rest)?;
    (!file.is_empty()).then_some(Diagnostic {
        file: file.to_string(),
        line: number.parse().ok()?,
        column: None,
        severity,
        message,
    })
}

/// How a compile unit ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnitOutcome {
    /// The compiler ran and succeeded.
    Compiled,
    /// The object came from the cache; no compiler ran.
    Cached,
    /// The compiler failed (its diagnostics are in the error).
    Failed,
}

/// Receives what the pipeline does. Libraries report; the printer decides what is shown.
pub trait Reporter: Sync {
    /// A pipeline stage begins (`Compiling`, `Linking`, `Packaging`, `Uploading`).
    fn stage(&self, name: &str, detail: &str);
    /// `total` work units are about to run (compile jobs, files to upload).
    fn begin_units(&self, total: usize);
    fn unit_started(&self, label: &str);
    fn unit_finished(&self, label: &str, outcome: UnitOutcome, elapsed: Duration);
    /// Something already up to date that this run did not touch (a cached unit, a variant in
    /// place): shown only with `-v`, as cargo shows `Fresh` only with `-v`.
    fn fresh(&self, what: &str);
    /// Byte progress for transfers: `begin_bytes` (`Uploading`, `Downloading`: what the bar
    /// says) then repeated `add_bytes`.
    fn begin_bytes(&self, verb: &str, label: &str, total: u64);
    fn add_bytes(&self, n: u64);
    fn warn(&self, msg: &str);
    fn info(&self, msg: &str);
    /// Detail shown only with `-v` (commands run, cache decisions).
    fn verbose(&self, msg: &str);
}

/// Verbosity chosen on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Verbosity {
    Quiet,
    #[default]
    Normal,
    Verbose,
}

/// Human output on stderr with indicatif progress bars; silent except warnings when quiet.
/// With `json`, nothing but warnings goes to stderr: stdout is left for the command's JSON.
pub struct Printer {
    verbosity: Verbosity,
    json: bool,
    multi: MultiProgress,
    bar: Mutex<Option<ProgressBar>>,
    /// The units running now, oldest first: the progress line names the newest of them.
    running: Mutex<Vec<String>>,
}

impl Printer {
    pub fn new(verbosity: Verbosity, json: bool) -> Self {
        let multi = MultiProgress::new();
        if verbosity == Verbosity::Quiet || json {
            multi.set_draw_target(indicatif::ProgressDrawTarget::hidden());
        }
        Printer {
            verbosity,
            json,
            multi,
            bar: Mutex::new(None),
            running: Mutex::new(Vec::new()),
        }
    }

    fn chatty(&self) -> bool {
        self.verbosity != Verbosity::Quiet && !self.json
    }

    fn line(&self, text: String) {
        // The bar is cleared, the line written as a line of its own, and the bar drawn again
        // below it. `MultiProgress::println` would pad the line to the terminal's width with
        // no newline: a log taken with `script` would be one long line.
        self.multi.suspend(|| eprintln!("{text}"));
    }

    /// The progress line names a unit still running (the newest), never one that finished.
    /// The list stays locked while the bar is told, so two workers cannot set it out of order.
    fn show_running(&self, update: impl FnOnce(&mut Vec<String>)) {
        if let Ok(mut running) = self.running.lock() {
            update(&mut running);
            let newest = running.last().cloned().unwrap_or_default();
            self.with_bar(|b| b.set_message(newest));
        }
    }

    fn with_bar(&self, f: impl FnOnce(&ProgressBar)) {
        if let Ok(guard) = self.bar.lock()
            && let Some(bar) = guard.as_ref()
        {
            f(bar);
        }
    }

    fn replace_bar(&self, bar: ProgressBar) {
        if let Ok(mut guard) = self.bar.lock() {
            if let Some(old) = guard.take() {
                old.finish_and_clear();
            }
            *guard = Some(bar);
        }
    }

    /// Clear any progress bar (call before printing a final summary).
    pub fn finish(&self) {
        if let Ok(mut guard) = self.bar.lock()
            && let Some(old) = guard.take()
        {
            old.finish_and_clear();
        }
    }
}

impl Reporter for Printer {
    fn stage(&self, name: &str, detail: &str) {
        if self.chatty() {
            self.line(format!("{name:>12} {detail}"));
        }
    }

    fn begin_units(&self, total: usize) {
        let bar = self.multi.add(ProgressBar::new(total as u64));
        bar.set_style(
            ProgressStyle::with_template(
                "{prefix:>12.cyan.bold} [{bar:25}] {pos}/{len} {wide_msg}",
            )
            .expect("static template is valid")
            .progress_chars("=> "),
        );
        bar.set_prefix("Building");
        bar.enable_steady_tick(Duration::from_millis(200));
        self.replace_bar(bar);
        if let Ok(mut running) = self.running.lock() {
            running.clear();
        }
    }

    fn unit_started(&self, label: &str) {
        self.verbose(&format!("start {label}"));
        self.show_running(|running| running.push(label.to_string()));
    }

    fn unit_finished(&self, label: &str, outcome: UnitOutcome, elapsed: Duration) {
        self.show_running(|running| running.retain(|l| l != label));
        let seconds = elapsed.as_secs_f64();
        match outcome {
            UnitOutcome::Cached => self.fresh(label),
            UnitOutcome::Compiled if self.chatty() => {
                self.line(format!("{:>12} {label} ({seconds:.1}s)", "Compiled"));
            }
            UnitOutcome::Failed if self.chatty() => {
                self.line(format!("{:>12} {label} ({seconds:.1}s)", "Failed"));
            }
            _ => {}
        }
        self.with_bar(|b| b.inc(1));
    }

    fn fresh(&self, what: &str) {
        if self.verbosity == Verbosity::Verbose && !self.json {
            self.line(format!("{:>12} {what}", "Fresh"));
        }
    }

    fn begin_bytes(&self, verb: &str, label: &str, total: u64) {
        let bar = self.multi.add(ProgressBar::new(total));
        bar.set_style(
            ProgressStyle::with_template(
                "{prefix:>12.cyan.bold} [{bar:25}] {bytes}/{total_bytes} {wide_msg}",
            )
            .expect("static template is valid")
            .progress_chars("=> "),
        );
        bar.set_prefix(verb.to_string());
        bar.set_message(label.to_string());
        self.replace_bar(bar);
    }

    fn add_bytes(&self, n: u64) {
        self.with_bar(|b| b.inc(n));
    }

    fn warn(&self, msg: &str) {
        if self.verbosity != Verbosity::Quiet || self.json {
            self.line(format!("warning: {msg}"));
        }
    }

    fn info(&self, msg: &str) {
        if self.chatty() {
            self.line(msg.to_string());
        }
    }

    fn verbose(&self, msg: &str) {
        if self.verbosity == Verbosity::Verbose && !self.json {
            self.line(format!("{:>12} {msg}", "Verbose"));
        }
    }
}

/// A reporter that records events, for tests.
#[derive(Default)]
pub struct Recorder {
    pub events: Mutex<Vec<String>>,
}

impl Recorder {
    pub fn take(&self) -> Vec<String> {
        self.events
            .lock()
            .map(|mut e| std::mem::take(&mut *e))
            .unwrap_or_default()
    }
    fn push(&self, s: String) {
        if let Ok(mut e) = self.events.lock() {
            e.push(s);
        }
    }
}

impl Reporter for Recorder {
    fn stage(&self, name: &str, detail: &str) {
        self.push(format!("stage {name} {detail}"));
    }
    fn begin_units(&self, total: usize) {
        self.push(format!("begin {total}"));
    }
    fn unit_started(&self, label: &str) {
        self.push(format!("start {label}"));
    }
    fn unit_finished(&self, label: &str, outcome: UnitOutcome, _elapsed: Duration) {
        self.push(format!("{outcome:?} {label}"));
    }
    fn fresh(&self, what: &str) {
        self.push(format!("fresh {what}"));
    }
    fn begin_bytes(&self, verb: &str, label: &str, total: u64) {
        self.push(format!("bytes {verb} {label} {total}"));
    }
    fn add_bytes(&self, n: u64) {
        self.push(format!("add {n}"));
    }
    fn warn(&self, msg: &str) {
        self.push(format!("warn {msg}"));
    }
    fn info(&self, msg: &str) {
        self.push(format!("info {msg}"));
    }
    fn verbose(&self, msg: &str) {
        self.push(format!("verbose {msg}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gcc_and_nvcc_diagnostics_are_parsed_with_their_place_and_context_is_not() {
        let output = "In file included from k.cpp:2:\n\
            \x1b[01m\x1b[Kinc/a.h:3:7:\x1b[m\x1b[K \x1b[01;31m\x1b[Kerror: \x1b[m\x1b[Kexpected ';'\n\
                3 | int x\n\
            k.cpp: In function 'int f()':\n\
            k.cpp:9: warning: unused\n\
            csrc/k.cu(12): error: identifier \"y\" is undefined\n\
            csrc/k.cu(14): warning #177-D: variable \"z\" was declared but never referenced\n\
            1 error detected in the compilation of \"csrc/k.cu\".\n";
        let got = parse_diagnostics(output);
        let shown: Vec<String> = got
            .iter()
            .map(|d| {
                format!(
                    "{}:{}:{:?} {}: {}",
                    d.file, d.line, d.column, d.severity, d.message
                )
            })
            .collect();
        assert_eq!(
            shown,
            [
                "inc/a.h:3:Some(7) error: expected ';'",
                "k.cpp:9:None warning: unused",
                "csrc/k.cu:12:None error: identifier \"y\" is undefined",
                "csrc/k.cu:14:None warning: variable \"z\" was declared but never referenced",
            ]
        );
    }

    #[test]
    fn ansi_escapes_are_stripped() {
        assert_eq!(
            strip_ansi("\x1b[01;31m\x1b[Kerror:\x1b[m rest"),
            "error: rest"
        );
    }
}
