//! The disk cache of native code ([`crate::Jit::disk_cache`]): a compiled
//! function's machine code, its relocations, signature and workspace
//! bound, stored in one file per key, so that another process defining
//! the same thing loads the code instead of compiling it.
//!
//! **What it guarantees.** A stored entry is used only when
//! - its file reads back whole: the magic, then a checksum of the rest;
//! - its key equals the key asked for, compared in full: the caller's key
//!   (the program's text and what is derived from it), the build of
//!   gradlift (`GRADLIFT_BUILD_ID`, a hash of the compiler's sources and
//!   `Cargo.lock` taken when it is built, `build.rs`), the target triple,
//!   every Cranelift setting of the target, whether the code splits its
//!   loops across threads, and the iteration limit — everything the bytes
//!   depend on;
//! - every symbol its relocations name is one this process provides (a
//!   shim, a runtime function, the table of `exp`, the pool's word).
//!
//! Anything else is a miss: the function is compiled and the entry
//! written again. Loading defines the stored bytes in a fresh module and
//! lets it apply the relocations, as it does for code it has just
//! compiled: the code that runs is byte for byte the code the compile
//! produced.
//!
//! Entries are written to a temporary name and renamed into place, so a
//! reader sees a whole entry or none, and processes sharing a directory
//! may race harmlessly. Nothing is evicted: the directory grows with the
//! distinct functions compiled, and deleting it empties the cache.
//!
//! **Trust.** The code in the directory runs in the process that loads
//! it. The checksum detects damage, not tampering: a cache directory must
//! be writable only by whoever runs the programs (as the executable
//! itself is).

use crate::workspace::{Bytes, WorkspaceBound};
use crate::JitError;
use cranelift_codegen::binemit::Reloc;
use cranelift_codegen::Context;
use cranelift_module::{
    DataId, FuncId, FuncOrDataId, Linkage, Module, ModuleDeclarations, ModuleReloc,
    ModuleRelocTarget,
};
use gradlift_lang::syntax::Name;
use gradlift_lang::types::Signature;
use std::path::{Path, PathBuf};

/// The build of gradlift the stored code comes from (`build.rs`).
pub(crate) const BUILD_ID: &str = env!("GRADLIFT_BUILD_ID");

/// The first bytes of every entry (the format's version is its last two).
const MAGIC: &[u8; 8] = b"GLCODE01";

/// How deep a stored workspace formula may nest.
const MAX_DEPTH: usize = 4096;

/// A function as the module defined it: its code and relocations as
/// Cranelift emitted them.
pub(crate) struct Defined {
    pub id: FuncId,
    pub align: u64,
    pub bytes: Vec<u8>,
    pub relocs: Vec<ModuleReloc>,
}

/// Compiles the function in `ctx` and defines it in `module` as `id`,
/// keeping its code and relocations. The same as `module.define_function`
/// (which compiles, then defines the bytes), with the bytes kept.
pub(crate) fn define<M: Module>(
    module: &mut M,
    id: FuncId,
    ctx: &mut Context,
) -> Result<Defined, JitError> {
    ctx.compile(module.isa(), &mut Default::default())
        .map_err(|e| JitError::Codegen(format!("{:?}", e.inner)))?;
    let code = ctx.compiled_code().expect("compiled just now");
    let align = u64::from(code.buffer.alignment);
    let bytes = code.code_buffer().to_vec();
    let relocs: Vec<ModuleReloc> = code
        .buffer
        .relocs()
        .iter()
        .map(|r| ModuleReloc::from_mach_reloc(r, &ctx.func, id))
        .collect();
    module
        .define_function_bytes(id, align, &bytes, &relocs)
        .map_err(|e| JitError::Codegen(format!("{e:?}")))?;
    Ok(Defined {
        id,
        align,
        bytes,
        relocs,
    })
}

/// What a relocation refers to, by name rather than by the ids of the
/// module that compiled it.
#[derive(Clone, Debug, PartialEq)]
enum Target {
    /// An imported function.
    Import(String),
    /// The `k`-th function of the entry, at an offset.
    Defined(u32, u32),
    /// An imported data object.
    Data(String),
    /// One of Cranelift's library calls.
    LibCall(String),
}

#[derive(Clone, Debug, PartialEq)]
struct StoredReloc {
    offset: u32,
    kind: Reloc,
    addend: i64,
    target: Target,
}

#[derive(Clone, Debug, PartialEq)]
struct StoredFunction {
    align: u64,
    bytes: Vec<u8>,
    relocs: Vec<StoredReloc>,
}

/// A compiled function as stored: its functions (kernels first, the entry
/// point last) and what [`crate::Compiled`] holds beside the code.
#[derive(Clone, Debug)]
pub(crate) struct Entry {
    pub key: String,
    pub name: String,
    pub sig: Signature,
    pub bound: WorkspaceBound,
    /// Whether the code reads the thread pool's word.
    pub pool: bool,
    functions: Vec<StoredFunction>,
}

/// The relocation kinds an entry may hold: a 64-bit absolute address (how
/// the JIT's code, not position-independent, reaches its imports and data:
/// applying one cannot fail, whatever the address), and the relative
/// calls of x86-64 and aarch64, only between the functions of one entry
/// ([`relative`]), which the JIT module places together as it does when
/// it compiles them. Code with any other is not stored.
const KINDS: [Reloc; 3] = [Reloc::Abs8, Reloc::X86CallPCRel4, Reloc::Arm64Call];

/// The largest addend an entry's relocation may have, either way: the
/// code's are 0 (an address) and -4 (a call). Bounding them keeps the
/// JIT module's arithmetic on addresses from overflowing.
const MAX_ADDEND: i64 = 4096;

/// Whether `kind` is relative to where the code is: allowed only to the
/// entry's own functions.
fn relative(kind: Reloc) -> bool {
    kind != Reloc::Abs8
}

impl Entry {
    /// The entry of `defined` (the entry point last), named through the
    /// declarations of the module that defined them; `None` when a
    /// relocation cannot be stored by name.
    pub fn new(
        key: String,
        name: &str,
        sig: &Signature,
        bound: &WorkspaceBound,
        pool: bool,
        declarations: &ModuleDeclarations,
        defined: &[Defined],
    ) -> Option<Entry> {
        let position = |id: FuncId| defined.iter().position(|d| d.id == id);
        let mut functions = Vec::with_capacity(defined.len());
        for d in defined {
            let mut relocs = Vec::with_capacity(d.relocs.len());
            for r in &d.relocs {
                if !KINDS.contains(&r.kind) {
                    return None;
                }
                let target = match &r.name {
                    ModuleRelocTarget::User { .. } if ModuleDeclarations::is_function(&r.name) => {
                        let id = FuncId::from_name(&r.name);
                        match position(id) {
                            Some(k) => Target::Defined(k as u32, 0),
                            None => {
                                let decl = declarations.get_function_decl(id);
                                if decl.linkage != Linkage::Import {
                                    return None;
                                }
                                Target::Import(decl.name.clone()?)
                            }
                        }
                    }
                    ModuleRelocTarget::User { .. } => {
                        let decl = declarations.get_data_decl(DataId::from_name(&r.name));
                        if decl.linkage != Linkage::Import {
                            return None;
                        }
                        Target::Data(decl.name.clone()?)
                    }
                    ModuleRelocTarget::LibCall(call) => Target::LibCall(call.to_string()),
                    ModuleRelocTarget::FunctionOffset(id, offset) => {
                        Target::Defined(position(*id)? as u32, *offset)
                    }
                    ModuleRelocTarget::KnownSymbol(_) => return None,
                };
                if relative(r.kind) && !matches!(target, Target::Defined(..))
                    || !(-MAX_ADDEND..=MAX_ADDEND).contains(&r.addend)
                {
                    return None;
                }
                relocs.push(StoredReloc {
                    offset: r.offset,
                    kind: r.kind,
                    addend: r.addend,
                    target,
                });
            }
            functions.push(StoredFunction {
                align: d.align,
                bytes: d.bytes.clone(),
                relocs,
            });
        }
        Some(Entry {
            key,
            name: name.to_string(),
            sig: sig.clone(),
            bound: bound.clone(),
            pool,
            functions,
        })
    }

    /// Defines the entry's functions in `module` (one that provides
    /// `symbols`) and returns the id of its entry point, or `None` when
    /// the entry names a symbol the module does not provide or does not
    /// fit its own code.
    pub fn define<M: Module>(&self, module: &mut M, symbols: &[&str]) -> Option<FuncId> {
        let provided = |name: &str| symbols.contains(&name);
        let mut ids = Vec::with_capacity(self.functions.len());
        let last = self.functions.len().checked_sub(1)?;
        for k in 0..self.functions.len() {
            let id = if k == last {
                let sig = crate::jit::entry_signature(module);
                module
                    .declare_function(&self.name, Linkage::Export, &sig)
                    .ok()?
            } else {
                // A kernel (`split.rs`); the JIT module does not read
                // the signatures of the functions it is given as bytes.
                let sig = module.make_signature();
                module.declare_anonymous_function(&sig).ok()?
            };
            ids.push(id);
        }
        for (f, &id) in self.functions.iter().zip(&ids) {
            let mut relocs = Vec::with_capacity(f.relocs.len());
            for r in &f.relocs {
                let name = match &r.target {
                    Target::Import(name) => {
                        if !provided(name) {
                            return None;
                        }
                        let id = match module.get_name(name) {
                            Some(FuncOrDataId::Func(id)) => id,
                            Some(FuncOrDataId::Data(_)) => return None,
                            None => {
                                let sig = module.make_signature();
                                module.declare_function(name, Linkage::Import, &sig).ok()?
                            }
                        };
                        ModuleRelocTarget::from(id)
                    }
                    Target::Data(name) => {
                        if !provided(name) {
                            return None;
                        }
                        let id = module
                            .declare_data(name, Linkage::Import, false, false)
                            .ok()?;
                        ModuleRelocTarget::from(id)
                    }
                    Target::Defined(k, offset) => {
                        let k = *k as usize;
                        if *offset as usize > self.functions.get(k)?.bytes.len() {
                            return None;
                        }
                        ModuleRelocTarget::FunctionOffset(ids[k], *offset)
                    }
                    Target::LibCall(call) => ModuleRelocTarget::LibCall(call.parse().ok()?),
                };
                relocs.push(ModuleReloc {
                    offset: r.offset,
                    kind: r.kind,
                    name,
                    addend: r.addend,
                });
            }
            let in_bounds = relocs
                .iter()
                .all(|r| (r.offset as usize).saturating_add(width(r.kind)) <= f.bytes.len());
            if !in_bounds {
                return None;
            }
            module
                .define_function_bytes(id, f.align, &f.bytes, &relocs)
                .ok()?;
        }
        Some(ids[last])
    }

    /// The entry as the bytes of its file.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer(Vec::new());
        w.str(&self.key);
        w.str(&self.name);
        w.u32(self.sig.params.len() as u32);
        for (p, t) in &self.sig.params {
            w.str(p);
            match t {
                Some(t) => {
                    w.u8(1);
                    w.str(&t.to_string());
                }
                None => w.u8(0),
            }
        }
        w.str(&self.sig.ret.to_string());
        w.u32(self.sig.size_vars.len() as u32);
        for s in &self.sig.size_vars {
            w.str(s);
        }
        match (self.bound.formula(), self.bound.missing()) {
            (Some(bytes), _) => {
                w.u8(1);
                w.bytes_formula(bytes);
            }
            (None, why) => {
                w.u8(0);
                w.str(why.unwrap_or(""));
            }
        }
        w.u8(u8::from(self.pool));
        w.u32(self.functions.len() as u32);
        for f in &self.functions {
            w.u64(f.align);
            w.blob(&f.bytes);
            w.u32(f.relocs.len() as u32);
            for r in &f.relocs {
                w.u32(r.offset);
                w.u8(KINDS
                    .iter()
                    .position(|k| *k == r.kind)
                    .expect("stored kinds") as u8);
                w.u64(r.addend as u64);
                match &r.target {
                    Target::Import(name) => {
                        w.u8(0);
                        w.str(name);
                    }
                    Target::Defined(k, offset) => {
                        w.u8(1);
                        w.u32(*k);
                        w.u32(*offset);
                    }
                    Target::Data(name) => {
                        w.u8(2);
                        w.str(name);
                    }
                    Target::LibCall(name) => {
                        w.u8(3);
                        w.str(name);
                    }
                }
            }
        }
        let body = w.0;
        let mut file = Vec::with_capacity(body.len() + 16);
        file.extend_from_slice(MAGIC);
        file.extend_from_slice(&fnv(&body).to_le_bytes());
        file.extend_from_slice(&body);
        file
    }

    /// The entry of a file's bytes, or `None` if they are not a whole
    /// entry of this format.
    pub fn decode(file: &[u8]) -> Option<Entry> {
        let rest = file.strip_prefix(MAGIC)?;
        let (sum, body) = rest.split_first_chunk::<8>()?;
        if u64::from_le_bytes(*sum) != fnv(body) {
            return None;
        }
        let mut r = Reader(body);
        let key = r.str()?;
        let name = r.str()?;
        let n = r.u32()?;
        let mut params = Vec::new();
        for _ in 0..n {
            let p = Name::from(r.str()?);
            let t = match r.u8()? {
                0 => None,
                1 => Some(gradlift_lang::parser::parse_type(&r.str()?).ok()?),
                _ => return None,
            };
            params.push((p, t));
        }
        let ret = gradlift_lang::parser::parse_type(&r.str()?).ok()?;
        let n = r.u32()?;
        let mut size_vars = Vec::new();
        for _ in 0..n {
            size_vars.push(Name::from(r.str()?));
        }
        let bound = match r.u8()? {
            0 => WorkspaceBound::new(Err(r.str()?)),
            1 => WorkspaceBound::new(Ok(r.bytes_formula(0)?)),
            _ => return None,
        };
        let pool = match r.u8()? {
            0 => false,
            1 => true,
            _ => return None,
        };
        let n = r.u32()?;
        let mut functions = Vec::new();
        for _ in 0..n {
            let align = r.u64()?;
            let bytes = r.blob()?.to_vec();
            let m = r.u32()?;
            let mut relocs = Vec::new();
            for _ in 0..m {
                let offset = r.u32()?;
                let kind = *KINDS.get(usize::from(r.u8()?))?;
                let addend = r.u64()? as i64;
                let target = match r.u8()? {
                    0 => Target::Import(r.str()?),
                    1 => Target::Defined(r.u32()?, r.u32()?),
                    2 => Target::Data(r.str()?),
                    3 => Target::LibCall(r.str()?),
                    _ => return None,
                };
                if relative(kind) && !matches!(target, Target::Defined(..))
                    || !(-MAX_ADDEND..=MAX_ADDEND).contains(&addend)
                {
                    return None;
                }
                relocs.push(StoredReloc {
                    offset,
                    kind,
                    addend,
                    target,
                });
            }
            functions.push(StoredFunction {
                align,
                bytes,
                relocs,
            });
        }
        if !r.0.is_empty() || functions.is_empty() || !align_ok(&functions) {
            return None;
        }
        Some(Entry {
            key,
            name,
            sig: Signature {
                params,
                ret,
                size_vars,
            },
            bound,
            pool,
            functions,
        })
    }
}

/// The bytes a relocation of `kind` patches.
fn width(kind: Reloc) -> usize {
    match kind {
        Reloc::Abs8 => 8,
        _ => 4,
    }
}

/// Whether every alignment is a power of two of at most a page.
fn align_ok(functions: &[StoredFunction]) -> bool {
    functions
        .iter()
        .all(|f| f.align.is_power_of_two() && f.align <= 4096)
}

/// The file of `key` under `dir`: named by a hash of the key (the file
/// holds the key itself, compared in full on load).
pub(crate) fn path(dir: &Path, key: &str) -> PathBuf {
    dir.join(format!("{:016x}.glcode", fnv(key.as_bytes())))
}

/// What a directory holds under a key.
pub(crate) enum Lookup {
    /// No file (or one that cannot be read).
    Missing,
    /// A file that is not a whole entry of this format.
    Damaged,
    /// An entry; of this key, or of another whose name's hash collides
    /// (reported as missing).
    Found(Box<Entry>),
}

/// The entry stored under `key` in `dir`.
pub(crate) fn load(dir: &Path, key: &str) -> Lookup {
    let Ok(bytes) = std::fs::read(path(dir, key)) else {
        return Lookup::Missing;
    };
    match Entry::decode(&bytes) {
        Some(e) if e.key == key => Lookup::Found(Box::new(e)),
        Some(_) => Lookup::Missing,
        None => Lookup::Damaged,
    }
}

/// Writes `entry` into `dir` (created if missing): to a temporary file,
/// renamed into place.
pub(crate) fn store(dir: &Path, entry: &Entry) -> std::io::Result<()> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static WRITES: AtomicU64 = AtomicU64::new(0);
    std::fs::create_dir_all(dir)?;
    let target = path(dir, &entry.key);
    let temporary = target.with_extension(format!(
        "{}.{}.tmp",
        std::process::id(),
        WRITES.fetch_add(1, Ordering::Relaxed)
    ));
    let written = std::fs::write(&temporary, entry.encode())
        .and_then(|()| std::fs::rename(&temporary, &target));
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

/// FNV-1a, 64 bits.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

struct Writer(Vec<u8>);

impl Writer {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn blob(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.0.extend_from_slice(b);
    }
    fn str(&mut self, s: &str) {
        self.blob(s.as_bytes());
    }
    fn bytes_formula(&mut self, x: &Bytes) {
        match x {
            Bytes::Const(c) => {
                self.u8(0);
                self.u64(*c);
            }
            Bytes::Len(c, terms) => {
                self.u8(1);
                self.u64(*c as u64);
                self.u32(terms.len() as u32);
                for &(k, a) in terms {
                    self.u64(k as u64);
                    self.u64(a as u64);
                }
            }
            Bytes::Sum(xs) | Bytes::Max(xs) => {
                self.u8(if matches!(x, Bytes::Sum(_)) { 2 } else { 4 });
                self.u32(xs.len() as u32);
                for x in xs {
                    self.bytes_formula(x);
                }
            }
            Bytes::Product(a, b) => {
                self.u8(3);
                self.bytes_formula(a);
                self.bytes_formula(b);
            }
            Bytes::CeilDiv(a, k) => {
                self.u8(5);
                self.bytes_formula(a);
                self.u64(*k);
            }
        }
    }
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        if n > self.0.len() {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn blob(&mut self) -> Option<&[u8]> {
        let n = usize::try_from(self.u64()?).ok()?;
        self.take(n)
    }
    fn str(&mut self) -> Option<String> {
        String::from_utf8(self.blob()?.to_vec()).ok()
    }
    fn bytes_formula(&mut self, depth: usize) -> Option<Bytes> {
        if depth > MAX_DEPTH {
            return None;
        }
        let list = |r: &mut Self| -> Option<Vec<Bytes>> {
            let n = r.u32()?;
            (0..n).map(|_| r.bytes_formula(depth + 1)).collect()
        };
        Some(match self.u8()? {
            0 => Bytes::Const(self.u64()?),
            1 => {
                let c = self.u64()? as i64;
                let n = self.u32()?;
                let mut terms = Vec::new();
                for _ in 0..n {
                    let k = usize::try_from(self.u64()?).ok()?;
                    terms.push((k, self.u64()? as i64));
                }
                Bytes::Len(c, terms)
            }
            2 => Bytes::Sum(list(self)?),
            3 => Bytes::Product(
                Box::new(self.bytes_formula(depth + 1)?),
                Box::new(self.bytes_formula(depth + 1)?),
            ),
            4 => Bytes::Max(list(self)?),
            5 => {
                let a = self.bytes_formula(depth + 1)?;
                let k = self.u64()?;
                if k == 0 {
                    return None;
                }
                Bytes::CeilDiv(Box::new(a), k)
            }
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every one-bit change of a stored entry, with its checksum made to
    /// match again (damage the checksum would have caught, passed on), is
    /// refused or loads: nothing panics. The code is not run.
    #[test]
    fn altered_entries_are_refused_or_load_without_panicking() {
        let checked = gradlift_lang::check_source(
            "<test>",
            "def f(x: [R; n], a: R) -> (R, [R; n]) =
               (reduce (+) 0 (map (v. exp(v) * sin(v * a)) x), map (v. tanh(v) + a) x)",
        )
        .unwrap();
        let closed = gradlift_ad::inline::inline(&checked, 0);
        let jit = crate::Jit::new().unwrap().threads(1);
        let (_, entry) = jit.compile_entry(&closed, Some("key".into())).unwrap();
        let file = entry.expect("stored").encode();
        let whole = Entry::decode(&file).expect("reads back");
        assert!(jit.load(&whole).is_some());
        let (mut refused, mut loaded) = (0, 0);
        for i in 16..file.len() {
            for bit in [0x01u8, 0x80] {
                let mut altered = file.clone();
                altered[i] ^= bit;
                let sum = fnv(&altered[16..]);
                altered[8..16].copy_from_slice(&sum.to_le_bytes());
                match Entry::decode(&altered).and_then(|e| jit.load(&e)) {
                    Some(_) => loaded += 1,
                    None => refused += 1,
                }
            }
        }
        // Most changes are in the code's bytes, which load (and would
        // compute something else); changes of the structure are refused.
        assert!(
            loaded > 0 && refused > 0,
            "{loaded} loaded, {refused} refused"
        );
    }
}
