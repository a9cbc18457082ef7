//! Code shared by the integration tests and the example program.

pub mod models;
