//! The JIT module and the safe API: [`Jit::compile`] turns a closed term
//! into a [`Compiled`] function; [`Compiled::call`] checks the arguments
//! against the parameter types, converts them to the native layout, runs
//! the code in a pooled workspace (grown and retried when the code asks for
//! more) and converts the result back.

use crate::abi::{RawFn, Status};
use crate::layout::{flat_len, flatten_into, unflatten};
use crate::lower::lower_function;
use crate::prims::Libm;
use crate::{CallError, JitError};
use cranelift_codegen::ir::{types, AbiParam, UserFuncName};
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_codegen::Context;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, Linkage, Module};
use gradlift_ad::inline::Closed;
use gradlift_lang::types::Signature;
use gradlift_lang::value::bind_sizes;
use gradlift_lang::Value;
use std::sync::{Arc, Mutex};

/// The largest workspace [`Compiled::call`] grows to, in bytes (4 GiB).
pub const MAX_WORKSPACE: usize = 1 << 32;

/// A compiler to native code for the host.
pub struct Jit {
    isa: OwnedTargetIsa,
    verify: bool,
}

impl Jit {
    /// A compiler for the host ISA at `opt_level=speed`. The Cranelift
    /// verifier runs on every function in debug builds.
    pub fn new() -> Result<Jit, JitError> {
        let mut flags = settings::builder();
        let set = |f: &mut settings::Builder, k: &str, v: &str| {
            f.set(k, v).map_err(|e| JitError::Codegen(e.to_string()))
        };
        set(&mut flags, "opt_level", "speed")?;
        set(&mut flags, "use_colocated_libcalls", "false")?;
        set(&mut flags, "is_pic", "false")?;
        let isa = cranelift_native::builder()
            .map_err(|e| JitError::Codegen(e.to_string()))?
            .finish(settings::Flags::new(flags))
            .map_err(|e| JitError::Codegen(e.to_string()))?;
        Ok(Jit {
            isa,
            verify: cfg!(debug_assertions),
        })
    }

    /// Runs (or not) Cranelift's verifier on every function compiled.
    pub fn verify(mut self, on: bool) -> Jit {
        self.verify = on;
        self
    }

    /// The Cranelift IR of `closed` (verified when verification is on).
    pub fn clif(&self, closed: &Closed) -> Result<String, JitError> {
        let mut module = self.module();
        let ctx = self.lower(&mut module, closed)?;
        Ok(ctx.func.display().to_string())
    }

    fn module(&self) -> JITModule {
        let mut builder = JITBuilder::with_isa(self.isa.clone(), default_libcall_names());
        for f in Libm::ALL {
            let (name, _, ptr) = f.symbol();
            builder.symbol(name, ptr);
        }
        for (name, ptr) in crate::checkpoint::RUNTIME {
            builder.symbol(name, ptr);
        }
        JITModule::new(builder)
    }

    fn lower(&self, module: &mut JITModule, closed: &Closed) -> Result<Context, JitError> {
        let closed = &crate::eta::expand(closed);
        let mut ctx = module.make_context();
        let ptr = types::I64;
        for _ in 0..6 {
            ctx.func.signature.params.push(AbiParam::new(ptr));
        }
        ctx.func.signature.returns.push(AbiParam::new(ptr));
        ctx.func.name = UserFuncName::user(0, 0);
        let mut fctx = FunctionBuilderContext::new();
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let mut libm = Vec::new();
        for f in Libm::ALL {
            let (name, arity, _) = f.symbol();
            let mut sig = module.make_signature();
            for _ in 0..arity {
                sig.params.push(AbiParam::new(types::F64));
            }
            sig.returns.push(AbiParam::new(types::F64));
            let id = module
                .declare_function(name, Linkage::Import, &sig)
                .map_err(|e| JitError::Codegen(e.to_string()))?;
            libm.push(module.declare_func_in_func(id, b.func));
        }
        let mut runtime = Vec::new();
        let sigs = crate::checkpoint::runtime_signatures(module.isa().default_call_conv());
        for ((name, _), sig) in crate::checkpoint::RUNTIME.iter().zip(sigs) {
            let id = module
                .declare_function(name, Linkage::Import, &sig)
                .map_err(|e| JitError::Codegen(e.to_string()))?;
            runtime.push(module.declare_func_in_func(id, b.func));
        }
        lower_function(&mut b, closed, libm, Some((runtime[0], runtime[1])))?;
        b.finalize(module.target_config());
        if self.verify {
            cranelift_codegen::verify_function(&ctx.func, self.isa.flags())
                .map_err(|e| JitError::Verifier(e.to_string()))?;
        }
        Ok(ctx)
    }

    /// Compiles `closed` to native code.
    pub fn compile(&self, closed: &Closed) -> Result<Compiled, JitError> {
        let mut module = self.module();
        let mut ctx = self.lower(&mut module, closed)?;
        let id = module
            .declare_function(&closed.name, Linkage::Export, &ctx.func.signature)
            .map_err(|e| JitError::Codegen(e.to_string()))?;
        module
            .define_function(id, &mut ctx)
            .map_err(|e| JitError::Codegen(format!("{e:?}")))?;
        module.clear_context(&mut ctx);
        module
            .finalize_definitions()
            .map_err(|e| JitError::Codegen(e.to_string()))?;
        let code = module.get_finalized_function(id);
        // SAFETY: the function was built with the signature of `RawFn`.
        let raw = unsafe { std::mem::transmute::<*const u8, RawFn>(code) };
        Ok(Compiled {
            _module: Arc::new(CodeOwner(Mutex::new(Some(module)))),
            raw,
            sig: Signature {
                params: closed.params.clone(),
                ret: closed.ret.clone(),
                size_vars: closed.size_vars.clone(),
            },
            name: closed.name.to_string(),
            pool: Mutex::new(Vec::new()),
        })
    }
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
    words: Vec<i64>,
    inputs: Vec<Vec<f64>>,
    out: Vec<f64>,
}

/// A compiled function. `Send + Sync`: calls from several threads each
/// take their own workspace from a pool.
pub struct Compiled {
    /// Keeps the code alive: it is freed with the last owner.
    _module: Arc<CodeOwner>,
    raw: RawFn,
    sig: Signature,
    name: String,
    pool: Mutex<Vec<Workspace>>,
}

impl Compiled {
    /// The native entry point (ABI in `docs/abi.md`). It is valid while
    /// `self` lives.
    pub fn raw(&self) -> RawFn {
        self.raw
    }

    /// The checked signature: parameters, result, size variables (the
    /// order of the size words of the ABI).
    pub fn signature(&self) -> &Signature {
        &self.sig
    }

    /// Calls the function on values (a size parameter as a whole real).
    pub fn call(&self, args: &[Value]) -> Result<Value, CallError> {
        let sizes =
            bind_sizes(&self.name, &self.sig, args).map_err(|e| CallError::Arguments(e.0))?;
        let size_values: Vec<i64> = self.sig.size_vars.iter().map(|v| sizes[v]).collect();
        let mut ws = self.take_workspace();
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
        let n = flat_len(&self.sig.ret, &self.sig.size_vars, &size_values)
            .ok_or(CallError::Status(Status::SizeOverflow))?;
        let mut out = std::mem::take(&mut ws.out);
        out.clear();
        out.resize(n, 0.0);
        let inputs = std::mem::take(&mut ws.inputs);
        let slices: Vec<&[f64]> = inputs.iter().map(|v| v.as_slice()).collect();
        let r = self.run(&mut ws, &size_values, &slices, &mut out);
        drop(slices);
        let value = r.map(|()| unflatten(&self.sig.ret, &self.sig.size_vars, &size_values, &out));
        ws.inputs = inputs;
        ws.out = out;
        self.pool.lock().expect("pool").push(ws);
        value
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
            return Err(CallError::Arguments(format!(
                "size `{}` is {}",
                vars[k], sizes[k]
            )));
        }
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
                    let doubled = (2 * ws.memory.len() as u64 * 8).min(MAX_WORKSPACE as u64);
                    let needed = (info as u64).max(doubled).max(1024);
                    if needed > MAX_WORKSPACE as u64 || ws.memory.len() * 8 >= MAX_WORKSPACE {
                        return Err(CallError::WorkspaceLimit(info as u64));
                    }
                    // A fresh zeroed buffer, not a resize: the old contents
                    // are dead, and the allocator's zeroed pages are only
                    // made resident as the code touches them.
                    ws.memory = Vec::new();
                    ws.memory = vec![0; needed.div_ceil(8) as usize];
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
