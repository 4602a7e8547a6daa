//! Request handlers, one module per resource. Each takes the request context (and the route's
//! parsed parts) and returns a response or a store error for `dispatch` to render.

pub mod commit;
pub mod lfs;
pub mod orgs;
pub mod refs;
pub mod repos;
pub mod resolve;
pub mod tree;
