//! `ConfigError` and the byte-span → `path:line:column` mapping every message goes through.

use std::cell::RefCell;
use std::ops::Range;
use std::path::{Path, PathBuf};

use super::location::Location;
use super::model::ConfigWarning;
use crate::hint::Hint;

/// A build.toml problem, located at `path:line:column` where the file could be read.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The project directory has no build.toml (or does not exist).
    #[error("no `build.toml` in `{}`", dir.display())]
    NotFound { dir: PathBuf },
    /// build.toml exists but could not be read.
    #[error("cannot read `{}`", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file is not a valid build.toml.
    #[error("{location}: {message}")]
    Invalid {
        location: Location,
        kind: ErrorKind,
        message: String,
        hint: Option<String>,
    },
}

/// What kind of mistake an `Invalid` error reports (for callers and tests that branch on it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Not TOML at all.
    Syntax,
    /// A table or key defined twice.
    Duplicate,
    UnknownKey,
    MissingKey,
    /// A value of the wrong TOML type (`src = "x.cu"` instead of a list).
    WrongType,
    /// A value of the right type that is not allowed (`backend = "cuda2"`, `version = 0`).
    InvalidValue,
    /// `[general] edition` names an edition kbuild does not read.
    Edition,
    /// A path that is missing, absolute, or outside the project.
    Path,
    /// Two parts of the file that contradict each other.
    Conflict,
}

impl ConfigError {
    /// The kind of an `Invalid` error.
    pub fn kind(&self) -> Option<ErrorKind> {
        match self {
            ConfigError::Invalid { kind, .. } => Some(*kind),
            _ => None,
        }
    }

    /// Where an `Invalid` error points.
    pub fn location(&self) -> Option<&Location> {
        match self {
            ConfigError::Invalid { location, .. } => Some(location),
            _ => None,
        }
    }
}

impl Hint for ConfigError {
    fn hint(&self) -> Option<String> {
        match self {
            ConfigError::NotFound { .. } => {
                Some("run kbuild in a kernel project, or pass -C <dir>".to_string())
            }
            ConfigError::Read { source, .. } => Some(match source.kind() {
                std::io::ErrorKind::InvalidData => "build.toml must be UTF-8 text".to_string(),
                std::io::ErrorKind::InvalidInput | std::io::ErrorKind::FileTooLarge => {
                    "build.toml must be a regular file (or a link to one) of at most 1 MiB"
                        .to_string()
                }
                _ => "check the file's permissions".to_string(),
            }),
            ConfigError::Invalid { hint, .. } => hint.clone(),
        }
    }
}

/// The text being read and the name it is shown under: turns spans into errors and collects
/// the warnings the readers give on the way.
pub(crate) struct Source<'s> {
    pub text: &'s str,
    pub file: PathBuf,
    warnings: RefCell<Vec<ConfigWarning>>,
}

impl<'s> Source<'s> {
    /// `file` is shown in messages as given, minus a leading `./`.
    pub fn new(text: &'s str, file: &Path) -> Self {
        let file = file.strip_prefix(".").unwrap_or(file).to_path_buf();
        Source {
            text,
            file,
            warnings: RefCell::new(Vec::new()),
        }
    }

    /// Record something HF's kernel-builder accepts but that is probably a mistake.
    pub fn warn(&self, span: &Range<usize>, message: String, hint: String) {
        self.warnings.borrow_mut().push(ConfigWarning {
            location: self.location(span.start),
            message,
            hint: Some(hint),
        });
    }

    /// The warnings recorded so far, in the order they were given.
    pub fn take_warnings(&self) -> Vec<ConfigWarning> {
        self.warnings.take()
    }

    /// 1-based line and character column of a byte offset.
    pub fn location(&self, offset: usize) -> Location {
        let offset = floor_char_boundary(self.text, offset.min(self.text.len()));
        let before = &self.text[..offset];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before[line_start..].chars().count() + 1;
        Location {
            file: self.file.clone(),
            line,
            column,
        }
    }

    /// An `Invalid` error at the start of `span`.
    pub fn error(
        &self,
        span: &Range<usize>,
        kind: ErrorKind,
        message: impl Into<String>,
        hint: impl Into<Option<String>>,
    ) -> ConfigError {
        ConfigError::Invalid {
            location: self.location(span.start),
            kind,
            message: message.into(),
            hint: hint.into(),
        }
    }

    /// The source line holding `offset`, without its newline.
    pub fn line_at(&self, offset: usize) -> &'s str {
        let offset = floor_char_boundary(self.text, offset.min(self.text.len()));
        let start = self.text[..offset].rfind('\n').map_or(0, |i| i + 1);
        let end = self.text[offset..]
            .find('\n')
            .map_or(self.text.len(), |i| offset + i);
        self.text[start..end].trim_end_matches('\r')
    }

    /// Convert a TOML parse error into a located error with a hint.
    pub fn syntax_error(&self, err: &toml::de::Error) -> ConfigError {
        let span = err.span().unwrap_or(0..0);
        let message = err.message().trim().replace('\n', "; ");
        if message.starts_with("duplicate key") {
            return self.duplicate_error(&span);
        }
        self.error(
            &span,
            ErrorKind::Syntax,
            format!("invalid TOML: {message}"),
            "fix the syntax at this position (TOML reference: https://toml.io/en/v1.0.0)"
                .to_string(),
        )
    }

    /// TOML rejects a table or key defined twice; say which one and where it first was.
    fn duplicate_error(&self, span: &Range<usize>) -> ConfigError {
        let line = self.line_at(span.start).trim();
        if let Some(header) = table_header(line) {
            let first = self.text[..span.start]
                .lines()
                .position(|l| table_header(l.trim()) == Some(header.clone()))
                .map(|i| format!(" (first defined on line {})", i + 1))
                .unwrap_or_default();
            let hint = if header.starts_with("kernel.") {
                "each kernel name may appear once: rename one of the kernels or merge the two tables"
            } else {
                "merge the two tables into one"
            };
            return self.error(
                span,
                ErrorKind::Duplicate,
                format!("duplicate table `[{header}]`{first}"),
                hint.to_string(),
            );
        }
        let key = self
            .text
            .get(span.clone())
            .filter(|k| !k.is_empty())
            .unwrap_or("key");
        self.error(
            span,
            ErrorKind::Duplicate,
            format!("duplicate key `{key}`"),
            "a key may be set once per table: remove one of the definitions".to_string(),
        )
    }
}

/// `[a.b]` (or `[ a . "b" ]`) → `a.b`, for comparing headers; `None` for other lines.
fn table_header(line: &str) -> Option<String> {
    let line = line.split('#').next().unwrap_or("").trim();
    let inner = line.strip_prefix('[')?.strip_suffix(']')?;
    if inner.starts_with('[') {
        return None;
    }
    let parts: Vec<String> = inner
        .split('.')
        .map(|p| p.trim().trim_matches('"').trim_matches('\'').to_string())
        .collect();
    Some(parts.join("."))
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn location_counts_lines_and_characters_from_one() {
        let src = Source::new("a = 1\nbé = \"x\"\n", Path::new("./build.toml"));
        let loc = src.location(src.text.find('=').unwrap());
        assert_eq!((loc.line, loc.column), (1, 3));
        let loc = src.location(src.text.rfind('=').unwrap());
        assert_eq!((loc.line, loc.column), (2, 4));
        assert_eq!(loc.to_string(), "build.toml:2:4");
    }

    #[test]
    fn table_header_normalises_quotes_and_spaces() {
        assert_eq!(table_header("[ kernel . \"a\" ]"), Some("kernel.a".into()));
        assert_eq!(table_header("[kernel.a] # c"), Some("kernel.a".into()));
        assert_eq!(table_header("[[array]]"), None);
        assert_eq!(table_header("a = [1]"), None);
    }
}
