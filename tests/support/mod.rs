//! Code shared by tests (and the fuzz targets in fuzz/).

pub mod pipeline_oracle;
