//! The runtime: the functions of this process that native code calls,
//! besides the `libm` shims of the primitives.
//!
//! - `gradlift_schedule_start` and `gradlift_schedule_next`, the machine of
//!   a binomial checkpoint schedule (`checkpoint.rs`);
//! - `gradlift_matmul`, the matrix kernel of [`gradlift_lang::kernels`],
//!   which the interpreter calls too, so that `matmul` rounds alike in
//!   every engine.
//!
//! The JIT imports them into every function it compiles; an object file has
//! no runtime to link against, so a program that needs one is refused
//! there, with the construct named.

use cranelift_codegen::ir::{types, AbiParam, FuncRef, Signature};
use cranelift_codegen::isa::CallConv;

/// The symbols and addresses, in the order of [`signatures`].
pub(crate) const RUNTIME: [(&str, *const u8); 3] = [
    (
        "gradlift_schedule_start",
        crate::checkpoint::schedule_start as *const u8,
    ),
    (
        "gradlift_schedule_next",
        crate::checkpoint::schedule_next as *const u8,
    ),
    ("gradlift_matmul", matmul as *const u8),
];

/// The signatures of [`RUNTIME`]'s functions: every argument a 64-bit
/// word, no result.
pub(crate) fn signatures(call_conv: CallConv) -> [Signature; 3] {
    let words = |n: usize| {
        let mut sig = Signature::new(call_conv);
        sig.params.extend((0..n).map(|_| AbiParam::new(types::I64)));
        sig
    };
    [words(5), words(3), words(8)]
}

/// The runtime functions as one function imports them, and the thread
/// pool its products run on.
#[derive(Clone, Copy)]
pub(crate) struct Runtime {
    pub schedule_start: FuncRef,
    pub schedule_next: FuncRef,
    pub matmul: FuncRef,
    /// The address of the `Jit`'s `rayon::ThreadPool` (kept alive by the
    /// compiled function), or 0: products on the calling thread.
    pub pool: i64,
}

impl Runtime {
    /// From the imports, in the order of [`RUNTIME`].
    pub(crate) fn new(imports: &[FuncRef], pool: i64) -> Option<Runtime> {
        match *imports {
            [schedule_start, schedule_next, matmul] => Some(Runtime {
                schedule_start,
                schedule_next,
                matmul,
                pool,
            }),
            _ => None,
        }
    }
}

/// `c = A · B` for `A` (m × k), `B` (k × n), `c` (m × n) row-major, `A`
/// read from `a` by columns when bit 0 of `layouts` is set, `B` from `b`
/// when bit 1 is: [`gradlift_lang::kernels::matmul_raw`], on the threads of
/// `pool` when it is not null.
///
/// # Safety
/// As `matmul_raw`: generated code passes the workspace's operands and a
/// result it allocated, with counts it checked against the operands' row
/// lengths; `pool` is null or the address of a live `rayon::ThreadPool`.
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn matmul(
    m: i64,
    k: i64,
    n: i64,
    a: *const f64,
    b: *const f64,
    c: *mut f64,
    layouts: i64,
    pool: *const rayon::ThreadPool,
) {
    use gradlift_lang::kernels::Layout;
    let (m, k, n) = (m.max(0) as usize, k.max(0) as usize, n.max(0) as usize);
    let layout = |bit: i64| match layouts & bit {
        0 => Layout::Rows,
        _ => Layout::Columns,
    };
    let (la, lb) = (layout(1), layout(2));
    // The pointers cross into the pool's threads as addresses.
    let (a, b, c) = (a as usize, b as usize, c as usize);
    let run = |threads: usize| {
        // SAFETY: as documented.
        unsafe {
            gradlift_lang::kernels::matmul_raw(
                (m, k, n),
                (a as *const f64, la),
                (b as *const f64, lb),
                c as *mut f64,
                threads,
            )
        }
    };
    // SAFETY: a non-null pool is alive while the code that passes it is.
    match unsafe { pool.as_ref() } {
        Some(pool) => pool.install(|| run(pool.current_num_threads())),
        None => run(1),
    }
}
