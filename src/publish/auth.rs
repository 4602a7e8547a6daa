//! Where the token comes from, and the guarantee that it never appears in what kbuild prints.

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

/// `HF_TOKEN`, then `HF_TOKEN_PATH`, then `$HF_HOME/token` (huggingface_hub's order; `HF_HOME`
/// defaults to `$XDG_CACHE_HOME/huggingface`, then `~/.cache/huggingface`).
pub fn resolve_token(env: impl Fn(&str) -> Option<String>) -> Option<(Token, TokenSource)> {
    if let Some(t) = env("HF_TOKEN").map(|t| t.trim().to_string())
        && !t.is_empty()
    {
        return Some((Token(t), TokenSource::Env));
    }
    let home = env("HF_HOME")
        .map(PathBuf::from)
        .or_else(|| env("XDG_CACHE_HOME").map(|x| PathBuf::from(x).join("huggingface")))
        .or_else(|| env("HOME").map(|h| PathBuf::from(h).join(".cache/huggingface")));
    let candidates = [
        env("HF_TOKEN_PATH").map(PathBuf::from),
        home.map(|h| h.join("token")),
    ];
    candidates.into_iter().flatten().find_map(|path| {
        let t = std::fs::read_to_string(&path).ok()?.trim().to_string();
        (!t.is_empty()).then_some((Token(t), TokenSource::File(path)))
    })
}

/// Removes a secret from text that is about to be shown.
#[derive(Clone, Default)]
pub struct Redactor {
    secret: Option<String>,
}

impl Redactor {
    pub fn new(token: Option<&Token>) -> Self {
        Redactor {
            // A very short "token" would redact ordinary words; real tokens are long.
            secret: token.map(|t| t.0.clone()).filter(|t| t.len() >= 4),
        }
    }

    pub fn redact(&self, text: &str) -> String {
        match &self.secret {
            Some(s) => text.replace(s.as_str(), "***"),
            None => text.to_string(),
        }
    }
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Redactor")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_token_wins_over_the_token_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("token"), "hf_file\n").unwrap();
        let home = dir.path().to_string_lossy().into_owned();
        let env = |k: &str| match k {
            "HF_TOKEN" => Some("hf_env".to_string()),
            "HF_HOME" => Some(home.clone()),
            _ => None,
        };
        let (token, source) = resolve_token(env).unwrap();
        assert_eq!(token.expose(), "hf_env");
        assert_eq!(source, TokenSource::Env);
    }

    #[test]
    fn token_file_under_hf_home_is_used_without_hf_token() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("token"), "hf_file\n").unwrap();
        let home = dir.path().to_string_lossy().into_owned();
        let env = |k: &str| (k == "HF_HOME").then(|| home.clone());
        let (token, source) = resolve_token(env).unwrap();
        assert_eq!(token.expose(), "hf_file");
        assert_eq!(source, TokenSource::File(dir.path().join("token")));
    }

    #[test]
    fn no_token_anywhere_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().to_string_lossy().into_owned();
        assert!(resolve_token(|k| (k == "HF_HOME").then(|| home.clone())).is_none());
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
}
