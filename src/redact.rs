//! Credentials never printed: every URL kbuild shows (the remote cache's
//! `KBUILD_REMOTE_CACHE`, the Hub's `HF_ENDPOINT`, one quoted in an error) goes through [`url`]
//! or [`urls_in`], which write its user and password as `***`.

/// `url` with its user and password replaced by `***` (`redis://alice:pw@h:6379/0` →
/// `redis://***@h:6379/0`). Everything between the scheme's `://` and the last `@` counts as
/// them, so a password holding an unencoded `/` or `@` is hidden whole; without a scheme, all
/// before the last `@`. Without `@` the URL is as given.
pub fn url(url: &str) -> String {
    let Some(at) = url.rfind('@') else {
        return url.to_string();
    };
    let scheme = url
        .find("://")
        .filter(|&end| end < at && is_scheme(&url[..end]));
    let start = scheme.map_or(0, |end| end + 3);
    format!("{}***{}", &url[..start], &url[at..])
}

/// `redis`, `https`: a letter, then letters, digits, `+`, `-` or `.`.
fn is_scheme(text: &str) -> bool {
    let mut chars = text.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
}

/// `text` with the user and password of every URL in it (`scheme://user:pass@host…`, up to the
/// next space, quote or backtick) written as `***`: an error message that quotes a URL.
pub fn urls_in(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(found) = rest.find("://") {
        let start = found + 3;
        let after = &rest[start..];
        let end = after
            .find(|c: char| c.is_whitespace() || "`'\"<>()[]{}".contains(c))
            .unwrap_or(after.len());
        let word = &after[..end];
        // The authority ends at the first `/`, `?` or `#`; an `@` after it is part of a path.
        let authority = word.find(['/', '?', '#']).map_or(word, |i| &word[..i]);
        out.push_str(&rest[..start]);
        match authority.rfind('@') {
            Some(at) => {
                out.push_str("***");
                out.push_str(&word[at..]);
            }
            None => out.push_str(word),
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_keeps_its_scheme_host_port_and_path_and_hides_the_login() {
        assert_eq!(
            url("redis://:hunter2PW@127.0.0.1:1"),
            "redis://***@127.0.0.1:1"
        );
        assert_eq!(
            url("redis://alice:hunter2PW@cache:6380/2"),
            "redis://***@cache:6380/2"
        );
        assert_eq!(url("redis://:pa/ss@w@h:1"), "redis://***@h:1");
        assert_eq!(url("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
        assert_eq!(url(":hunter2PW@127.0.0.1"), "***@127.0.0.1");
        assert_eq!(url("pw@x://u:pw@h"), "***@h");
        assert_eq!(url("https://hub.example/api"), "https://hub.example/api");
    }

    #[test]
    fn every_url_in_a_message_hides_its_login_and_nothing_else_changes() {
        assert_eq!(
            urls_in("GET `https://robot:p%40ss@hub.example/api/x@y` failed (http://u@h)"),
            "GET `https://***@hub.example/api/x@y` failed (http://***@h)"
        );
        assert_eq!(
            urls_in("see https://hub.example/org/repo@main and mail a@b"),
            "see https://hub.example/org/repo@main and mail a@b"
        );
        assert_eq!(urls_in("no url here"), "no url here");
        assert_eq!(urls_in("x://"), "x://");
    }
}
