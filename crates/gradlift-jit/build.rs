//! The build id of the code gradlift generates: a hash of the sources
//! that decide which machine code a program's text becomes (the language,
//! the differentiation pipeline, the lowering and the crate tying them
//! together) and of `Cargo.lock` (Cranelift's version among them). The
//! disk cache of native code (`src/disk.rs`) keys its entries by it, so
//! that code stored by one build of gradlift is never loaded by another.
//! Directories that are missing (a crate built outside this workspace)
//! are left out; the package version is always in.

use std::path::{Path, PathBuf};

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = manifest.join("../..");
    let inputs = [
        root.join("src"),
        root.join("crates/gradlift-lang/src"),
        root.join("crates/gradlift-ad/src"),
        manifest.join("src"),
        root.join("Cargo.lock"),
    ];
    let mut files = Vec::new();
    for input in &inputs {
        println!("cargo:rerun-if-changed={}", input.display());
        collect(input, &mut files);
    }
    files.sort();
    let mut hash = Fnv::new();
    hash.write(env!("CARGO_PKG_VERSION").as_bytes());
    for file in &files {
        let relative = file.strip_prefix(&root).unwrap_or(file);
        hash.write(relative.to_string_lossy().as_bytes());
        hash.write(&[0]);
        match std::fs::read(file) {
            Ok(bytes) => {
                hash.write(&(bytes.len() as u64).to_le_bytes());
                hash.write(&bytes);
            }
            Err(_) => hash.write(b"unreadable"),
        }
    }
    println!("cargo:rustc-env=GRADLIFT_BUILD_ID={:016x}", hash.0);
}

/// The files under `path` (itself if it is a file).
fn collect(path: &Path, files: &mut Vec<PathBuf>) {
    if path.is_file() {
        files.push(path.to_path_buf());
        return;
    }
    let Ok(entries) = std::fs::read_dir(path) else {
        return;
    };
    for entry in entries.flatten() {
        collect(&entry.path(), files);
    }
}

/// FNV-1a, 64 bits.
struct Fnv(u64);

impl Fnv {
    fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}
