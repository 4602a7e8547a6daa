//! The part of the Hub's HTTP surface this server answers, parsed from method + path.

use hyper::Method;
use percent_encoding::percent_decode_str;

use crate::store::{RepoId, RepoKind};

/// A recognised request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `POST /api/repos/create`
    CreateRepo,
    /// `DELETE /api/repos/delete`
    DeleteRepo,
    /// `GET /api/{kinds}/{owner}/{name}[/revision/{rev}]`
    Info { repo: RepoId, rev: Option<String> },
    /// `GET /api/{kinds}/{owner}/{name}/refs`
    Refs { repo: RepoId },
    /// `POST|DELETE /api/{kinds}/{owner}/{name}/branch/{branch}`
    Branch { repo: RepoId, branch: String },
    /// `GET /api/{kinds}/{owner}/{name}/tree/{rev}[/{path}]`
    Tree {
        repo: RepoId,
        rev: String,
        path: String,
    },
    /// `POST /api/{kinds}/{owner}/{name}/paths-info/{rev}`
    PathsInfo { repo: RepoId, rev: String },
    /// `POST /api/{kinds}/{owner}/{name}/preupload/{rev}`
    Preupload { repo: RepoId, rev: String },
    /// `POST /api/{kinds}/{owner}/{name}/commit/{rev}`
    Commit { repo: RepoId, rev: String },
    /// `GET /api/{kinds}/{owner}/{name}/commits/{rev}`
    Commits { repo: RepoId, rev: String },
    /// `GET /api/{kinds}/{owner}/{name}/discussions?type=pull_request&status=open`
    Discussions { repo: RepoId },
    /// `POST /api/{kinds}/{owner}/{name}/discussions/{num}/status`: open or close a PR.
    DiscussionStatus { repo: RepoId, num: u64 },
    /// `POST /{prefix}{owner}/{name}.git/info/lfs/objects/batch`
    LfsBatch { repo: RepoId },
    /// `PUT /_lfs/{oid}`: the upload action handed out by the batch endpoint.
    LfsUpload { oid: String },
    /// `POST /_lfs/verify`
    LfsVerify,
    /// `GET|HEAD /{prefix}{owner}/{name}/resolve/{rev}/{path}`
    Resolve {
        repo: RepoId,
        rev: String,
        path: String,
    },
    /// `POST /_admin/fault`: arm a fault while running (tests).
    AdminFault,
    /// `GET /api/organizations/{org}/overview`: what `kernels` reads to decide publisher trust.
    OrgOverview { org: String },
    /// `GET /api/agent-harnesses`: the registry `huggingface_hub` reads for its user agent.
    AgentHarnesses,
}

impl Route {
    /// Recognise a request; `None` for anything this server does not implement.
    pub fn parse(method: &Method, raw_path: &str) -> Option<Route> {
        // Split before decoding: a revision like `refs%2Fpr%2F1` is one segment.
        let segs: Vec<String> = raw_path
            .trim_start_matches('/')
            .split('/')
            .map(|s| percent_decode_str(s).decode_utf8_lossy().into_owned())
            .collect();
        let s: Vec<&str> = segs.iter().map(String::as_str).collect();
        let get = method == Method::GET;
        let post = method == Method::POST;
        match s.as_slice() {
            ["api", "repos", "create"] if post => Some(Route::CreateRepo),
            ["api", "repos", "delete"] if method == Method::DELETE => Some(Route::DeleteRepo),
            ["_lfs", "verify"] if post => Some(Route::LfsVerify),
            ["_lfs", oid] if method == Method::PUT => Some(Route::LfsUpload {
                oid: oid.to_string(),
            }),
            ["_admin", "fault"] if post => Some(Route::AdminFault),
            ["api", "agent-harnesses"] if get => Some(Route::AgentHarnesses),
            ["api", "organizations", org, "overview"] if get && valid_name(org) => {
                Some(Route::OrgOverview {
                    org: org.to_string(),
                })
            }
            ["api", kinds, owner, name, rest @ ..] => {
                let repo = repo_id(RepoKind::from_plural(kinds)?, owner, name)?;
                api_route(method, repo, rest)
            }
            _ if get || method == Method::HEAD || post => web_route(method, &s),
            _ => None,
        }
    }

    /// Route class for faults and logs (see `policy::CLASSES`).
    pub fn class(&self) -> &'static str {
        match self {
            Route::CreateRepo => "create",
            Route::DeleteRepo => "delete",
            Route::Info { .. } | Route::AgentHarnesses | Route::OrgOverview { .. } => "info",
            Route::Refs { .. } => "refs",
            Route::Branch { .. } => "branch",
            Route::Tree { .. } => "tree",
            Route::PathsInfo { .. } => "paths-info",
            Route::Preupload { .. } => "preupload",
            Route::Commit { .. } => "commit",
            Route::Commits { .. } => "commits",
            Route::Discussions { .. } | Route::DiscussionStatus { .. } => "discussions",
            Route::LfsBatch { .. } | Route::LfsUpload { .. } | Route::LfsVerify => "lfs",
            Route::Resolve { .. } => "resolve",
            Route::AdminFault => "admin",
        }
    }

    /// Whether the route changes state (and so needs a write token).
    pub fn writes(&self) -> bool {
        matches!(
            self,
            Route::CreateRepo
                | Route::DeleteRepo
                | Route::Branch { .. }
                | Route::Preupload { .. }
                | Route::Commit { .. }
                | Route::LfsBatch { .. }
                | Route::LfsUpload { .. }
                | Route::LfsVerify
                | Route::DiscussionStatus { .. }
        )
    }

    /// The repository the route addresses, if any.
    pub fn repo(&self) -> Option<&RepoId> {
        match self {
            Route::Info { repo, .. }
            | Route::Refs { repo }
            | Route::Branch { repo, .. }
            | Route::Tree { repo, .. }
            | Route::PathsInfo { repo, .. }
            | Route::Preupload { repo, .. }
            | Route::Commit { repo, .. }
            | Route::Commits { repo, .. }
            | Route::Discussions { repo }
            | Route::DiscussionStatus { repo, .. }
            | Route::LfsBatch { repo }
            | Route::Resolve { repo, .. } => Some(repo),
            _ => None,
        }
    }
}

/// An owner or repository name the Hub would accept (and that is safe as a path segment).
fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 96
        && !s.starts_with('.')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

fn repo_id(kind: RepoKind, owner: &str, name: &str) -> Option<RepoId> {
    (valid_name(owner) && valid_name(name)).then(|| RepoId {
        kind,
        owner: owner.to_string(),
        name: name.to_string(),
    })
}

fn api_route(method: &Method, repo: RepoId, rest: &[&str]) -> Option<Route> {
    let get = method == Method::GET;
    let post = method == Method::POST;
    let rev = |r: &str| r.to_string();
    match rest {
        [] if get => Some(Route::Info { repo, rev: None }),
        ["revision", r] if get => Some(Route::Info {
            repo,
            rev: Some(rev(r)),
        }),
        ["refs"] if get => Some(Route::Refs { repo }),
        ["branch", b] if post || method == Method::DELETE => Some(Route::Branch {
            repo,
            branch: b.to_string(),
        }),
        ["tree", r, path @ ..] if get => Some(Route::Tree {
            repo,
            rev: rev(r),
            path: path.join("/").trim_matches('/').to_string(),
        }),
        ["paths-info", r] if post => Some(Route::PathsInfo { repo, rev: rev(r) }),
        ["preupload", r] if post => Some(Route::Preupload { repo, rev: rev(r) }),
        ["commit", r] if post => Some(Route::Commit { repo, rev: rev(r) }),
        ["commits", r] if get => Some(Route::Commits { repo, rev: rev(r) }),
        ["discussions"] if get => Some(Route::Discussions { repo }),
        ["discussions", n, "status"] if post => Some(Route::DiscussionStatus {
            repo,
            num: n.parse().ok()?,
        }),
        _ => None,
    }
}

/// Web (non-`/api`) routes: `resolve` downloads and the LFS batch endpoint.
fn web_route(method: &Method, s: &[&str]) -> Option<Route> {
    let (kind, rest) = match s.first().and_then(|p| {
        let kind = RepoKind::from_plural(p)?;
        (kind != RepoKind::Model).then_some(kind)
    }) {
        // `kernels/org/name/resolve/...` unless it is the model `kernels/name` itself.
        Some(kind) if s.len() > 3 && s[2] != "resolve" => (kind, &s[1..]),
        _ => (RepoKind::Model, s),
    };
    match rest {
        [owner, name, "resolve", rev, path @ ..]
            if !path.is_empty() && (method == Method::GET || method == Method::HEAD) =>
        {
            Some(Route::Resolve {
                repo: repo_id(kind, owner, name)?,
                rev: rev.to_string(),
                path: path.join("/"),
            })
        }
        [owner, name_git, "info", "lfs", "objects", "batch"] if method == Method::POST => {
            let name = name_git.strip_suffix(".git")?;
            Some(Route::LfsBatch {
                repo: repo_id(kind, owner, name)?,
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(owner: &str, name: &str) -> RepoId {
        RepoId {
            kind: RepoKind::Kernel,
            owner: owner.into(),
            name: name.into(),
        }
    }

    #[test]
    fn encoded_revision_is_one_segment() {
        let r = Route::parse(
            &Method::GET,
            "/api/kernels/org/k/tree/refs%2Fpr%2F1/build/x",
        );
        assert_eq!(
            r,
            Some(Route::Tree {
                repo: kernel("org", "k"),
                rev: "refs/pr/1".into(),
                path: "build/x".into()
            })
        );
    }

    #[test]
    fn resolve_urls_use_the_kind_prefix() {
        let r = Route::parse(&Method::HEAD, "/kernels/org/k/resolve/v1/build/a/b.py");
        assert_eq!(
            r,
            Some(Route::Resolve {
                repo: kernel("org", "k"),
                rev: "v1".into(),
                path: "build/a/b.py".into()
            })
        );
        let m = Route::parse(&Method::GET, "/org/k/resolve/main/README.md").unwrap();
        assert_eq!(m.repo().unwrap().kind, RepoKind::Model);
        // A model repo owned by `kernels` is still a model repo.
        let m = Route::parse(&Method::GET, "/kernels/k/resolve/main/README.md").unwrap();
        assert_eq!(m.repo().unwrap().kind, RepoKind::Model);
    }

    #[test]
    fn organization_overview_is_recognised() {
        assert_eq!(
            Route::parse(&Method::GET, "/api/organizations/kernels-test/overview"),
            Some(Route::OrgOverview {
                org: "kernels-test".into()
            })
        );
    }

    #[test]
    fn lfs_batch_strips_dot_git() {
        let r = Route::parse(&Method::POST, "/kernels/org/k.git/info/lfs/objects/batch");
        assert_eq!(
            r,
            Some(Route::LfsBatch {
                repo: kernel("org", "k")
            })
        );
    }

    #[test]
    fn unknown_routes_and_methods_are_not_recognised() {
        assert_eq!(Route::parse(&Method::GET, "/api/kernels/org/k/nope"), None);
        assert_eq!(Route::parse(&Method::GET, "/api/repos/create"), None);
        assert_eq!(Route::parse(&Method::GET, "/api/widgets/org/k"), None);
        assert_eq!(Route::parse(&Method::GET, "/api/kernels/org/../refs"), None);
        assert_eq!(
            Route::parse(&Method::GET, "/api/organizations/../overview"),
            None
        );
        assert_eq!(
            Route::parse(&Method::POST, "/api/organizations/org/overview"),
            None
        );
    }
}
