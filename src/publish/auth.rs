//! Where the token comes from, and the guarantee that it never appears in what kbuild prints.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt as _;
use std::path::PathBuf;

/// A Hub token. `Debug` and `Display` never show it.
#[derive(Clone)]
pub struct Token(String);

impl Token {
    /// The secret, for building the client only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(***)")
    }
}

/// Where a token was found, for messages (never the token itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenSource {
    Env,
    File(PathBuf),
}

impl std::fmt::Display for TokenSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenSource::Env => f.write_str("`HF_TOKEN`"),
            TokenSource::File(p) => write!(f, "`{}`", p.display()),
        }
    }
}

/// What makes a token unusable; never shows the token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenProblem {
    /// Not valid UTF-8.
    NotUtf8,
    /// A control character (tab, escape, a stray `\r`) at this character position (1-based).
    Control(usize),
    /// A space inside the token.
    Space(usize),
    /// A non-ASCII character (a typographic quote, a non-breaking space) at this position.
    NonAscii(usize),
}

impl std::fmt::Display for TokenProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenProblem::NotUtf8 => f.write_str("it is not valid UTF-8"),
            TokenProblem::Control(at) => write!(f, "it holds a control character at position {at}"),
            TokenProblem::Space(at) => write!(f, "it holds a space at position {at}"),
            TokenProblem::NonAscii(at) => {
                write!(f, "it holds a non-ASCII character at position {at}")
            }
        }
    }
}

/// A token goes into an HTTP header: printable ASCII only. Surrounding whitespace (the newline
/// of a token file) is dropped first; an empty result is no token.
fn check_token(raw: &[u8]) -> Result<Option<Token>, TokenProblem> {
    let text = std::str::from_utf8(raw).map_err(|_| TokenProblem::NotUtf8)?;
    let text = text.trim();
    for (i, c) in text.chars().enumerate() {
        if c.is_control() {
            return Err(TokenProblem::Control(i + 1));
        }
        if c == ' ' {
            return Err(TokenProblem::Space(i + 1));
        }
        if !c.is_ascii() {
            return Err(TokenProblem::NonAscii(i + 1));
        }
    }
    Ok((!text.is_empty()).then(|| Token(text.to_string())))
}

/// `HF_TOKEN`, then `HF_TOKEN_PATH`, then `$HF_HOME/token` (huggingface_hub's order; `HF_HOME`
/// defaults to `$XDG_CACHE_HOME/huggingface`, then `~/.cache/huggingface`). The first token
/// found must be one an HTTP header can carry; a broken one is an error, not "no token".
pub fn resolve_token(
    env: impl Fn(&str) -> Option<OsString>,
) -> Result<Option<(Token, TokenSource)>, (TokenSource, TokenProblem)> {
    if let Some(raw) = env("HF_TOKEN")
        && let Some(t) = check_token(raw.as_bytes()).map_err(|p| (TokenSource::Env, p))?
    {
        return Ok(Some((t, TokenSource::Env)));
    }
    let home = env("HF_HOME")
        .map(PathBuf::from)
        .or_else(|| env("XDG_CACHE_HOME").map(|x| PathBuf::from(x).join("huggingface")))
        .or_else(|| env("HOME").map(|h| PathBuf::from(h).join(".cache/huggingface")));
    let candidates = [
        env("HF_TOKEN_PATH").map(PathBuf::from),
        home.map(|h| h.join("token")),
    ];
    for path in candidates.into_iter().flatten() {
        let Ok(raw) = std::fs::read(&path) else {
            continue;
        };
        match check_token(&raw) {
            Ok(Some(t)) => return Ok(Some((t, TokenSource::File(path)))),
            Ok(None) => continue,
            Err(p) => return Err((TokenSource::File(path), p)),
        }
    }
    Ok(None)
}

/// Removes secrets from text that is about to be shown: the token, and the password of an
/// endpoint URL (`https://user:pass@host`) as written and as percent-decoded.
#[derive(Clone, Default)]
pub struct Redactor {
    secrets: Vec<String>,
}

impl Redactor {
    pub fn new(token: Option<&Token>) -> Self {
        Redactor {
            // A very short "token" would redact ordinary words; real tokens are long.
            secrets: token
                .map(|t| t.0.clone())
                .filter(|t| t.len() >= 4)
                .into_iter()
                .collect(),
        }
    }

    /// Also hide the password that `endpoint` carries, if any.
    pub fn with_endpoint(mut self, endpoint: &str) -> Self {
        if let Ok(url) = reqwest::Url::parse(endpoint)
            && let Some(password) = url.password().filter(|p| !p.is_empty())
        {
            let decoded = percent_decode(password);
            self.secrets.push(password.to_string());
            if decoded != password {
                self.secrets.push(decoded);
            }
        }
        // Longest first, so that a secret holding another is replaced whole.
        self.secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        self
    }

    /// `text` with every secret, and the login of every URL in it ([`crate::redact::urls_in`]),
    /// written as `***`.
    pub fn redact(&self, text: &str) -> String {
        self.secrets
            .iter()
            .fold(crate::redact::urls_in(text), |text, s| {
                text.replace(s.as_str(), "***")
            })
    }
}

/// `%41` as `A`; anything that does not decode to UTF-8 is kept as written.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).unwrap_or_else(|_| text.to_string())
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Redactor")
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::ffi::OsStringExt as _;

    use super::*;

    #[test]
    fn env_token_wins_over_the_token_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("token"), "hf_file\n").unwrap();
        let home = dir.path().to_string_lossy().into_owned();
        let env = |k: &str| match k {
            "HF_TOKEN" => Some("hf_env".into()),
            "HF_HOME" => Some(home.clone().into()),
            _ => None,
        };
        let (token, source) = resolve_token(env).unwrap().unwrap();
        assert_eq!(token.expose(), "hf_env");
        assert_eq!(source, TokenSource::Env);
    }

    #[test]
    fn token_file_under_hf_home_is_used_without_hf_token() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("token"), "hf_file\n").unwrap();
        let home = dir.path().to_string_lossy().into_owned();
        let env = |k: &str| (k == "HF_HOME").then(|| home.clone().into());
        let (token, source) = resolve_token(env).unwrap().unwrap();
        assert_eq!(token.expose(), "hf_file");
        assert_eq!(source, TokenSource::File(dir.path().join("token")));
    }

    #[test]
    fn no_token_anywhere_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().to_string_lossy().into_owned();
        assert!(
            resolve_token(|k| (k == "HF_HOME").then(|| home.clone().into()))
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn debug_and_redaction_hide_the_token() {
        let token = Token("hf_secret_value".into());
        assert_eq!(format!("{token:?}"), "Token(***)");
        let r = Redactor::new(Some(&token));
        assert_eq!(
            r.redact("Bearer hf_secret_value failed"),
            "Bearer *** failed"
        );
    }

    #[test]
    fn endpoint_passwords_are_redacted_as_written_and_decoded() {
        let r = Redactor::new(None).with_endpoint("https://robot:p%40ss@hub.example");
        assert_eq!(
            r.redact("GET https://robot:p%40ss@hub.example/api failed; password p@ss"),
            "GET https://***@hub.example/api failed; password ***"
        );
        let plain = Redactor::new(None).with_endpoint("https://hub.example");
        assert_eq!(plain.redact("robot:x@h"), "robot:x@h");
    }

    #[test]
    fn tokens_a_header_cannot_carry_are_refused_with_the_reason() {
        let env_with = |raw: &'static [u8]| {
            move |k: &str| (k == "HF_TOKEN").then(|| OsString::from_vec(raw.to_vec()))
        };
        let problem = |raw: &'static [u8]| resolve_token(env_with(raw)).unwrap_err();
        assert_eq!(
            problem(b"hf_ab\x1bcd"),
            (TokenSource::Env, TokenProblem::Control(6))
        );
        assert_eq!(
            problem(b"hf_ab cd"),
            (TokenSource::Env, TokenProblem::Space(6))
        );
        assert_eq!(
            problem("hf_\u{201c}abc".as_bytes()),
            (TokenSource::Env, TokenProblem::NonAscii(4))
        );
        assert_eq!(
            problem(b"hf_\xff\xfe"),
            (TokenSource::Env, TokenProblem::NotUtf8)
        );
        let (token, _) = resolve_token(env_with(b"  hf_ok\n")).unwrap().unwrap();
        assert_eq!(token.expose(), "hf_ok");
    }

    #[test]
    fn a_broken_token_file_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("token"), "hf_\tx\n").unwrap();
        let home = dir.path().to_string_lossy().into_owned();
        let err = resolve_token(|k| (k == "HF_HOME").then(|| home.clone().into())).unwrap_err();
        assert_eq!(
            err,
            (
                TokenSource::File(dir.path().join("token")),
                TokenProblem::Control(4)
            )
        );
    }
}
