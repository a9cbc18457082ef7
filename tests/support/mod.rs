//! Code shared by tests (and the fuzz targets in fuzz/); each test uses
//! part of it.

#[allow(dead_code)]
pub mod commands_oracle;
#[allow(dead_code)]
pub mod pipeline_oracle;
