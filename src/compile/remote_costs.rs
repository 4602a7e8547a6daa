//! Compile times shared through the remote cache (`KBUILD_REMOTE_CACHE`), so that a first
//! build elsewhere (a CI runner with an empty cache, a teammate's new checkout) knows what each
//! unit costs before it runs and starts and splits the longest first.
//!
//! One value per unit: `kbuild:v2:cost:<key>`, the key being what the unit compiles as
//! `schedule::costs` names it (the language, the source's content, the capabilities: not the
//! flags or the torch, so another toolchain's build still knows it), the value the seconds its
//! last compile took, as text. With the team's secret (`KBUILD_REMOTE_CACHE_SECRET`) the value
//! carries an HMAC-SHA256 of the key and the seconds after a space, and only signed values are
//! read. A cost only orders and splits a build: a wrong one can slow it, never change what it
//! builds.

use std::collections::BTreeMap;

use super::redis::{Address, Client};
use super::remote::hmac_sha256;
use super::settings::RemoteSettings;

/// Under the remote objects' versioned prefix.
const PREFIX: &str = "kbuild:v2:cost";

/// The seconds the remote knows for each of `keys` (those it has, well formed and, with a
/// secret, signed with it); `Err`: why the remote could not be asked. A URL kbuild cannot use
/// yields nothing here: the compile stage says why.
pub fn fetch_costs(
    remote: &RemoteSettings,
    keys: &[String],
) -> Result<BTreeMap<String, f64>, String> {
    let Ok(address) = Address::parse(&remote.url) else {
        return Ok(BTreeMap::new());
    };
    if keys.is_empty() {
        return Ok(BTreeMap::new());
    }
    let stored: Vec<String> = keys.iter().map(|k| format!("{PREFIX}:{k}")).collect();
    let values = (Client::new(address).get_many(&stored)).map_err(|e| e.to_string())?;
    let secret = remote.secret.as_deref();
    Ok((keys.iter().zip(&stored).zip(values))
        .filter_map(|((key, stored), value)| {
            let seconds = read_value(stored, &value?, secret)?;
            Some((key.clone(), seconds))
        })
        .collect())
}

/// Store `seconds` (key → seconds, as measured by this build) on the remote, in one round
/// trip; `Err`: why not.
pub fn share_costs(remote: &RemoteSettings, seconds: &BTreeMap<String, f64>) -> Result<(), String> {
    let Ok(address) = Address::parse(&remote.url) else {
        return Ok(());
    };
    let pairs: Vec<(String, Vec<u8>)> = (seconds.iter())
        .map(|(key, secs)| {
            let stored = format!("{PREFIX}:{key}");
            let value = write_value(&stored, *secs, remote.secret.as_deref());
            (stored, value.into_bytes())
        })
        .collect();
    (Client::new(address).set_many(&pairs)).map_err(|e| e.to_string())
}

fn write_value(stored: &str, seconds: f64, secret: Option<&str>) -> String {
    let text = format!("{seconds:.3}");
    match secret {
        Some(secret) => format!("{text} {}", signature(secret, stored, &text)),
        None => text,
    }
}

/// The seconds in `value`, when it is a time (finite, not negative) and, with `secret`,
/// signed with it for `stored`.
fn read_value(stored: &str, value: &[u8], secret: Option<&str>) -> Option<f64> {
    let value = std::str::from_utf8(value).ok()?;
    let (text, hmac) = match value.split_once(' ') {
        Some((text, hmac)) => (text, Some(hmac)),
        None => (value, None),
    };
    if let Some(secret) = secret
        && hmac != Some(signature(secret, stored, text).as_str())
    {
        return None;
    }
    let seconds: f64 = text.parse().ok()?;
    (seconds.is_finite() && seconds >= 0.0).then_some(seconds)
}

fn signature(secret: &str, stored: &str, text: &str) -> String {
    let message = [stored.as_bytes(), b"\0", text.as_bytes()].concat();
    hex::encode(hmac_sha256(secret.as_bytes(), &message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signed_cost_reads_back_only_with_the_secret_it_was_signed_with() {
        let key = "kbuild:v2:cost:abc";
        let signed = write_value(key, 12.5, Some("team"));
        assert_eq!(read_value(key, signed.as_bytes(), Some("team")), Some(12.5));
        assert_eq!(read_value(key, signed.as_bytes(), Some("other")), None);
        assert_eq!(
            read_value("kbuild:v2:cost:xyz", signed.as_bytes(), Some("team")),
            None
        );
        // Unsigned values are refused when there is a secret, read without one.
        assert_eq!(read_value(key, b"3.000", Some("team")), None);
        assert_eq!(read_value(key, b"3.000", None), Some(3.0));
        for bad in [&b"-1"[..], b"NaN", b"inf", b"soon", b"\xff"] {
            assert_eq!(read_value(key, bad, None), None, "{bad:?}");
        }
    }
}
