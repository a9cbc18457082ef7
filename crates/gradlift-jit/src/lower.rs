//! Lowering (STYLE 13): a first-order closed term → one Cranelift function.
//!
//! Input: a [`Closed`] term (every function argument of an array operation
//! a lambda, binders unique, only the parameters and size variables free).
//! Output: a function of the [`crate::abi`] signature whose value is the
//! term's. One translator, [`Translator::lower`], maps a term to its
//! [`Values`]: `let`-bound values stay SSA values, tuples are flattened, `if`
//! becomes a merge block with parameters, array operations become loops
//! (`arrays.rs`) whose only Cranelift `Variable`s are the loop-carried state
//! (the index, the accumulator, the workspace's bump pointer). The result
//! is built in the output buffer, checked first to be long enough. With the
//! function comes a bound of the workspace it uses, counted as its
//! allocations are emitted (`workspace.rs`).
//!
//! Every run-time size is checked before memory is touched; a failed check
//! jumps to the function's one failure block, which stores a detail in
//! `*info` and returns the [`Status`]. Constructs not lowered yet are a
//! named [`JitError::Unsupported`], never a panic.

use crate::abi::Status;
use crate::annotate::{one_line, Labels};
use crate::prims::lower_prim;
use crate::values::{load, ArrayVal, Values};
use crate::JitError;
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    types, Block, FuncRef, GlobalValue, InstBuilder, InstructionData, Opcode, Value, ValueDef,
};
use cranelift_frontend::{FunctionBuilder, Variable};
use gradlift_lang::closed::Closed;
use gradlift_lang::deep::guard;
use gradlift_lang::syntax::{ArrayOp, Builtin, Expr, ExprKind, Name, Pattern, Size, Type};
use gradlift_lang::types::Typer;
use std::collections::{HashMap, HashSet};

/// The state of lowering one function.
pub(crate) struct Translator<'a, 'f> {
    pub b: &'a mut FunctionBuilder<'f>,
    /// Values of the variables in scope (binders are unique).
    pub env: HashMap<Name, Values>,
    /// The variables of long `let` chains read from their tape
    /// (`tape.rs`).
    pub taped: HashMap<Name, crate::tape::Slot>,
    /// The changes to `taped`, with what each name had before, for
    /// [`Translator::untape`].
    pub tape_log: Vec<(Name, Option<crate::tape::Slot>)>,
    /// Whether the code has a workspace to allocate from: a kernel
    /// (`split.rs`) has none, its body being made of terms that allocate
    /// nothing, and keeps its chains without a tape.
    pub workspace: bool,
    /// The addresses of the tapes, as last copied, for their stores and
    /// for their loads (`tape.rs`).
    pub tapes: Vec<(Value, Value)>,
    /// The stack slot holding the function's `out` address, and that
    /// address: a long chain writing the result reloads it (`tape.rs`).
    pub out_slot: Option<(cranelift_codegen::ir::StackSlot, Value)>,
    /// Size variables, as `i64`.
    pub sizes: HashMap<Name, Value>,
    /// Types of the variables in scope, for the layouts of loop results.
    pub typer: Typer,
    /// The workspace's bump pointer (an address).
    pub top: Variable,
    /// The workspace the code uses, as a formula in the sizes
    /// (`workspace.rs`).
    pub usage: crate::workspace::Usage,
    /// The size variables, in ABI order.
    pub size_vars: Vec<Name>,
    /// The workspace's base and end addresses.
    pub base: Value,
    pub end: Value,
    /// The failure block: parameters `(status, info)`.
    pub fail: Block,
    /// The function imported for each primitive lowered to a call.
    pub calls: HashMap<gradlift_lang::Prim, FuncRef>,
    /// Where the table of `exp` and `tanh` is (declared when the function
    /// uses either).
    pub exp_table: Option<GlobalValue>,
    /// The imported schedule functions of checkpointed loops (start,
    /// next), where the code runs in this process.
    pub runtime: Option<crate::runtime::Runtime>,
    /// The most steps a `while` loop takes before the call fails.
    pub max_iterations: u64,
    /// Labels of the terms instructions come from, when asked for
    /// (`annotate.rs`).
    pub labels: Option<Labels>,
    /// What the code has established at the current point and may reuse:
    /// see [`Known`].
    pub known: Known,
    /// Overflow checks of byte-count arithmetic not branched on yet: the
    /// conjunction of their conditions. The arithmetic is pure (it cannot
    /// trap or touch memory), so a run of it is checked by one branch,
    /// emitted before its result is used ([`Translator::flush_overflow`]).
    pub overflow: Option<Value>,
    /// The entry check of the workspace (`guard.rs`): what each length
    /// is as a formula in the sizes, the checks each allocation makes,
    /// and whether every allocation's bytes are their formula.
    pub guard: crate::guard::Guard,
    /// The stack slot [`Translator::pin`] copies through, made on first use.
    pub pin_slot: Option<cranelift_codegen::ir::StackSlot>,
    /// The loops being lowered, outermost first: where their copies of
    /// outside values go.
    pub loops: Vec<LoopEntry>,
    /// Terms already computed in the loop of a map before them (folds
    /// riding along it, `horizontal.rs`), by address, and their values.
    pub computed: HashMap<*const Expr, Values>,
    /// Variables bound to an index range (`let r = iota(n)`), and the
    /// range: a loop reading one computes its elements
    /// ([`Translator::source`]).
    pub ranges: HashMap<Name, Expr>,
    /// What is known of integer values: `v ↦ n` when `0 ≤ v < n` for the
    /// size `n` — an element of a range `iota(n)` a loop reads. A computed
    /// index known in range of its array (whose length is its type's size)
    /// needs no check (the lowering of `Builtin::Get`).
    pub below: HashMap<Value, gradlift_lang::Size>,
    /// The size of each range count lowered, by its value.
    pub range_sizes: HashMap<Value, gradlift_lang::Size>,
    /// In the interior of a peeled loop, the side every element takes of
    /// each test its sources make on the index (by the address of the
    /// source), see `Interior` in `arrays.rs`.
    pub interior: HashMap<usize, crate::arrays::Side>,
    /// Where the kernels of loops split across the thread pool are
    /// defined (`split.rs`): present when the code runs in this process
    /// with a pool of more than one thread.
    pub kernels: Option<&'a mut dyn crate::split::KernelSink>,
}

/// The entry of a loop being lowered. A real computed before the loop and
/// read in it is read through a copy made just before the loop
/// ([`Translator::inside`]), as are the loop's bound and the addresses of
/// the arrays it reads element by element and of the array a `map`
/// writes: the register allocator then spills the original, if it lives
/// across a call (a later one, or one in an enclosing loop), once outside
/// the loop, not at each iteration. In a nest, the copy for the inner loop
/// is made from the outer loop's copy.
pub(crate) struct LoopEntry {
    /// The loop's first block: blocks made before it are outside.
    pub first: Block,
    /// The branch into the loop; copies are placed before it.
    pub branch: cranelift_codegen::ir::Inst,
    /// Copies made so far, by original.
    pub copies: HashMap<Value, Value>,
}

/// Facts established by code that dominates the current point: sizes
/// already checked to be in `0 ..= MAX_LEN`, and products already computed
/// with their overflow check. Everything emitted in straight line dominates
/// what follows, so the facts hold until the end of the region they were
/// established in: a loop body or a branch of `if` saves them on entry and
/// restores them on exit ([`Translator::region`]).
#[derive(Clone, Default)]
pub(crate) struct Known {
    /// Sizes checked to be in range.
    pub(crate) in_range: HashSet<Value>,
    /// Products of byte counts computed.
    pub(crate) products: HashMap<(Value, Value), Value>,
    /// `max(v, 0)` of lengths.
    pub(crate) clamped: HashMap<Value, Value>,
    /// Integer constants, one value each.
    constants: HashMap<i64, Value>,
    /// Values of size expressions.
    pub(crate) sizes: HashMap<Size, Value>,
}

pub(crate) fn unsupported<T>(what: impl Into<String>) -> Result<T, JitError> {
    Err(JitError::Unsupported(what.into()))
}

/// Lowers `closed` into the function `b` builds (its signature already set
/// to the ABI's, the functions of `calls` imported into it). With `labels`, instructions are
/// tagged with the terms they come from, whose labels are returned.
#[allow(clippy::too_many_arguments)]
pub(crate) fn lower_function<'a>(
    b: &'a mut FunctionBuilder,
    closed: &Closed,
    calls: HashMap<gradlift_lang::Prim, FuncRef>,
    exp_table: Option<GlobalValue>,
    labels: bool,
    runtime: Option<crate::runtime::Runtime>,
    max_iterations: u64,
    kernels: Option<&'a mut dyn crate::split::KernelSink>,
) -> Result<Lowered, JitError> {
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let params = b.block_params(entry).to_vec();
    let (args, out, out_len, ws, ws_len, info) = (
        params[0], params[1], params[2], params[3], params[4], params[5],
    );
    let fail = b.create_block();
    b.set_cold_block(fail);
    let mut labels = labels.then(Labels::default);
    if let Some(labels) = &mut labels {
        b.set_srcloc(labels.add("the workspace's bounds".to_string()));
    }
    // `info` is read by the failure block only, which every check
    // branches to: kept in a stack slot, not live across the function
    // (a value live across every call of a long function costs the
    // register allocator time quadratic in their number: `tape.rs`).
    let info_slot = b.create_sized_stack_slot(cranelift_codegen::ir::StackSlotData::new(
        cranelift_codegen::ir::StackSlotKind::ExplicitSlot,
        8,
        3,
    ));
    b.ins().stack_store(types::I64, info, info_slot, 0);
    // So is `out`, for a long chain that writes the result at its end
    // (`Translator::let_chain_into`).
    let out_slot = b.create_sized_stack_slot(cranelift_codegen::ir::StackSlotData::new(
        cranelift_codegen::ir::StackSlotKind::ExplicitSlot,
        8,
        3,
    ));
    b.ins().stack_store(types::I64, out, out_slot, 0);
    let top = b.declare_var(types::I64);
    b.def_var(top, ws);
    let zero = b.ins().iconst(types::I64, 0);
    let ws_len = b.ins().smax(ws_len, zero);
    let end = b.ins().iadd(ws, ws_len);
    let mut t = Translator::new(b, fail, top, (ws, end), calls, exp_table);
    t.typer = Typer::new(&closed.size_vars);
    t.size_vars = closed.size_vars.clone();
    t.runtime = runtime;
    t.max_iterations = max_iterations;
    t.labels = labels;
    t.kernels = kernels;
    t.out_slot = Some((out_slot, out));
    for (k, name) in closed.size_vars.iter().enumerate() {
        t.label(|| format!("size `{name}` (args[{k}])"));
        let v =
            t.b.ins()
                .load(types::I64, crate::values::mem(), args, 8 * k as i32);
        let index = t.b.ins().iconst(types::I64, k as i64);
        t.check_size(v, index);
        t.sizes.insert(name.clone(), v);
        t.guard
            .length(v, crate::workspace::Bytes::Len(0, vec![(k, 1)]));
    }
    // The guard (`guard.rs`), filled once the body is lowered.
    // (Placed in the layout after the block that jumps to it, which the
    // jump has just put there, and before the body.)
    let guard_block = t.b.create_block();
    t.b.ins().jump(guard_block, &[]);
    let entry_block = t.b.current_block().expect("the entry block");
    t.b.insert_block_after(guard_block, entry_block);
    let body = t.b.create_block();
    t.b.insert_block_after(body, guard_block);
    t.b.switch_to_block(body);
    let mut word = closed.size_vars.len() as i32;
    for (name, ty) in &closed.params {
        let Some(ty) = ty else { continue };
        t.label(|| format!("parameter `{name}: {ty}` (args[{word}])"));
        let ptr =
            t.b.ins()
                .load(types::I64, crate::values::mem(), args, 8 * word);
        word += 1;
        let shape = t.shape_of_type(ty, true)?;
        t.bytes(&shape)?;
        let v = load(t.b, ptr, &shape);
        t.env.insert(name.clone(), v);
        t.typer.push(name.clone(), ty.clone());
    }
    // The result is built in `out` (checked first to be long enough for
    // its type): a `map` ending the body, or a part of a tuple ending it,
    // writes its elements there instead of into the workspace.
    t.label(|| format!("the result `{}` fits in out", closed.ret));
    let shape = t.shape_of_type(&closed.ret, false)?;
    let bytes = t.bytes(&shape)?;
    let needed = t.b.ins().ushr_imm_s(bytes, 3);
    let fits =
        t.b.ins()
            .icmp(IntCC::SignedLessThanOrEqual, needed, out_len);
    t.check(fits, Status::OutputTooSmall, needed);
    t.label(|| one_line(&closed.body));
    t.lower_into(&closed.body, out, &shape)?;
    let ok = t.b.ins().iconst(types::I64, Status::Ok as i64);
    t.b.ins().return_(&[ok]);
    t.b.switch_to_block(fail);
    t.label(|| "failure: *info = detail, return the status".to_string());
    let status = t.b.append_block_param(fail, types::I64);
    let detail = t.b.append_block_param(fail, types::I64);
    let info = t.b.ins().stack_load(types::I64, types::I64, info_slot, 0);
    t.b.ins().store(crate::values::mem(), detail, info, 0);
    t.b.ins().return_(&[status]);
    let bound = crate::workspace::WorkspaceBound::new(std::mem::take(&mut t.usage).finish());
    t.b.switch_to_block(guard_block);
    t.label(|| "the workspace holds the bound (the allocations' checks)".to_string());
    let elide = match t.guard.elidable(bound.formula()) {
        Some(checks) => {
            let checks = checks.to_vec();
            let sizes: Vec<Value> = closed.size_vars.iter().map(|n| t.sizes[n]).collect();
            let formula = bound.formula().expect("a guarded bound");
            crate::guard::emit(t.b, formula, &sizes, ws_len, fail);
            checks
        }
        None => Vec::new(),
    };
    t.b.ins().jump(body, &[]);
    t.b.seal_all_blocks();
    Ok(Lowered {
        labels: t.labels,
        bound,
        elide,
    })
}

/// A lowered function: its labels (when asked for), its workspace bound,
/// and the allocations' checks the guard stands for (`guard.rs`), to be
/// made plain jumps once the function is finalized ([`Lowered::elide`]).
pub(crate) struct Lowered {
    pub labels: Option<Labels>,
    pub bound: crate::workspace::WorkspaceBound,
    elide: Vec<cranelift_codegen::ir::Inst>,
}

impl Lowered {
    /// Makes each check the guard stands for a jump to where it continues
    /// (the arithmetic feeding it is then dead, and removed by Cranelift).
    pub fn elide(&self, func: &mut cranelift_codegen::ir::Function) {
        for &inst in &self.elide {
            let then = match &func.dfg.insts[inst] {
                InstructionData::Brif { blocks, .. } => blocks[0].block(&func.dfg.value_lists),
                _ => unreachable!("an allocation's check is a branch"),
            };
            func.replace(inst).jump(then, &[]);
        }
    }
}

impl<'a, 'f> Translator<'a, 'f> {
    /// A translator with nothing bound yet, failing to `fail`, its bump
    /// pointer `top` in the workspace `base .. end`: no sizes, no runtime,
    /// no labels, no kernels (the callers set what they have).
    fn new(
        b: &'a mut FunctionBuilder<'f>,
        fail: Block,
        top: Variable,
        (base, end): (Value, Value),
        calls: HashMap<gradlift_lang::Prim, FuncRef>,
        exp_table: Option<GlobalValue>,
    ) -> Translator<'a, 'f> {
        Translator {
            b,
            env: HashMap::new(),
            taped: HashMap::new(),
            tape_log: Vec::new(),
            workspace: true,
            tapes: Vec::new(),
            out_slot: None,
            sizes: HashMap::new(),
            typer: Typer::new(&[]),
            top,
            usage: Default::default(),
            size_vars: Vec::new(),
            base,
            end,
            fail,
            calls,
            exp_table,
            runtime: None,
            max_iterations: 0,
            labels: None,
            known: Known::default(),
            overflow: None,
            guard: Default::default(),
            pin_slot: None,
            loops: Vec::new(),
            computed: HashMap::new(),
            ranges: HashMap::new(),
            below: HashMap::new(),
            range_sizes: HashMap::new(),
            interior: HashMap::new(),
            kernels: None,
        }
    }

    /// A translator for a kernel function (`split.rs`) whose entry block
    /// `b` is in: no sizes, no parameters, no workspace, no runtime. What
    /// a kernel computes cannot fail; its failure block, which nothing
    /// reaches, returns NaN ([`Translator::finish_kernel`]).
    pub(crate) fn for_kernel(
        b: &'a mut FunctionBuilder<'f>,
        calls: HashMap<gradlift_lang::Prim, FuncRef>,
        exp_table: Option<GlobalValue>,
    ) -> Translator<'a, 'f> {
        let fail = b.create_block();
        b.set_cold_block(fail);
        let top = b.declare_var(types::I64);
        let zero = b.ins().iconst(types::I64, 0);
        b.def_var(top, zero);
        let mut t = Translator::new(b, fail, top, (zero, zero), calls, exp_table);
        t.workspace = false;
        t
    }

    /// Ends a kernel: returns `result`, and fills the failure block.
    pub(crate) fn finish_kernel(&mut self, result: Value) {
        self.b.ins().return_(&[result]);
        self.b.switch_to_block(self.fail);
        self.b.append_block_param(self.fail, types::I64);
        self.b.append_block_param(self.fail, types::I64);
        let nan = self.b.ins().f64const(f64::NAN);
        self.b.ins().return_(&[nan]);
        self.b.seal_all_blocks();
    }
}

impl Translator<'_, '_> {
    /// The size variables, for byte counts as formulas
    /// ([`crate::workspace::SizeVars`]).
    pub fn counts(&self) -> crate::workspace::SizeVars<'_> {
        crate::workspace::SizeVars(&self.size_vars)
    }

    /// A copy of `v` made here and not moved: stored to a stack slot and
    /// loaded back. Cranelift places a pure instruction at its first use,
    /// so a copy by arithmetic would sink past a call to where the copy is
    /// needed, and `v` would still be live across the call; stack loads
    /// and stores stay where they are. One store and one load, for a value
    /// leaving a loop: see [`Translator::for_range_out`].
    pub fn pin(&mut self, v: Value) -> Value {
        let slot = self.pin_slot();
        let ty = self.b.func.dfg.value_type(v);
        let at = self.b.ins().stack_addr(types::I64, slot, 0);
        self.b.ins().store(crate::values::mem(), v, at, 0);
        // Through an address the alias analysis cannot relate to the
        // store's: it would forward the stored value to the load.
        let from = crate::values::opaque(self.b, at);
        self.b.ins().load(ty, crate::values::mem(), from, 0)
    }

    /// `v` as read inside the current loop: its reals computed before the
    /// loop replaced by copies made at the loop's entry (see
    /// [`LoopEntry`]). Constants are left alone (they are rematerialized).
    pub fn inside(&mut self, v: Values) -> Values {
        if self.loops.is_empty() {
            return v;
        }
        match v {
            Values::Real(x) => Values::Real(self.entry_copy(x)),
            Values::Tuple(vs) => Values::Tuple(vs.into_iter().map(|v| self.inside(v)).collect()),
            other => other,
        }
    }

    /// `x` as read inside the current loop (see [`LoopEntry`]).
    pub fn entry_copy(&mut self, x: Value) -> Value {
        self.copy_at(self.loops.len(), x)
    }

    /// `x` as read inside the loop at depth `level` (1 is the outermost).
    fn copy_at(&mut self, level: usize, x: Value) -> Value {
        if level == 0 {
            return x;
        }
        let entry = &self.loops[level - 1];
        if let Some(&c) = entry.copies.get(&x) {
            return c;
        }
        let (first, branch) = (entry.first, entry.branch);
        let func = &self.b.func;
        let outside = match func.dfg.value_def(x) {
            ValueDef::Result(inst, _) => {
                !matches!(
                    func.dfg.insts[inst].opcode(),
                    Opcode::F64const | Opcode::Iconst
                ) && func
                    .layout
                    .inst_block(inst)
                    .is_some_and(|b| b.as_u32() < first.as_u32())
            }
            ValueDef::Param(b, _) => b.as_u32() < first.as_u32(),
            _ => false,
        };
        if !outside {
            return x;
        }
        let from_outer = self.copy_at(level - 1, x);
        let slot = self.pin_slot();
        let ty = self.b.func.dfg.value_type(x);
        let mut pos = cranelift_codegen::cursor::FuncCursor::new(self.b.func).at_inst(branch);
        use cranelift_codegen::cursor::Cursor;
        let at = pos.ins().stack_addr(types::I64, slot, 0);
        pos.ins().store(crate::values::mem(), from_outer, at, 0);
        let zero = pos.ins().iconst(types::I64, 0);
        let from = pos.ins().uadd_overflow(at, zero).0;
        let c = pos.ins().load(ty, crate::values::mem(), from, 0);
        self.loops[level - 1].copies.insert(x, c);
        self.guard.same_length(x, c);
        c
    }

    fn pin_slot(&mut self) -> cranelift_codegen::ir::StackSlot {
        *self.pin_slot.get_or_insert_with(|| {
            self.b
                .create_sized_stack_slot(cranelift_codegen::ir::StackSlotData::new(
                    cranelift_codegen::ir::StackSlotKind::ExplicitSlot,
                    8,
                    3,
                ))
        })
    }

    /// Tags the instructions built from now on with a new label (when
    /// labels are asked for).
    pub fn label(&mut self, text: impl FnOnce() -> String) {
        if let Some(labels) = &mut self.labels {
            let loc = labels.add(text());
            self.b.set_srcloc(loc);
        }
    }

    /// Runs `f` with its instructions tagged with a new label, then goes
    /// back to the current one.
    pub fn labelled<T>(
        &mut self,
        text: impl FnOnce() -> String,
        f: impl FnOnce(&mut Self) -> T,
    ) -> T {
        if self.labels.is_none() {
            return f(self);
        }
        let outer = self.b.srcloc();
        self.label(text);
        let r = f(self);
        self.b.set_srcloc(outer);
        r
    }

    /// Runs `f` for code that does not dominate what follows (a loop body,
    /// a branch): the facts it establishes are forgotten after it.
    pub fn region<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        let saved = self.known.clone();
        let r = f(self);
        self.known = saved;
        r
    }

    /// [`Translator::region`] for code that runs more than once (a loop's
    /// step): what it allocates must be released by its end, which the
    /// count of the workspace checks ([`crate::workspace::Usage`]).
    pub fn repeated<T>(&mut self, what: &str, f: impl FnOnce(&mut Self) -> T) -> T {
        let depth = self.usage.depth();
        let r = self.region(f);
        self.usage.step_ends(depth, what);
        r
    }

    /// The integer constant `c` (one value per region).
    /// The address of the thread pool of `rt` (read from its word), or 0
    /// for none.
    pub(crate) fn pool_address(&mut self, rt: crate::runtime::Runtime) -> Value {
        match rt.pool {
            Some(word) => {
                let at = self.b.ins().symbol_value(types::I64, word);
                self.b.ins().load(types::I64, crate::values::mem(), at, 0)
            }
            None => self.iconst(0),
        }
    }

    pub fn iconst(&mut self, c: i64) -> Value {
        if let Some(&v) = self.known.constants.get(&c) {
            return v;
        }
        let v = self.b.ins().iconst(types::I64, c);
        self.known.constants.insert(c, v);
        v
    }

    /// The value of `v` when it is an integer constant.
    pub fn constant(&self, v: Value) -> Option<i64> {
        let dfg = &self.b.func.dfg;
        match dfg.value_def(v) {
            ValueDef::Result(inst, _) => match dfg.insts[inst] {
                InstructionData::UnaryImm {
                    opcode: Opcode::Iconst,
                    imm,
                } => Some(imm.bits()),
                _ => None,
            },
            _ => None,
        }
    }

    /// The type of `e` in the current scope.
    pub fn type_of(&mut self, e: &Expr) -> Result<Type, JitError> {
        self.typer
            .infer(e)
            .map_err(|err| JitError::Internal(format!("type of a subterm: {err}")))
    }

    /// Binds a pattern to a value (and its type, for the typer).
    pub fn bind(&mut self, pat: &Pattern, v: Values, ty: &Type) -> Result<(), JitError> {
        match (pat, v, ty) {
            (Pattern::Var(n, _), v, ty) => {
                if let Some(before) = self.taped.remove(n) {
                    self.tape_log.push((n.clone(), Some(before)));
                }
                self.env.insert(n.clone(), v);
                self.typer.push(n.clone(), ty.clone());
            }
            (Pattern::Wild(_), _, _) => {}
            (Pattern::Tuple(ps, _), Values::Tuple(vs), Type::Tuple(ts))
                if ps.len() == vs.len() && ps.len() == ts.len() =>
            {
                for ((p, v), t) in ps.iter().zip(vs).zip(ts) {
                    self.bind(p, v, t)?;
                }
            }
            _ => return Err(JitError::Internal("a pattern that does not match".into())),
        }
        Ok(())
    }

    /// Lowers a term to its values.
    /// `let pat [: ty] = value in …` up to its body: lowers the value
    /// (labelled with the binding) and binds the pattern.
    pub(crate) fn bind_let(
        &mut self,
        pat: &Pattern,
        ty: Option<&Type>,
        value: &Expr,
    ) -> Result<(), JitError> {
        let t = match ty {
            Some(t) => t.clone(),
            None => self.type_of(value)?,
        };
        let v = self.labelled(
            || one_line(&format_args!("let {pat} = {value}")),
            |t| guard(|| t.lower_inner(value)),
        )?;
        if let (Pattern::Var(name, _), ExprKind::Builtin(Builtin::Iota, _)) = (pat, &value.kind) {
            self.ranges.insert(name.clone(), value.clone());
        }
        self.bind(pat, v, &t)
    }

    pub fn lower(&mut self, e: &Expr) -> Result<Values, JitError> {
        if !self.computed.is_empty() {
            if let Some(v) = self.computed.get(&(e as *const Expr)) {
                return Ok(v.clone());
            }
        }
        match e.kind {
            ExprKind::ArrayOp(..) | ExprKind::If(..) if self.labels.is_some() => {
                self.labelled(|| one_line(e), |t| guard(|| t.lower_inner(e)))
            }
            _ => guard(|| self.lower_inner(e)),
        }
    }

    fn lower_inner(&mut self, e: &Expr) -> Result<Values, JitError> {
        match &e.kind {
            ExprKind::Const(c) => Ok(Values::Real(self.b.ins().f64const(*c))),
            ExprKind::Int(k) => Ok(Values::Int(self.iconst(*k))),
            ExprKind::Literal(_) => Err(JitError::Internal("an unchecked literal".into())),
            ExprKind::Var(n) => {
                if let Some(v) = self.read_from_tape(n) {
                    Ok(v)
                } else if let Some(v) = self.env.get(n) {
                    let v = v.clone();
                    Ok(self.inside(v))
                } else if let Some(&s) = self.sizes.get(n) {
                    Ok(Values::Int(s))
                } else {
                    Err(JitError::Internal(format!("unbound variable `{n}`")))
                }
            }
            ExprKind::Prim(p, args) => {
                let mut xs = Vec::with_capacity(args.len());
                for a in args {
                    match self.lower(a)? {
                        Values::Real(v) | Values::Int(v) | Values::Bool(v) => xs.push(v),
                        _ => return Err(JitError::Internal(format!("operand of `{p}`"))),
                    }
                }
                self.check_operands(*p, &xs);
                let calls = &self.calls;
                let lookup = |q: gradlift_lang::Prim| calls[&q];
                let v = lower_prim(self.b, &lookup, self.exp_table, *p, &xs);
                use gradlift_lang::prim::PrimKind;
                Ok(match p.info().kind() {
                    PrimKind::Real | PrimKind::ToReal => Values::Real(v),
                    PrimKind::Int | PrimKind::ToInt => Values::Int(v),
                    PrimKind::Compare | PrimKind::IntCompare | PrimKind::Logic => Values::Bool(v),
                })
            }
            ExprKind::Let { .. } => self.let_chain(e),
            ExprKind::Tuple(es) => Ok(Values::Tuple(
                es.iter().map(|x| self.lower(x)).collect::<Result<_, _>>()?,
            )),
            ExprKind::Proj(x, k) => match self.lower(x)? {
                Values::Tuple(mut vs) if *k < vs.len() => Ok(vs.swap_remove(*k)),
                _ => Err(JitError::Internal(format!("projection .{k}"))),
            },
            ExprKind::If(c, then, other) => self.lower_if(c, then, other),
            ExprKind::Index(a, k) => {
                if let ExprKind::ArrayOp(op @ (ArrayOp::Scanl | ArrayOp::Scanr), f, args) = &a.kind
                {
                    if (*op, *k) == (ArrayOp::Scanr, 0) || (*op, *k) == (ArrayOp::Scanl, -1) {
                        return self.scan_end(*op, f, args);
                    }
                }
                if crate::arrays::fused_elements_cannot_fail(a) {
                    // A map of a range, say: the one element is computed.
                    return self.index_source(a, *k);
                }
                let a = self.array(a)?;
                self.index(&a, *k)
            }
            ExprKind::ArrayLit(es) => self.array_literal(e, es),
            ExprKind::ArrayOp(op, f, args) => self.array_op(*op, f, args),
            ExprKind::Builtin(bi, args) => self.builtin(*bi, args),
            ExprKind::Lambda(..) => unsupported("a lambda outside an array operation"),
            ExprKind::Derive(d, ..) => Err(JitError::Internal(format!(
                "`{}` before its expansion (the JIT compiles expanded programs)",
                d.name()
            ))),
            ExprKind::Apply(..) => unsupported("a function application"),
            ExprKind::PrimFn(p) => unsupported(format!("the primitive `{p}` as a value")),
        }
    }

    /// The checks an integer operation needs before it is computed: a
    /// divisor that is not 0 (`//`, `%`), a real within the integers
    /// (`int`). [`lower_prim`] computes them assuming these hold.
    fn check_operands(&mut self, p: gradlift_lang::Prim, xs: &[Value]) {
        use gradlift_lang::Prim;
        match p {
            Prim::IDiv | Prim::IMod => {
                if self.constant(xs[1]).is_some_and(|d| d != 0) {
                    return;
                }
                let ok = self.b.ins().icmp_imm_s(IntCC::NotEqual, xs[1], 0);
                let zero = self.iconst(0);
                self.check(ok, Status::DivisionByZero, zero);
            }
            Prim::ToInt => {
                let a = self.b.ins().fabs(xs[0]);
                let limit = self.b.ins().f64const(gradlift_lang::prim::INT_LIMIT);
                // False for NaN.
                let ok = self.b.ins().fcmp(FloatCC::LessThan, a, limit);
                let zero = self.iconst(0);
                self.check(ok, Status::IntOutOfRange, zero);
            }
            _ => {}
        }
    }

    /// Lowers a term that must be an array.
    pub fn array(&mut self, e: &Expr) -> Result<ArrayVal, JitError> {
        match self.lower(e)? {
            Values::Array(a) => Ok(a),
            _ => Err(JitError::Internal("expected an array".into())),
        }
    }

    /// `if`: a block per branch, a merge block whose parameters are the
    /// flattened result.
    fn lower_if(&mut self, c: &Expr, then: &Expr, other: &Expr) -> Result<Values, JitError> {
        self.lower_if_to(c, then, other, &crate::carried::Dest::Value)
    }
}
