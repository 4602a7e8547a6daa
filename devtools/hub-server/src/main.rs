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
mod serve;
mod store;
mod wire;

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use clap::Parser;
use tokio::net::TcpSocket;

use crate::context::State;
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
    /// Inject a fault (repeatable); `POST /_admin/fault` with SPEC as body arms one while running.
    ///
    /// SPEC is `CLASS:ACTION[:COUNT[:SKIP]]`: the first SKIP (default 0) requests of CLASS pass,
    /// the next COUNT (default 1) get ACTION, later ones pass again. ACTION is one of
    ///   STATUS[,retry-after=SECS]  answer STATUS (400..599) without doing the work,
    ///                              with `Retry-After: SECS` if given
    ///                              (`retry-after-date=SECS`: as the HTTP date SECS later)
    ///   hang[,for=DURATION]        read the request, do nothing, answer nothing; close the
    ///                              connection after DURATION (500ms, 30s, 2m; default 1h)
    ///   lose-response              do the work (a commit lands), close without answering
    /// CLASS is one of create, delete, info, refs, branch, tree, paths-info, preupload, commit,
    /// commits, discussions, lfs, resolve, any. Faults are consulted in the order given, the first unspent
    /// one of the request's class applies. Examples: `commit:500:2`, `commit:500:100:1` (the
    /// first commit lands, later ones fail), `refs:503,retry-after=5`, `commit:hang,for=30s`,
    /// `commit:lose-response:1:1`.
    #[arg(long = "fail", value_name = "SPEC", verbatim_doc_comment)]
    faults: Vec<Fault>,
    /// Mark organization ORG as a trusted kernel publisher (repeatable): its
    /// `GET /api/organizations/ORG/overview` answers `"trustedKernelPublisher": true`, so
    /// Python's `kernels.get_kernel` loads its repos without `trust_remote_code=True`.
    /// Every other organization that owns a repo answers `false`.
    #[arg(long = "trusted-publisher", value_name = "ORG")]
    trusted_publishers: Vec<String>,
    /// Entries per page of paginated listings (tree, commits).
    #[arg(long, default_value_t = 1000)]
    page_size: usize,
    /// Read every request body at this many bytes per second, like a slow link: uploads take
    /// long but data keeps moving.
    #[arg(long, value_name = "BYTES")]
    read_rate: Option<u64>,
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
    let socket = TcpSocket::new_v4()?;
    if args.read_rate.is_some() {
        // A slow link holds little in flight: without this, loopback's large buffers would take
        // a whole upload at once and the sender would see its data go nowhere.
        socket.set_recv_buffer_size(64 * 1024)?;
    }
    socket.bind(SocketAddr::from((Ipv4Addr::LOCALHOST, args.port)))?;
    let listener = socket.listen(1024)?;
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
        trusted_publishers: args.trusted_publishers,
        page_size: args.page_size.max(1),
        log: Mutex::new(Some(log)),
        read_rate: args.read_rate.filter(|r| *r > 0),
    });
    println!("listening on {base_url}");
    use std::io::Write as _;
    std::io::stdout().flush()?;
    serve::serve(listener, state).await
}
