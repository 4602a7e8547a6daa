//! "Did you mean" suggestions for misspelt keys and values.

/// Edit distance in characters (insertions, deletions, substitutions and swaps of neighbours,
/// which is how most typos happen: `cdua` → `cuda` is one edit).
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // d[i][j]: distance between a[..i] and b[..j].
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    d[0] = (0..=b.len()).collect();
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

/// The candidate closest to `input`, if it is close enough to be a plausible typo, else the one
/// candidate that `input` abbreviates (`inc` → `include`).
pub fn closest<'a>(input: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let lower = input.to_lowercase();
    let limit = (input.chars().count() / 3).max(1);
    let near = candidates
        .iter()
        .map(|c| (edit_distance(&lower, &c.to_lowercase()), *c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c);
    if near.is_some() || lower.chars().count() < 3 {
        return near;
    }
    let mut prefixed = candidates
        .iter()
        .filter(|c| c.to_lowercase().starts_with(&lower));
    match (prefixed.next(), prefixed.next()) {
        (Some(only), None) => Some(*only),
        _ => None,
    }
}

/// `` `a`, `b`, `c` ``.
pub fn list(candidates: &[&str]) -> String {
    candidates
        .iter()
        .map(|c| format!("`{c}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `did you mean `x`? valid <what>: ...` or just the valid list when nothing is close.
pub fn did_you_mean(input: &str, candidates: &[&str], what: &str) -> String {
    match closest(input, candidates) {
        Some(c) => format!("did you mean `{c}`? valid {what}: {}", list(candidates)),
        None => format!("valid {what}: {}", list(candidates)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_counts_insertions_deletions_and_substitutions() {
        assert_eq!(edit_distance("cuda-flag", "cuda-flags"), 1);
        assert_eq!(edit_distance("cuda2", "cuda"), 1);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("same", "same"), 0);
        assert_eq!(edit_distance("cdua", "cuda"), 1);
    }

    #[test]
    fn closest_suggests_near_misses_only() {
        let keys = ["backend", "cuda-capabilities", "cuda-flags", "src"];
        assert_eq!(closest("cuda-flag", &keys), Some("cuda-flags"));
        assert_eq!(closest("srcs", &keys), Some("src"));
        assert_eq!(closest("Backend", &keys), Some("backend"));
        assert_eq!(closest("cuda_capability", &keys), Some("cuda-capabilities"));
        assert_eq!(closest("license", &keys), None);
        assert_eq!(closest("back", &keys), Some("backend"));
        // Ambiguous abbreviations suggest nothing.
        assert_eq!(closest("cuda", &keys), None);
    }

    #[test]
    fn did_you_mean_lists_the_valid_values() {
        let backends = ["cpu", "cuda", "metal"];
        assert_eq!(
            did_you_mean("cuda2", &backends, "backends"),
            "did you mean `cuda`? valid backends: `cpu`, `cuda`, `metal`"
        );
        assert_eq!(
            did_you_mean("tpu-v5", &backends, "backends"),
            "valid backends: `cpu`, `cuda`, `metal`"
        );
    }
}
