//! Downloads: `resolve` with the headers `huggingface_hub` and hf-hub read.

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Method, Response, StatusCode};

use crate::context::{Ctx, HandlerResult};
use crate::http::{error, set_header};
use crate::store::RepoId;

/// `resolve`: the file with `X-Repo-Commit`, `ETag` (and `X-Linked-*` for LFS files).
pub fn download(ctx: &Ctx<'_>, repo: &RepoId, rev: &str, path: &str) -> HandlerResult {
    let commit = ctx.store.resolve(repo, rev)?;
    let Some(entry) = commit.tree.get(path) else {
        let mut resp = error(
            StatusCode::NOT_FOUND,
            Some("EntryNotFound"),
            &format!("Entry not found: {path}"),
        );
        set_header(&mut resp, "x-repo-commit", &commit.id);
        return Ok(resp);
    };
    let content = if ctx.req.method == Method::HEAD {
        Vec::new()
    } else {
        ctx.store.read_blob(&entry.sha256)?
    };
    let range = ctx
        .req
        .headers
        .get(hyper::header::RANGE)
        .and_then(|r| r.to_str().ok())
        .and_then(|r| parse_range(r, entry.size));
    let (status, body, len) = match range {
        Some((start, end)) if ctx.req.method == Method::GET => (
            StatusCode::PARTIAL_CONTENT,
            content[start as usize..=end as usize].to_vec(),
            end + 1 - start,
        ),
        Some((start, end)) => (StatusCode::PARTIAL_CONTENT, Vec::new(), end + 1 - start),
        None => (StatusCode::OK, content, entry.size),
    };
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    let etag = format!("\"{}\"", if entry.lfs { &entry.sha256 } else { &entry.oid });
    set_header(&mut resp, "x-repo-commit", &commit.id);
    set_header(&mut resp, "etag", &etag);
    set_header(&mut resp, "content-length", &len.to_string());
    set_header(&mut resp, "accept-ranges", "bytes");
    set_header(&mut resp, "content-type", "application/octet-stream");
    if entry.lfs {
        set_header(&mut resp, "x-linked-etag", &etag);
        set_header(&mut resp, "x-linked-size", &entry.size.to_string());
    }
    if let Some((start, end)) = range {
        set_header(
            &mut resp,
            "content-range",
            &format!("bytes {start}-{end}/{}", entry.size),
        );
    }
    Ok(resp)
}

/// `bytes=START-[END]` within a file of `size` bytes.
fn parse_range(header: &str, size: u64) -> Option<(u64, u64)> {
    let (start, end) = header.strip_prefix("bytes=")?.split_once('-')?;
    let start: u64 = start.parse().ok()?;
    let end: u64 = if end.is_empty() {
        size.checked_sub(1)?
    } else {
        end.parse::<u64>().ok()?.min(size.checked_sub(1)?)
    };
    (start <= end).then_some((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_headers_clamp_to_the_file() {
        assert_eq!(parse_range("bytes=2-", 10), Some((2, 9)));
        assert_eq!(parse_range("bytes=2-100", 10), Some((2, 9)));
        assert_eq!(parse_range("bytes=5-2", 10), None);
        assert_eq!(parse_range("bytes=0-", 0), None);
    }
}
