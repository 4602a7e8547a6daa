//! kbuild-hub-server: a loopback-only server speaking the part of the Hugging Face Hub HTTP API
//! that `kbuild publish` (hf-hub crate) and Python's `huggingface_hub` / `kernels` use.
//!
//! It prints `listening on http://127.0.0.1:PORT` on stdout once ready, logs every request
//! (method, path, status; never headers) to stderr and `<root>/requests.log`, and keeps repos
//! under `--root` with real commits per branch. Not for production: no TLS, no Xet, loopback only.

mod context;
mod dispatch;
mod handlers;
mod http;
mod policy;
mod routes;
mod store;
mod wire;

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use clap::Parser;
use http_body_util::BodyExt;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::context::State;
use crate::http::Request;
use crate::policy::{Fault, Faults, Tokens};

/// A local Hub-compatible server for tests (loopback only).
#[derive(Debug, Parser)]
#[command(name = "kbuild-hub-server")]
struct Args {
    /// Directory holding repositories and blobs (created if missing).
    #[arg(long, value_name = "DIR")]
    root: PathBuf,
    /// Port on 127.0.0.1 (0 picks a free one).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Require this token for writes (repeatable). Without any token flag, everyone may write.
    #[arg(long = "require-token", value_name = "TOKEN")]
    write_tokens: Vec<String>,
    /// A valid token without write access: writes with it get 403 (repeatable).
    #[arg(long = "read-token", value_name = "TOKEN")]
    read_tokens: Vec<String>,
    /// Fail requests of a route class with STATUS: `CLASS:STATUS[:COUNT[:SKIP]]`, e.g.
    /// `commit:500:2` fails the next two commits, `commit:500:5:1` lets one commit through and
    /// fails the five after it (repeatable). Classes: create, delete, info, refs, branch, tree,
    /// paths-info, preupload, commit, commits, lfs, resolve, any. `POST /_admin/fault` with the
    /// same spec as body arms one while running.
    #[arg(long = "fail", value_name = "SPEC")]
    faults: Vec<Fault>,
    /// Entries per page of paginated listings (tree, commits).
    #[arg(long, default_value_t = 1000)]
    page_size: usize,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args = Args::parse();
    match run(args).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> std::io::Result<()> {
    let store = store::Store::open(&args.root)?;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(args.root.join("requests.log"))?;
    let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, args.port))).await?;
    let addr = listener.local_addr()?;
    let base_url = format!("http://{addr}");
    let state = Arc::new(State {
        store: Mutex::new(store),
        faults: Mutex::new(Faults::new(args.faults)),
        tokens: Tokens {
            write: args.write_tokens,
            read: args.read_tokens,
        },
        base_url: base_url.clone(),
        page_size: args.page_size.max(1),
        log: Mutex::new(Some(log)),
    });
    println!("listening on {base_url}");
    use std::io::Write as _;
    std::io::stdout().flush()?;

    loop {
        let (stream, _) = listener.accept().await?;
        let state = Arc::clone(&state);
        tokio::spawn(async move {
            let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                let state = Arc::clone(&state);
                async move {
                    let (parts, body) = req.into_parts();
                    let body = match body.collect().await {
                        Ok(b) => b.to_bytes(),
                        Err(e) => return Err(e),
                    };
                    let query = parts
                        .uri
                        .query()
                        .map(|q| {
                            url::form_urlencoded::parse(q.as_bytes())
                                .into_owned()
                                .collect()
                        })
                        .unwrap_or_default();
                    let request = Request {
                        method: &parts.method,
                        path: parts.uri.path(),
                        query,
                        headers: &parts.headers,
                        body,
                    };
                    // Handlers do blocking file I/O under the store lock.
                    Ok::<_, hyper::Error>(tokio::task::block_in_place(|| {
                        dispatch::handle(&state, request)
                    }))
                }
            });
            if let Err(e) = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                eprintln!("connection error: {e}");
            }
        });
    }
}
