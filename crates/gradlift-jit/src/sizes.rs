//! Sizes, byte counts and the workspace: the value of a size expression,
//! the bytes of a layout (their overflow checks deferred to one branch),
//! the checks that send the code to its failure block with a status, and
//! the bump allocator of the workspace.

use crate::abi::{Status, MAX_LEN};
use crate::lower::{unsupported, Translator};
use crate::values::Shape;
use crate::JitError;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{BlockArg, Inst, InstBuilder, Value};
use gradlift_lang::syntax::{Size, Type};

impl Translator<'_, '_> {
    /// Continues if `ok` (an `i8`) is set; otherwise fails with
    /// `status`. Returns the branch.
    pub fn check(&mut self, ok: Value, status: Status, info: Value) -> Inst {
        let cont = self.b.create_block();
        let code = self.iconst(status as i64);
        let args = [BlockArg::from(code), BlockArg::from(info)];
        let branch = self.b.ins().brif(ok, cont, &[], self.fail, &args);
        self.b.switch_to_block(cont);
        branch
    }

    /// Checks `0 ≤ n ≤ MAX_LEN`.
    pub fn check_size(&mut self, n: Value, info: Value) {
        if self.constant(n).is_some_and(|c| (0..=MAX_LEN).contains(&c))
            || !self.known.in_range.insert(n)
        {
            return;
        }
        let ok = self
            .b
            .ins()
            .icmp_imm_s(IntCC::UnsignedLessThanOrEqual, n, MAX_LEN);
        self.check(ok, Status::BadSize, info);
    }

    /// Adds `ok` to the pending overflow checks.
    pub(crate) fn defer_overflow(&mut self, ok: Value) {
        self.overflow = Some(match self.overflow {
            None => ok,
            Some(all) => self.b.ins().band(all, ok),
        });
    }

    /// Branches to the failure block (`SizeOverflow`) unless every pending
    /// overflow check holds; returns the branch, if there was one.
    pub fn flush_overflow(&mut self) -> Option<Inst> {
        let ok = self.overflow.take()?;
        let zero = self.iconst(0);
        Some(self.check(ok, Status::SizeOverflow, zero))
    }

    /// `a · b` for `a, b ≥ 0`, failing with `SizeOverflow` past 2⁶³ once
    /// the pending checks are flushed.
    pub fn mul_deferred(&mut self, a: Value, b: Value) -> Value {
        if let (Some(x), Some(y)) = (self.constant(a), self.constant(b)) {
            if let Some(p) = x.checked_mul(y).filter(|p| *p >= 0 && x >= 0) {
                return self.iconst(p);
            }
        }
        if let Some(&p) = self.known.products.get(&(a, b)) {
            return p;
        }
        let low = self.mul_checked_emit(a, b);
        self.known.products.insert((a, b), low);
        low
    }

    pub(crate) fn mul_checked_emit(&mut self, a: Value, b: Value) -> Value {
        let high = self.b.ins().umulhi(a, b);
        let low = self.b.ins().imul(a, b);
        let high_zero = self.b.ins().icmp_imm_s(IntCC::Equal, high, 0);
        let low_fits = self
            .b
            .ins()
            .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, low, 0);
        let ok = self.b.ins().band(high_zero, low_fits);
        self.defer_overflow(ok);
        low
    }

    /// Bytes one element of `shape` takes, overflow checked.
    pub fn bytes(&mut self, shape: &Shape) -> Result<Value, JitError> {
        let v = self.bytes_deferred(shape)?;
        self.flush_overflow();
        Ok(v)
    }

    /// [`Translator::bytes`] with its overflow checks pending.
    pub fn bytes_deferred(&mut self, shape: &Shape) -> Result<Value, JitError> {
        Ok(match shape {
            Shape::Real | Shape::Int => self.iconst(8),
            Shape::Tuple(ss) => {
                let mut total = self.iconst(0);
                for s in ss {
                    let k = self.bytes_deferred(s)?;
                    // Each part is below 2⁶³, so the sum fits in 64 bits unsigned.
                    if let (Some(x), Some(y)) = (self.constant(total), self.constant(k)) {
                        if let Some(sum) = x.checked_add(y) {
                            total = self.iconst(sum);
                            continue;
                        }
                    }
                    total = self.b.ins().iadd(total, k);
                    let ok = self
                        .b
                        .ins()
                        .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, total, 0);
                    self.defer_overflow(ok);
                }
                total
            }
            Shape::Array(len, elem) => {
                let k = self.bytes_deferred(elem)?;
                self.mul_deferred(*len, k)
            }
        })
    }

    /// Takes `bytes` from the workspace; `counted` is at least the same
    /// number as a formula in the sizes, and `exact`, when known, is
    /// `bytes` as such a formula, built from the lengths it was computed
    /// from (see `guard.rs`): where it is `counted`, the entry check may
    /// stand for this allocation's check.
    pub fn alloc(
        &mut self,
        bytes: Value,
        counted: crate::workspace::Bytes,
        exact: Option<crate::workspace::Bytes>,
    ) -> Value {
        let covered = crate::guard::covers(exact.as_ref(), &counted);
        self.usage.alloc(counted);
        let top = self.b.use_var(self.top);
        let available = self.b.ins().isub(self.end, top);
        let fits = self
            .b
            .ins()
            .icmp(IntCC::UnsignedLessThanOrEqual, bytes, available);
        let used = self.b.ins().isub(top, self.base);
        let needed = self.b.ins().iadd(used, bytes);
        let branch = self.check(fits, Status::WorkspaceTooSmall, needed);
        self.guard.allocation(covered, [branch]);
        let new_top = self.b.ins().iadd(top, bytes);
        self.b.def_var(self.top, new_top);
        top
    }

    /// The value of a size expression.
    pub fn size(&mut self, s: &Size) -> Result<Value, JitError> {
        if let Some(&v) = self.known.sizes.get(s) {
            return Ok(v);
        }
        let v = self.size_emit(s)?;
        self.known.sizes.insert(s.clone(), v);
        Ok(v)
    }

    pub(crate) fn size_emit(&mut self, s: &Size) -> Result<Value, JitError> {
        let mut acc: Option<Value> = None;
        for (v, &k) in &s.terms {
            let Some(&x) = self.sizes.get(v) else {
                return unsupported(format!("the size variable `{v}` out of scope"));
            };
            let term = if k == 1 {
                x
            } else {
                self.b.ins().imul_imm_s(x, k)
            };
            acc = Some(match acc {
                None => term,
                Some(a) => self.b.ins().iadd(a, term),
            });
        }
        Ok(match acc {
            None => self.iconst(s.constant),
            Some(a) if s.constant == 0 => a,
            Some(a) => self.b.ins().iadd_imm_s(a, s.constant),
        })
    }

    /// The layout of a value of type `ty`. Lengths below 0 (the type of
    /// `shift1L` of an empty array) are 0, or an error when `strict`.
    pub fn shape_of_type(&mut self, ty: &Type, strict: bool) -> Result<Shape, JitError> {
        Ok(match ty {
            Type::Real => Shape::Real,
            Type::Int => Shape::Int,
            Type::Tuple(ts) => Shape::Tuple(
                ts.iter()
                    .map(|t| self.shape_of_type(t, strict))
                    .collect::<Result<_, _>>()?,
            ),
            Type::Array(elem, n) => {
                let len = self.size(n)?;
                let len = if strict {
                    let not_a_size_var = self.iconst(-1);
                    self.check_size(len, not_a_size_var);
                    len
                } else if let Some(&c) = self.known.clamped.get(&len) {
                    c
                } else {
                    let zero = self.iconst(0);
                    let c = self.b.ins().smax(len, zero);
                    self.known.clamped.insert(len, c);
                    c
                };
                // In range (checked) or clamped: `max(0, n)`, the
                // formula's length.
                let formula = self.counts().len(n);
                self.guard.length(len, formula);
                Shape::Array(len, Box::new(self.shape_of_type(elem, strict)?))
            }
            Type::Bool | Type::Fun(..) => return unsupported(format!("a value of type `{ty}`")),
        })
    }
}
