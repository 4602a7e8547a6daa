//! How `kbuild publish` reads what the Hub's endpoint says and where it is: a `Retry-After`
//! given as an HTTP date is waited for like one given in seconds, and an endpoint URL with a
//! login does not replace the token (nor show its password).

use std::time::{Duration, Instant};

use crate::common::hub::{Hub, TOKEN};
use crate::common::variant::project_with_variant;

const REPO: &str = "org/relu";

#[test]
fn retry_after_as_an_http_date_is_waited_for() {
    let hub = Hub::start(&["--fail", "commit:503,retry-after-date=4"]);
    let (_project, build) = project_with_variant();
    let started = Instant::now();
    let run = hub.publish(&build, &["--repo", REPO]).success();
    let waits: Vec<&str> = (run.stderr.lines())
        .filter(|l| l.contains("retrying in"))
        .collect();
    assert_eq!(waits.len(), 1, "{}", run.stderr);
    // A date has whole seconds: 4 s from the answer is 3 to 4 s from when it is read.
    let said = waits[0];
    assert!(
        said.contains("retrying in 3") || said.contains("retrying in 4 s"),
        "{said}"
    );
    assert!(started.elapsed() >= Duration::from_secs(3));
}

#[test]
fn an_endpoint_with_a_login_still_sends_the_token_and_never_prints_the_password() {
    let hub = Hub::start(&["--require-token", TOKEN]);
    let (_project, build) = project_with_variant();
    let with_login = hub.url.replace("http://", "http://robot:hunter2PW@");
    let env = [("HF_TOKEN", TOKEN), ("HF_ENDPOINT", with_login.as_str())];
    let run = hub.publish_with(&build, &["--repo", REPO], &env).success();
    assert!(
        run.stderr
            .contains("holds a user and password, which kbuild does not send")
    );
    for secret in ["hunter2PW", "robot"] {
        assert!(
            !run.stderr.contains(secret) && !run.stdout.contains(secret),
            "{}",
            run.stderr
        );
    }
    assert!(hub.commits_made() >= 1, "{:?}", hub.log());
}
