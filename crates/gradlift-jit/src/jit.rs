//! The JIT module and the safe API: [`Jit::compile`] turns a closed term
//! into a [`Compiled`] function; [`Compiled::call`] checks the arguments
//! against the parameter types, converts them to the native layout, runs
//! the code in a pooled workspace (grown and retried when the code asks for
//! more) and converts the result back.

use crate::abi::{RawFn, Status};
use crate::annotate::Labels;
use crate::cache::{Cache, CacheStats, DiskStats};
use crate::layout::{flat_len, flatten_into};
use crate::lower::lower_function;
use crate::prims::{exp_table_bytes, prims_used, reads_exp_table, EXP_TABLE_SYMBOL};
use crate::workspace::WorkspaceBound;
use crate::{CallError, JitError};
use cranelift_codegen::ir::{types, AbiParam, InstBuilder, UserFuncName};
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_codegen::Context;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, DataDescription, Linkage, Module};
use cranelift_object::{ObjectBuilder, ObjectModule};
use gradlift_lang::closed::Closed;
use gradlift_lang::types::Signature;
use gradlift_lang::value::bind_sizes;
use gradlift_lang::Value;
use std::sync::{Arc, Mutex};

/// The largest workspace the safe calls of a [`Compiled`] grow to, in
/// bytes, unless [`Jit::max_workspace`] says otherwise: 4 GiB.
pub const DEFAULT_MAX_WORKSPACE: u64 = 1 << 32;

/// The cores of this machine (1 when unknown).
fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Whether `e` multiplies matrices.
fn uses_matmul(e: &gradlift_lang::syntax::Expr) -> bool {
    use gradlift_lang::syntax::{Builtin, ExprKind};
    gradlift_lang::deep::guard(|| {
        matches!(e.kind, ExprKind::Builtin(Builtin::MatMul, _)) || e.children().any(uses_matmul)
    })
}

/// Whether `e` has a loop that may be split across the thread pool (a
/// `map`, `map2` or `reduce`: `split.rs` decides which).
fn splits(e: &gradlift_lang::syntax::Expr) -> bool {
    use gradlift_lang::syntax::{ArrayOp, ExprKind};
    gradlift_lang::deep::guard(|| {
        matches!(
            e.kind,
            ExprKind::ArrayOp(ArrayOp::Map | ArrayOp::Map2 | ArrayOp::Reduce, ..)
        ) || e.children().any(splits)
    })
}

/// The functions the primitives `used` call, each imported into `func`
/// once (the JIT's shims, or with `c_names` the C library's functions),
/// and the table of `exp` and `tanh` where one of them reads it.
fn declare_imports<M: Module>(
    module: &mut M,
    func: &mut cranelift_codegen::ir::Function,
    used: &std::collections::BTreeSet<gradlift_lang::Prim>,
    c_names: bool,
) -> Result<
    (
        std::collections::HashMap<gradlift_lang::Prim, cranelift_codegen::ir::FuncRef>,
        Option<cranelift_codegen::ir::GlobalValue>,
    ),
    JitError,
> {
    let mut calls = std::collections::HashMap::new();
    for p in used {
        if let gradlift_lang::prim::Lowering::Call {
            shim,
            symbol,
            c_name,
        } = p.info().lowering
        {
            let name = match (c_names, c_name) {
                (false, _) => symbol,
                (true, Some(c_name)) => c_name,
                (true, None) => {
                    return Err(JitError::Unsupported(format!(
                        "`{p}` in an object file (the C library has no such function)"
                    )))
                }
            };
            let mut sig = module.make_signature();
            for _ in 0..shim.arity() {
                sig.params.push(AbiParam::new(types::F64));
            }
            sig.returns.push(AbiParam::new(types::F64));
            let id = module
                .declare_function(name, Linkage::Import, &sig)
                .map_err(|e| JitError::Codegen(e.to_string()))?;
            calls.insert(*p, module.declare_func_in_func(id, func));
        }
    }
    // The table of `exp` and `tanh`, declared where the function uses
    // either. The JIT's code reads this process's own: an import, which
    // it reaches by a 64-bit absolute address (no relocation has to
    // reach from the code to a data object that may be mapped far from
    // it). An object file carries it as a local data object
    // (`define_exp_data`).
    let exp_table = if reads_exp_table(used) {
        let linkage = if c_names {
            Linkage::Local
        } else {
            Linkage::Import
        };
        let id = module
            .declare_data(EXP_TABLE_SYMBOL, linkage, false, false)
            .map_err(|e| JitError::Codegen(e.to_string()))?;
        Some(module.declare_data_in_func(id, func))
    } else {
        None
    };
    Ok((calls, exp_table))
}

/// The kernels of a function's split loops, defined in its module
/// (`split.rs`).
struct ModuleKernels<'m, M: Module> {
    module: &'m mut M,
    /// The primitives of the whole function, imported into each kernel.
    used: std::collections::BTreeSet<gradlift_lang::Prim>,
    verify: bool,
    flags: settings::Flags,
    /// The kernels defined so far, with their code.
    defined: Vec<crate::disk::Defined>,
}

impl<M: Module> crate::split::KernelSink for ModuleKernels<'_, M> {
    fn define(
        &mut self,
        parent: &mut cranelift_codegen::ir::Function,
        body: &mut dyn FnMut(
            &mut crate::lower::Translator<'_, '_>,
            cranelift_codegen::ir::Value,
            cranelift_codegen::ir::Value,
        ) -> Result<cranelift_codegen::ir::Value, JitError>,
    ) -> Result<cranelift_codegen::ir::FuncRef, JitError> {
        let mut ctx = self.module.make_context();
        ctx.func.signature.params.push(AbiParam::new(types::I64));
        ctx.func.signature.params.push(AbiParam::new(types::I64));
        ctx.func.signature.returns.push(AbiParam::new(types::F64));
        ctx.func.name = UserFuncName::user(1, self.defined.len() as u32 + 1);
        let sig = ctx.func.signature.clone();
        let mut fctx = FunctionBuilderContext::new();
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let (calls, exp_table) = declare_imports(self.module, b.func, &self.used, false)?;
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let (env, chunk) = (b.block_params(entry)[0], b.block_params(entry)[1]);
        let mut t = crate::lower::Translator::for_kernel(&mut b, calls, exp_table);
        let result = body(&mut t, env, chunk)?;
        t.finish_kernel(result);
        b.finalize(self.module.target_config());
        if self.verify {
            cranelift_codegen::verify_function(&ctx.func, &self.flags)
                .map_err(|e| JitError::Verifier(e.to_string()))?;
        }
        let id = self
            .module
            .declare_anonymous_function(&sig)
            .map_err(|e| JitError::Codegen(e.to_string()))?;
        let defined = crate::disk::define(self.module, id, &mut ctx)?;
        self.defined.push(defined);
        self.module.clear_context(&mut ctx);
        Ok(self.module.declare_func_in_func(id, parent))
    }
}

/// A compiler to native code: for the host (it runs what it compiles), or,
/// from [`Jit::for_target`], for another target (it prints and writes
/// object files only).
pub struct Jit {
    isa: OwnedTargetIsa,
    verify: bool,
    host: bool,
    max_workspace: u64,
    max_iterations: u64,
    threads: usize,
    pool: std::sync::OnceLock<Arc<Pool>>,
    cache: Cache,
    disk: Option<Disk>,
}

/// The directory of a `Jit`'s disk cache (`disk.rs`), with counts of how
/// it has been used.
struct Disk {
    dir: std::path::PathBuf,
    stats: Mutex<DiskStats>,
}

impl Disk {
    /// Counts an event in `stats`.
    fn count(&self, event: impl FnOnce(&mut DiskStats) -> &mut u64) {
        let mut stats = self.stats.lock().unwrap_or_else(|e| e.into_inner());
        *event(&mut stats) += 1;
    }
}

/// The thread pool of a `Jit`, and a word holding its address: the code
/// reads the address from that word, through the symbol [`POOL_SYMBOL`],
/// rather than holding it as a constant, so that the code's bytes do not
/// depend on where the pool is (they can be stored and loaded again,
/// `disk.rs`). Both live as long as the pool: a compiled function that
/// uses them holds the `Arc`.
pub(crate) struct Pool {
    /// Owned here, used through `address`.
    _threads: Box<rayon::ThreadPool>,
    address: usize,
}

/// The symbol of the word holding the address of the thread pool.
pub(crate) const POOL_SYMBOL: &str = "gradlift_pool";

/// Cranelift's settings for every target: `opt_level=speed`, its own
/// verifier between passes in debug builds only (it took 10–25% of the
/// compile time of large gradients), inline stack probes for frames over
/// a page (a function whose frame outgrows the thread's stack faults on
/// the guard page rather than writing past it; gradlift's frames are
/// hundreds of bytes), then `extra`.
fn flags(extra: &[(&str, &str)]) -> Result<settings::Flags, JitError> {
    let mut flags = settings::builder();
    let verifier = if cfg!(debug_assertions) {
        "true"
    } else {
        "false"
    };
    let probes = [
        ("enable_probestack", "true"),
        ("probestack_strategy", "inline"),
    ];
    for (k, v) in [("opt_level", "speed"), ("enable_verifier", verifier)]
        .iter()
        .chain(&probes)
        .chain(extra)
    {
        flags
            .set(k, v)
            .map_err(|e| JitError::Codegen(e.to_string()))?;
    }
    Ok(settings::Flags::new(flags))
}

impl Jit {
    /// A compiler for the host ISA at `opt_level=speed`. The Cranelift
    /// verifier runs on every function in debug builds.
    pub fn new() -> Result<Jit, JitError> {
        let flags = flags(&[("is_pic", "false"), ("use_colocated_libcalls", "false")])?;
        let isa = cranelift_native::builder()
            .map_err(|e| JitError::Codegen(e.to_string()))?
            .finish(flags)
            .map_err(|e| JitError::Codegen(e.to_string()))?;
        Ok(Jit {
            isa,
            verify: cfg!(debug_assertions),
            host: true,
            max_workspace: DEFAULT_MAX_WORKSPACE,
            max_iterations: gradlift_lang::interp::DEFAULT_MAX_ITERATIONS,
            threads: default_threads(),
            pool: Default::default(),
            cache: Cache::new(true),
            disk: None,
        })
    }

    /// A compiler for the target `triple` (`aarch64-unknown-linux-gnu`,
    /// `x86_64-unknown-linux-gnu`, …) with its baseline features, at
    /// `opt_level=speed`, position-independent: for [`Jit::object`],
    /// [`Jit::clif`] and [`Jit::asm`]. [`Jit::compile`] refuses it, even
    /// for the host's triple.
    pub fn for_target(triple: &str) -> Result<Jit, JitError> {
        let triple: target_lexicon::Triple = triple
            .parse()
            .map_err(|e| JitError::Codegen(format!("target `{triple}`: {e}")))?;
        let flags = flags(&[("is_pic", "true")])?;
        let isa = cranelift_codegen::isa::lookup(triple.clone())
            .map_err(|e| JitError::Codegen(format!("target `{triple}`: {e}")))?
            .finish(flags)
            .map_err(|e| JitError::Codegen(e.to_string()))?;
        Ok(Jit {
            isa,
            verify: cfg!(debug_assertions),
            host: false,
            max_workspace: DEFAULT_MAX_WORKSPACE,
            max_iterations: gradlift_lang::interp::DEFAULT_MAX_ITERATIONS,
            threads: default_threads(),
            pool: Default::default(),
            cache: Cache::new(true),
            disk: None,
        })
    }

    /// The triple of the machine this runs on.
    pub fn host_triple() -> String {
        target_lexicon::Triple::host().to_string()
    }

    /// The target triple code is generated for.
    pub fn triple(&self) -> String {
        self.isa.triple().to_string()
    }

    /// The largest workspace, in bytes, that the safe calls of the
    /// functions compiled from now on allocate ([`DEFAULT_MAX_WORKSPACE`],
    /// 4 GiB, unless set): a call that needs more fails with
    /// [`CallError::WorkspaceLimit`], allocating nothing. Callers of
    /// [`Compiled::raw`] size the workspace themselves.
    pub fn max_workspace(mut self, bytes: u64) -> Jit {
        self.max_workspace = bytes;
        self.cache = Cache::new(self.cache.is_on());
        self
    }

    /// The most steps a `while` loop of the functions compiled from now on
    /// takes ([`gradlift_lang::interp::DEFAULT_MAX_ITERATIONS`] unless
    /// set): a call whose loop is still going after that many fails with
    /// [`crate::Status::IterationLimit`]. The limit is compiled into the
    /// code.
    pub fn max_iterations(mut self, steps: u64) -> Jit {
        self.max_iterations = steps;
        self.cache = Cache::new(self.cache.is_on());
        self
    }

    /// The threads the functions compiled from now on run their large matrix
    /// products (`matmul` of 2^24 multiply–adds or more,
    /// `kernels::splits`) and their long loops of reals (`split.rs`: maps
    /// and reduces of 114,689 elements or more, in fixed chunks) on: a pool
    /// of `n` threads owned by this `Jit`, created when it first compiles
    /// a function with a product, a map or a reduce (default: the cores of
    /// this machine; 0 is taken as 1). With 1, everything runs on the
    /// calling thread, in the function itself. The results are the same
    /// bits for any `n` (the product kernel splits the result, not the
    /// sums; a loop's chunks depend on its length alone), and a compiled
    /// function is safe to call from many threads at once either way.
    pub fn threads(mut self, n: usize) -> Jit {
        self.threads = n.max(1);
        self.pool = Default::default();
        self.cache = Cache::new(self.cache.is_on());
        self
    }

    /// Keeps (or, with `false`, stops keeping) what is compiled through
    /// [`Jit::cached`], emptying the cache either way. On by default.
    /// Changing any other setting empties it too: an entry is always code
    /// compiled under the settings the `Jit` has.
    pub fn cache(mut self, on: bool) -> Jit {
        self.cache = Cache::new(on);
        self
    }

    /// What `build` returns, kept under `key` for as long as this `Jit`
    /// lives (or until [`Jit::clear_cache`]), or a clone of what an earlier
    /// build under `key` returned. `key` must name every input of `build`
    /// — the program's text and everything derived from it (see
    /// [`crate::cache`]); `gradlift`'s `Program::parse_in` and the
    /// `compile` methods of its functions build their keys from the text,
    /// the function, what is derived and the options.
    pub fn cached<T, E>(&self, key: &str, build: impl FnOnce() -> Result<T, E>) -> Result<T, E>
    where
        T: Clone + Send + Sync + 'static,
    {
        self.cache.get_or_build(key, build)
    }

    /// The compile cache's hits, misses and entries.
    pub fn cache_stats(&self) -> CacheStats {
        self.cache.stats()
    }

    /// Keeps the native code of [`Jit::compile_keyed`] in files under
    /// `dir` (created when first written) as well, so that another
    /// process, or this one after [`Jit::clear_cache`], loads it instead
    /// of compiling it. An entry is used only when everything its code
    /// depends on is the same: the key, the build of gradlift, the
    /// target and this `Jit`'s settings; a damaged or foreign file is
    /// compiled again and overwritten. The code in `dir` runs in this
    /// process: keep it writable only by those who run it. Nothing is
    /// evicted; delete the directory to empty it.
    pub fn disk_cache(mut self, dir: impl Into<std::path::PathBuf>) -> Jit {
        self.disk = Some(Disk {
            dir: dir.into(),
            stats: Mutex::new(DiskStats::default()),
        });
        self
    }

    /// How the disk cache has been used, if there is one.
    pub fn disk_stats(&self) -> Option<DiskStats> {
        let d = self.disk.as_ref()?;
        Some(*d.stats.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Drops everything the compile cache holds (code still used by a
    /// caller lives on with that caller).
    pub fn clear_cache(&self) {
        self.cache.clear()
    }

    /// The thread pool of the products, created on first use.
    fn pool(&self) -> Result<Arc<Pool>, JitError> {
        if let Some(p) = self.pool.get() {
            return Ok(p.clone());
        }
        let threads = Box::new(
            rayon::ThreadPoolBuilder::new()
                .num_threads(self.threads)
                .thread_name(|i| format!("gradlift-{i}"))
                .build()
                .map_err(|e| {
                    JitError::Codegen(format!("starting {} threads: {e}", self.threads))
                })?,
        );
        let address = &*threads as *const rayon::ThreadPool as usize;
        Ok(self
            .pool
            .get_or_init(|| {
                Arc::new(Pool {
                    _threads: threads,
                    address,
                })
            })
            .clone())
    }

    /// The iteration limit of the functions it compiles.
    pub fn iteration_limit(&self) -> u64 {
        self.max_iterations
    }

    /// The workspace limit of the functions it compiles.
    pub fn workspace_limit(&self) -> u64 {
        self.max_workspace
    }

    /// Runs (or not) Cranelift's verifier on every function compiled.
    pub fn verify(mut self, on: bool) -> Jit {
        self.verify = on;
        self.cache = Cache::new(self.cache.is_on());
        self
    }

    /// The Cranelift IR of `closed` as it is handed to Cranelift (verified
    /// when verification is on), with the source term each group of
    /// instructions comes from as a `;` comment above it.
    pub fn clif(&self, closed: &Closed) -> Result<String, JitError> {
        let mut module = self.object_module()?;
        let Lowering { ctx, labels, .. } =
            self.lower(&mut module, closed, true, true, Some(false))?;
        let labels = labels.unwrap_or_default();
        Ok(format!(
            "; {}: {}\n{}",
            closed.name,
            self.triple(),
            crate::annotate::write_annotated(&ctx.func, &labels)
        ))
    }

    /// The machine code of `closed`, disassembled by Cranelift after
    /// register allocation (its own printer of the instructions it emits).
    pub fn asm(&self, closed: &Closed) -> Result<String, JitError> {
        let mut module = self.object_module()?;
        let Lowering { mut ctx, .. } = self.lower(&mut module, closed, false, true, Some(false))?;
        ctx.set_disasm(true);
        let code = ctx
            .compile(&*self.isa, &mut Default::default())
            .map_err(|e| JitError::Codegen(format!("{:?}", e.inner)))?;
        let text = code.vcode.clone().unwrap_or_default();
        let bytes = code.code_buffer().len();
        Ok(format!(
            "; {}: {}, {bytes} bytes of code\n{text}",
            closed.name,
            self.triple()
        ))
    }

    /// A relocatable object file (ELF on Linux targets) defining each of
    /// `functions` as an exported symbol of its name with the ABI of
    /// `docs/abi.md`. The transcendental functions but `exp` and `tanh`
    /// (inline, with their table as a local data object) are imported as
    /// the C library's `sin`, `cos`, `tan`, `log`, `pow` (link with `-lm`).
    pub fn object(&self, functions: &[&Closed]) -> Result<Vec<u8>, JitError> {
        let mut module = self.object_module()?;
        define_exp_data(&mut module)?;
        for closed in functions {
            let Lowering { mut ctx, bound, .. } =
                self.lower(&mut module, closed, false, true, None)?;
            let id = module
                .declare_function(&closed.name, Linkage::Export, &ctx.func.signature)
                .map_err(|e| JitError::Codegen(e.to_string()))?;
            module
                .define_function(id, &mut ctx)
                .map_err(|e| JitError::Codegen(format!("{e:?}")))?;
            module.clear_context(&mut ctx);
            self.define_bound(&mut module, &closed.name, &bound)?;
        }
        module
            .finish()
            .emit()
            .map_err(|e| JitError::Codegen(e.to_string()))
    }

    /// Defines `NAME_workspace(const int64_t *args) -> int64_t`: the bytes
    /// of workspace a call of `NAME` with these size words needs at most
    /// ([`WorkspaceBound`], saturating at `i64::MAX`), or -1 without a
    /// bound.
    fn define_bound<M: Module>(
        &self,
        module: &mut M,
        name: &str,
        bound: &WorkspaceBound,
    ) -> Result<(), JitError> {
        let mut ctx = module.make_context();
        ctx.func.signature.params.push(AbiParam::new(types::I64));
        ctx.func.signature.returns.push(AbiParam::new(types::I64));
        let mut fctx = FunctionBuilderContext::new();
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        b.seal_block(entry);
        let args = b.block_params(entry)[0];
        let v = match bound.formula() {
            Some(bytes) => crate::workspace::emit(&mut b, bytes, args),
            None => b.ins().iconst(types::I64, -1),
        };
        b.ins().return_(&[v]);
        b.finalize(module.target_config());
        if self.verify {
            cranelift_codegen::verify_function(&ctx.func, self.isa.flags())
                .map_err(|e| JitError::Verifier(e.to_string()))?;
        }
        let id = module
            .declare_function(
                &format!("{name}_workspace"),
                Linkage::Export,
                &ctx.func.signature,
            )
            .map_err(|e| JitError::Codegen(e.to_string()))?;
        module
            .define_function(id, &mut ctx)
            .map_err(|e| JitError::Codegen(format!("{e:?}")))?;
        module.clear_context(&mut ctx);
        Ok(())
    }

    /// A module writing an object file, whose imports are C symbols.
    fn object_module(&self) -> Result<ObjectModule, JitError> {
        let builder = ObjectBuilder::new(self.isa.clone(), "gradlift", default_libcall_names())
            .map_err(|e| JitError::Codegen(e.to_string()))?;
        Ok(ObjectModule::new(builder))
    }

    /// A module for code of this process, whose imports are
    /// [`symbols`]`(pool)`.
    fn module(&self, pool: Option<&Pool>) -> JITModule {
        let mut builder = JITBuilder::with_isa(self.isa.clone(), default_libcall_names());
        for (name, address) in symbols(pool) {
            builder.symbol(name, address);
        }
        JITModule::new(builder)
    }

    /// Lowers `closed` into a context of `module` (with the labels of its
    /// terms when `labels`). The libm functions are imported by the names
    /// `module` resolves: the JIT's shims, or (`c_names`) the C library's;
    /// the runtime's functions (`runtime.rs`) when `runtime` is given, and
    /// the thread pool (through [`POOL_SYMBOL`]) when it is `Some(true)`.
    fn lower<M: Module>(
        &self,
        module: &mut M,
        closed: &Closed,
        labels: bool,
        c_names: bool,
        runtime: Option<bool>,
    ) -> Result<Lowering, JitError> {
        let closed = &crate::eta::expand(closed);
        let mut ctx = module.make_context();
        ctx.func.signature = entry_signature(module);
        ctx.func.name = UserFuncName::user(0, 0);
        let mut fctx = FunctionBuilderContext::new();
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let used = prims_used(&closed.body);
        let (calls, exp_table) = declare_imports(module, b.func, &used, c_names)?;
        // The schedule of binomial checkpointing and the matrix kernel run
        // in this process's runtime: an object file has none to link
        // against (the printed stages show the imports).
        let mut imports = Vec::new();
        if runtime.is_some() {
            let sigs = crate::runtime::signatures(module.isa().default_call_conv());
            for ((name, _), sig) in crate::runtime::RUNTIME.iter().zip(sigs) {
                let id = module
                    .declare_function(name, Linkage::Import, &sig)
                    .map_err(|e| JitError::Codegen(e.to_string()))?;
                imports.push(module.declare_func_in_func(id, b.func));
            }
        }
        let pool = match runtime {
            Some(true) => {
                let id = module
                    .declare_data(POOL_SYMBOL, Linkage::Import, false, false)
                    .map_err(|e| JitError::Codegen(e.to_string()))?;
                Some(module.declare_data_in_func(id, b.func))
            }
            _ => None,
        };
        let runtime = crate::runtime::Runtime::new(&imports, pool);
        // Loops are split across the pool when it has threads to split
        // them across (`split.rs`).
        let mut sink = ModuleKernels {
            module,
            used,
            verify: self.verify,
            flags: self.isa.flags().clone(),
            defined: Vec::new(),
        };
        let kernels: Option<&mut dyn crate::split::KernelSink> =
            match pool.is_some() && self.threads > 1 {
                true => Some(&mut sink),
                false => None,
            };
        let lowered = lower_function(
            &mut b,
            closed,
            calls,
            exp_table,
            labels,
            runtime,
            self.max_iterations,
            kernels,
        )?;
        let (module, kernels) = (sink.module, sink.defined);
        b.finalize(module.target_config());
        lowered.elide(&mut ctx.func);
        let crate::lower::Lowered { labels, bound, .. } = lowered;
        if self.verify {
            cranelift_codegen::verify_function(&ctx.func, self.isa.flags())
                .map_err(|e| JitError::Verifier(e.to_string()))?;
        }
        Ok(Lowering {
            ctx,
            labels,
            bound,
            kernels,
        })
    }

    /// Compiles `closed` to native code.
    pub fn compile(&self, closed: &Closed) -> Result<Compiled, JitError> {
        Ok(self.compile_entry(closed, None)?.0)
    }

    /// Compiles `closed` to native code, and with `key`, the entry of the
    /// disk cache holding that code (`None` when it cannot be stored).
    pub(crate) fn compile_entry(
        &self,
        closed: &Closed,
        key: Option<String>,
    ) -> Result<(Compiled, Option<crate::disk::Entry>), JitError> {
        if !self.host {
            return Err(JitError::Codegen(format!(
                "code for `{}` cannot run in this process: write an object file instead",
                self.triple()
            )));
        }
        // The pool exists once a function of this `Jit` multiplies
        // matrices, and lives as long as any of them.
        let pool = match self.threads > 1 && (uses_matmul(&closed.body) || splits(&closed.body)) {
            true => Some(self.pool()?),
            false => None,
        };
        let mut module = self.module(pool.as_deref());
        let Lowering {
            mut ctx,
            bound,
            mut kernels,
            ..
        } = self.lower(&mut module, closed, false, false, Some(pool.is_some()))?;
        let id = module
            .declare_function(&closed.name, Linkage::Export, &ctx.func.signature)
            .map_err(|e| JitError::Codegen(e.to_string()))?;
        kernels.push(crate::disk::define(&mut module, id, &mut ctx)?);
        module.clear_context(&mut ctx);
        let sig = Signature {
            params: closed.params.clone(),
            ret: closed.ret.clone(),
            size_vars: closed.size_vars.clone(),
        };
        let entry = key.and_then(|key| {
            crate::disk::Entry::new(
                key,
                &closed.name,
                &sig,
                &bound,
                pool.is_some(),
                module.declarations(),
                &kernels,
            )
        });
        let compiled = self.finish(module, id, sig, closed.name.to_string(), bound, pool)?;
        Ok((compiled, entry))
    }

    /// The compiled function of `module`'s entry point `id`, once its
    /// relocations are applied.
    fn finish(
        &self,
        mut module: JITModule,
        id: cranelift_module::FuncId,
        sig: Signature,
        name: String,
        bound: WorkspaceBound,
        pool: Option<Arc<Pool>>,
    ) -> Result<Compiled, JitError> {
        module
            .finalize_definitions()
            .map_err(|e| JitError::Codegen(e.to_string()))?;
        let code = module.get_finalized_function(id);
        // SAFETY: the function was built with the signature of `RawFn`.
        let raw = unsafe { std::mem::transmute::<*const u8, RawFn>(code) };
        Ok(Compiled {
            _module: Arc::new(CodeOwner(Mutex::new(Some(module)))),
            raw,
            sig,
            name,
            bound,
            max_workspace: self.max_workspace,
            pool: Mutex::new(Vec::new()),
            _threads: pool,
        })
    }

    /// Compiles the function `closed()` builds, through the disk cache
    /// when there is one ([`Jit::disk_cache`]): the code stored under
    /// `key` if it is there (and `closed` is not called), or else the
    /// code compiled now, stored under `key`. `key` names everything
    /// `closed()` depends on (the program's text, what is derived from it
    /// and how); the cache adds the build of gradlift and this `Jit`'s
    /// settings. Without a disk cache, `self.compile(&closed()?)`.
    pub fn compile_keyed<E: From<JitError>>(
        &self,
        key: &str,
        closed: impl FnOnce() -> Result<Closed, E>,
    ) -> Result<Compiled, E> {
        let Some(disk) = &self.disk else {
            return Ok(self.compile(&closed()?)?);
        };
        let key = self.disk_key(key);
        match crate::disk::load(&disk.dir, &key) {
            crate::disk::Lookup::Found(entry) => {
                if let Some(compiled) = self.load(&entry) {
                    disk.count(|s| &mut s.hits);
                    return Ok(compiled);
                }
                disk.count(|s| &mut s.damaged);
            }
            crate::disk::Lookup::Damaged => disk.count(|s| &mut s.damaged),
            crate::disk::Lookup::Missing => {}
        }
        disk.count(|s| &mut s.misses);
        let (compiled, entry) = self.compile_entry(&closed()?, Some(key))?;
        match entry {
            Some(entry) => match crate::disk::store(&disk.dir, &entry) {
                Ok(()) => disk.count(|s| &mut s.writes),
                Err(_) => disk.count(|s| &mut s.failed_writes),
            },
            None => disk.count(|s| &mut s.failed_writes),
        }
        Ok(compiled)
    }

    /// The compiled function of a stored entry, or `None` if this process
    /// cannot define it.
    pub(crate) fn load(&self, entry: &crate::disk::Entry) -> Option<Compiled> {
        let pool = match entry.pool {
            true => Some(self.pool().ok()?),
            false => None,
        };
        let mut module = self.module(pool.as_deref());
        let names: Vec<&str> = symbols(pool.as_deref()).iter().map(|s| s.0).collect();
        let id = entry.define(&mut module, &names)?;
        self.finish(
            module,
            id,
            entry.sig.clone(),
            entry.name.clone(),
            entry.bound.clone(),
            pool,
        )
        .ok()
    }

    /// The key of the disk cache for the caller's `key`: with the build
    /// of gradlift and every setting of this `Jit` that changes the code.
    fn disk_key(&self, key: &str) -> String {
        let isa_flags: Vec<String> = self.isa.isa_flags().iter().map(|v| v.to_string()).collect();
        format!(
            "build {}\ntarget {}\nflags {}\nisa {}\nsplits {}\niterations {}\n{}",
            crate::disk::BUILD_ID,
            self.triple(),
            self.isa.flags(),
            isa_flags.join(" "),
            self.threads > 1,
            self.max_iterations,
            key
        )
    }
}

/// A function lowered into a context of its module: its labels (when
/// asked for), its workspace bound, and the kernels of its split loops,
/// already defined in the module.
struct Lowering {
    ctx: Context,
    labels: Option<Labels>,
    bound: WorkspaceBound,
    kernels: Vec<crate::disk::Defined>,
}

/// The symbols the code of this process imports, with their addresses:
/// the shims, the runtime, the table of `exp` and, with `pool`, the word
/// holding the pool's address.
fn symbols(pool: Option<&Pool>) -> Vec<(&'static str, *const u8)> {
    let mut symbols = Vec::new();
    if let Some(pool) = pool {
        symbols.push((POOL_SYMBOL, &pool.address as *const usize as *const u8));
    }
    for p in gradlift_lang::Prim::ALL {
        if let gradlift_lang::prim::Lowering::Call { shim, symbol, .. } = p.info().lowering {
            symbols.push((symbol, shim.address()));
        }
    }
    symbols.extend(crate::runtime::RUNTIME);
    symbols.push((
        EXP_TABLE_SYMBOL,
        gradlift_lang::exp::DATA.as_ptr() as *const u8,
    ));
    symbols
}

/// The signature of a compiled function's entry point (`abi.rs`): six
/// words in, a status out.
pub(crate) fn entry_signature<M: Module>(module: &M) -> cranelift_codegen::ir::Signature {
    let mut sig = module.make_signature();
    sig.params.extend((0..6).map(|_| AbiParam::new(types::I64)));
    sig.returns.push(AbiParam::new(types::I64));
    sig
}

/// Defines the data object the code of `exp` and `tanh` reads in an object
/// file ([`gradlift_lang::exp::DATA`]), once per module: the functions that
/// use either refer to it by name, so the code and its table travel
/// together.
fn define_exp_data<M: Module>(module: &mut M) -> Result<(), JitError> {
    let id = module
        .declare_data(EXP_TABLE_SYMBOL, Linkage::Local, false, false)
        .map_err(|e| JitError::Codegen(e.to_string()))?;
    let mut data = DataDescription::new();
    data.define(exp_table_bytes().into_boxed_slice());
    data.set_align(16);
    module
        .define_data(id, &data)
        .map_err(|e| JitError::Codegen(e.to_string()))
}

/// Owns the module whose memory holds the code; frees it when the last
/// [`Compiled`] using it is dropped.
struct CodeOwner(Mutex<Option<JITModule>>);

impl Drop for CodeOwner {
    fn drop(&mut self) {
        if let Some(module) = self.0.get_mut().ok().and_then(Option::take) {
            // SAFETY: no function pointer into the module outlives its
            // owner: `Compiled` holds the owner, and `raw()` is documented
            // to be valid only while its `Compiled` lives.
            unsafe { module.free_memory() };
        }
    }
}

/// Buffers reused across calls.
#[derive(Default)]
struct Workspace {
    memory: Vec<u64>,
    /// The sizes the memory was last sized for by the bound (none before
    /// the first call).
    bound_sizes: Option<Vec<i64>>,
    sizes: Vec<Option<i64>>,
    words: Vec<i64>,
    inputs: Vec<Vec<f64>>,
    out: Vec<f64>,
}

impl Workspace {
    /// Replaces the memory by `bytes` (rounded up to words) of fresh zeroed
    /// memory, not a resize: the old contents are dead (freed first), and
    /// the allocator's zeroed pages are only made resident as the code
    /// touches them.
    fn replace_memory(&mut self, bytes: u64) -> Result<(), CallError> {
        self.memory = Vec::new();
        self.memory = zeroed_words(bytes.div_ceil(8)).ok_or(CallError::OutOfMemory { bytes })?;
        Ok(())
    }
}

/// `n` zeroed words, or `None` if the allocator refuses them (rather than
/// aborting the process, as `vec![0; n]` would). The pages are zeroed by
/// the allocator, so they become resident only as they are touched.
fn zeroed_words(n: u64) -> Option<Vec<u64>> {
    let n = usize::try_from(n).ok()?;
    if n == 0 {
        return Some(Vec::new());
    }
    let layout = std::alloc::Layout::array::<u64>(n).ok()?;
    // SAFETY: `layout` has a non-zero size.
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) } as *mut u64;
    if ptr.is_null() {
        return None;
    }
    // SAFETY: `ptr` was allocated by the global allocator with the layout
    // of `n` words, all of them initialized (zero).
    Some(unsafe { Vec::from_raw_parts(ptr, n, n) })
}

/// A compiled function. `Send + Sync`: calls from several threads each
/// take their own workspace from a pool.
pub struct Compiled {
    /// Keeps the code alive: it is freed with the last owner.
    _module: Arc<CodeOwner>,
    raw: RawFn,
    sig: Signature,
    name: String,
    bound: WorkspaceBound,
    /// The largest workspace the safe calls allocate, in bytes.
    max_workspace: u64,
    pool: Mutex<Vec<Workspace>>,
    /// The thread pool the code's matrix products and split loops run on,
    /// whose word the code reads through [`POOL_SYMBOL`].
    _threads: Option<Arc<Pool>>,
}

impl Compiled {
    /// The native entry point (ABI in `docs/abi.md`). It is valid while
    /// `self` lives.
    pub fn raw(&self) -> RawFn {
        self.raw
    }

    /// The workspace a call needs at most, as a function of the sizes
    /// (derived when the function was compiled): `workspace_bound().at(sizes)`
    /// bytes are enough for a call at `sizes` (the size words of the ABI), so a
    /// caller of [`Compiled::raw`] can allocate once and never see the
    /// status `WorkspaceTooSmall`. The safe calls allocate that much before
    /// the first call at new sizes.
    pub fn workspace_bound(&self) -> &WorkspaceBound {
        &self.bound
    }

    /// The checked signature: parameters, result, size variables (the
    /// order of the size words of the ABI).
    pub fn signature(&self) -> &Signature {
        &self.sig
    }

    /// Calls the function on values (a size parameter as a whole real).
    /// Allocates the result; [`Compiled::call_into`] reuses one.
    pub fn call(&self, args: &[Value]) -> Result<Value, CallError> {
        let mut out = Value::Real(0.0);
        self.call_into(args, &mut out)?;
        Ok(out)
    }

    /// Calls the function on values and writes the result into `out`.
    /// When `out` already has the result's shape and does not share its
    /// arrays and tuples (the result of an earlier call at the same sizes,
    /// say), it is overwritten in place: once warm, such a call allocates
    /// nothing on the heap. Otherwise `out` is replaced by a new value.
    pub fn call_into(&self, args: &[Value], out: &mut Value) -> Result<(), CallError> {
        let mut ws = self.take_workspace();
        let r = self.call_values(&mut ws, args, out);
        self.pool.lock().expect("pool").push(ws);
        r
    }

    fn call_values(
        &self,
        ws: &mut Workspace,
        args: &[Value],
        out: &mut Value,
    ) -> Result<(), CallError> {
        let vars = &self.sig.size_vars;
        let mut sizes = std::mem::take(&mut ws.sizes);
        if !crate::bind::bind(&self.sig, args, &mut sizes) {
            // The general solver, which also explains a mismatch.
            let bound =
                bind_sizes(&self.name, &self.sig, args).map_err(|e| CallError::Arguments(e.0))?;
            sizes.clear();
            sizes.extend(vars.iter().map(|v| Some(bound[v])));
        }
        let mut words = std::mem::take(&mut ws.words);
        words.clear();
        words.extend(sizes.iter().map(|s| s.unwrap_or(0)));
        ws.sizes = sizes;
        let values = self
            .sig
            .params
            .iter()
            .zip(args)
            .filter(|((_, t), _)| t.is_some());
        ws.inputs.resize_with(values.clone().count(), Vec::new);
        for (buf, (_, v)) in ws.inputs.iter_mut().zip(values) {
            buf.clear();
            flatten_into(v, buf);
        }
        let n_sizes = words.len();
        let r = self.check_sizes(&words).and_then(|()| {
            flat_len(&self.sig.ret, vars, &words).ok_or(CallError::Status(Status::SizeOverflow))
        });
        words.extend(ws.inputs.iter().map(|d| d.as_ptr() as i64));
        ws.words = words;
        let n = r?;
        let mut data = std::mem::take(&mut ws.out);
        let r = self
            .size_result(&mut data, n)
            .and_then(|()| self.execute(ws, &mut data));
        if r.is_ok() {
            let mut at = 0;
            let sizes = &ws.words[..n_sizes];
            crate::bind::fill(out, &self.sig.ret, vars, sizes, &data, &mut at);
        }
        ws.out = data;
        r
    }

    /// Calls the function on flat data: `sizes` gives every size variable,
    /// `inputs` every value parameter's reals (row-major, tuples
    /// flattened), `out` receives the result's reals. Checks that every
    /// buffer has the length the sizes imply. Allocates nothing once warm.
    pub fn call_flat(
        &self,
        sizes: &[i64],
        inputs: &[&[f64]],
        out: &mut [f64],
    ) -> Result<(), CallError> {
        let mut ws = self.take_workspace();
        let r = self.run(&mut ws, sizes, inputs, out);
        self.pool.lock().expect("pool").push(ws);
        r
    }

    /// Calls the function on borrowed arguments — shapes and slices, no
    /// [`Value`] trees ([`crate::typed`]) — and writes the result's reals
    /// into `out` (row-major, tuples component by component: for a
    /// gradient, the value, then each cotangent). The size variables come
    /// from the shapes; a shape that does not fit is an
    /// [`CallError::Arguments`] naming the parameter. `out` must hold
    /// [`Compiled::result_len`] reals. Reads the arguments in place and
    /// allocates nothing once warm.
    pub fn call_args(&self, args: &[crate::typed::Arg], out: &mut [f64]) -> Result<(), CallError> {
        let mut ws = self.take_workspace();
        let r = self.run_args(&mut ws, args, |want, _| {
            if want == Some(out.len()) {
                Ok(out)
            } else {
                Err(CallError::Arguments(format!(
                    "the result buffer holds {} reals, the result `{}` has {want:?} at these sizes",
                    out.len(),
                    self.sig.ret
                )))
            }
        });
        self.pool.lock().expect("pool").push(ws);
        r
    }

    /// [`Compiled::call_args`] into a buffer it sizes: `out` is resized
    /// to the result's length (within the workspace limit), and `sizes`
    /// receives the size variables the shapes gave (in the signature's
    /// order), to read the result's shapes by. Binds the shapes once.
    pub fn call_args_resizing(
        &self,
        args: &[crate::typed::Arg],
        out: &mut Vec<f64>,
        sizes: &mut Vec<i64>,
    ) -> Result<(), CallError> {
        let mut ws = self.take_workspace();
        let r = self.run_args(&mut ws, args, |want, bound| {
            sizes.clear();
            sizes.extend_from_slice(bound);
            let n = want.ok_or(CallError::Status(Status::SizeOverflow))?;
            self.size_result(out, n)?;
            Ok(out)
        });
        self.pool.lock().expect("pool").push(ws);
        r
    }

    /// Makes `out` `n` zeros long. The result is memory a call allocates
    /// too: within the limit, and refused rather than aborting when the
    /// allocator says no.
    fn size_result(&self, out: &mut Vec<f64>, n: usize) -> Result<(), CallError> {
        let bytes = (n as u64).saturating_mul(8);
        if bytes > self.max_workspace {
            return Err(CallError::OutputLimit {
                needed: bytes,
                limit: self.max_workspace,
            });
        }
        out.clear();
        out.try_reserve_exact(n)
            .map_err(|_| CallError::OutOfMemory { bytes })?;
        out.resize(n, 0.0);
        Ok(())
    }

    /// The size variables (in the signature's order) the shapes of `args`
    /// give, checked as [`Compiled::call_args`] checks them.
    pub fn sizes_of(&self, args: &[crate::typed::Arg]) -> Result<Vec<i64>, CallError> {
        let mut sizes = Vec::new();
        crate::typed::bind_shapes(&self.name, &self.sig, args, &mut sizes)
            .map_err(CallError::Arguments)?;
        Ok(sizes.into_iter().map(|s| s.unwrap_or(0)).collect())
    }

    /// The number of reals of the result at `sizes`, or `None` when it
    /// does not fit in memory.
    pub fn result_len(&self, sizes: &[i64]) -> Option<usize> {
        flat_len(&self.sig.ret, &self.sig.size_vars, sizes)
    }

    /// Binds `args`' shapes, asks `output` for the result buffer (given
    /// the result's length at the sizes, and the sizes), and runs.
    fn run_args<'o>(
        &self,
        ws: &mut Workspace,
        args: &[crate::typed::Arg],
        output: impl FnOnce(Option<usize>, &[i64]) -> Result<&'o mut [f64], CallError>,
    ) -> Result<(), CallError> {
        let mut sizes = std::mem::take(&mut ws.sizes);
        let bound = crate::typed::bind_shapes(&self.name, &self.sig, args, &mut sizes);
        ws.words.clear();
        ws.words.extend(sizes.iter().map(|s| s.unwrap_or(0)));
        ws.sizes = sizes;
        bound.map_err(CallError::Arguments)?;
        let vars = self.sig.size_vars.len();
        self.check_sizes(&ws.words)?;
        let out = output(self.result_len(&ws.words[..vars]), &ws.words[..vars])?;
        // The shapes were checked against the types, so each argument has
        // its parameter's length. Arrays are read in place; scalars and
        // tuples are laid out in the workspace's input buffers first (all
        // of them, before any address is taken).
        let values = || {
            self.sig
                .params
                .iter()
                .zip(args)
                .filter(|((_, ty), _)| ty.is_some())
                .map(|(_, arg)| arg)
        };
        let copied = values().filter(|a| !a.in_place()).count();
        if ws.inputs.len() < copied {
            ws.inputs.resize_with(copied, Vec::new);
        }
        for (buf, arg) in ws.inputs.iter_mut().zip(values().filter(|a| !a.in_place())) {
            buf.clear();
            arg.write_slots(buf);
        }
        let mut copies = ws.inputs.iter();
        for arg in values() {
            let at = if arg.in_place() {
                arg.slots().as_ptr()
            } else {
                copies
                    .next()
                    .expect("one buffer per copied argument")
                    .as_ptr()
            };
            ws.words.push(at as i64);
        }
        self.execute(ws, out)
    }

    fn take_workspace(&self) -> Workspace {
        self.pool.lock().expect("pool").pop().unwrap_or_default()
    }

    fn run(
        &self,
        ws: &mut Workspace,
        sizes: &[i64],
        inputs: &[&[f64]],
        out: &mut [f64],
    ) -> Result<(), CallError> {
        let vars = &self.sig.size_vars;
        self.check_sizes(sizes)?;
        let params = || {
            self.sig
                .params
                .iter()
                .filter_map(|(n, t)| t.as_ref().map(|t| (n, t)))
        };
        if inputs.len() != params().count() {
            return Err(CallError::Arguments(format!(
                "{} inputs given, {} expected",
                inputs.len(),
                params().count()
            )));
        }
        for ((name, ty), data) in params().zip(inputs) {
            let want = crate::layout::strict_flat_len(ty, vars, sizes);
            if want != Some(data.len()) {
                return Err(CallError::Arguments(format!(
                    "`{name}` has {} reals, its type `{ty}` needs {want:?} at these sizes",
                    data.len()
                )));
            }
        }
        ws.words.clear();
        ws.words.extend_from_slice(sizes);
        ws.words.extend(inputs.iter().map(|d| d.as_ptr() as i64));
        self.execute(ws, out)
    }

    /// One value per size variable, each in `0 ..= 2⁴⁰`.
    fn check_sizes(&self, sizes: &[i64]) -> Result<(), CallError> {
        let vars = &self.sig.size_vars;
        if sizes.len() != vars.len() {
            return Err(CallError::Arguments(format!(
                "{} sizes given, {} expected",
                sizes.len(),
                vars.len()
            )));
        }
        if let Some(k) = sizes
            .iter()
            .position(|&s| !(0..=crate::abi::MAX_LEN).contains(&s))
        {
            let why = if sizes[k] < 0 {
                "a size is a whole number ≥ 0".to_string()
            } else {
                format!(
                    "compiled code takes sizes up to 2^40 = {}",
                    crate::abi::MAX_LEN
                )
            };
            return Err(CallError::Arguments(format!(
                "size `{}` is {}: {why}",
                vars[k], sizes[k]
            )));
        }
        Ok(())
    }

    /// Runs the code on the argument words in `ws.words` (sizes, then
    /// pointers to data of the checked lengths): the workspace sized by
    /// the bound at new sizes, then grown and the code called again while
    /// it asks for more (without a bound, or past the limit).
    fn execute(&self, ws: &mut Workspace, out: &mut [f64]) -> Result<(), CallError> {
        // The workspace the bound asks for, allocated once for the sizes
        // (at sizes seen before, one comparison).
        let vars = self.sig.size_vars.len();
        let limit = self.max_workspace;
        if ws.bound_sizes.as_deref() != Some(&ws.words[..vars]) {
            if let Some(need) = self.bound.at(&ws.words[..vars]) {
                if need <= limit && need > ws.memory.len() as u64 * 8 {
                    ws.replace_memory(need)?;
                }
            }
            let seen = ws.bound_sizes.get_or_insert_with(Vec::new);
            seen.clear();
            seen.extend_from_slice(&ws.words[..vars]);
        }
        // Without a bound, or past the limit, the code says what it needs.
        loop {
            let mut info = 0i64;
            // SAFETY: the buffers have the lengths the ABI requires (checked
            // above), and the code checks every other access.
            let status = unsafe {
                (self.raw)(
                    ws.words.as_ptr(),
                    out.as_mut_ptr(),
                    out.len() as i64,
                    ws.memory.as_mut_ptr() as *mut u8,
                    (ws.memory.len() * 8) as i64,
                    &mut info,
                )
            };
            match Status::from_code(status) {
                Some(Status::Ok) => return Ok(()),
                Some(Status::WorkspaceTooSmall) => {
                    // Doubling stops at the limit; only a call that needs
                    // more than the limit fails.
                    let have = ws.memory.len() as u64 * 8;
                    let doubled = (2 * have).min(limit);
                    let needed = (info as u64).max(doubled).max(1024);
                    if info as u64 > limit || have >= limit {
                        return Err(CallError::WorkspaceLimit {
                            needed: (info as u64).max(have + 1),
                            limit,
                        });
                    }
                    ws.replace_memory(needed)?;
                }
                Some(s) => return Err(CallError::Status(s)),
                None => unreachable!("the generated code returns a status, got {status}"),
            }
        }
    }
}

#[allow(dead_code)]
fn assert_send_sync() {
    fn check<T: Send + Sync>() {}
    check::<Compiled>();
}
