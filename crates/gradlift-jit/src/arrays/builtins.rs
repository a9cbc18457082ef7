//! The builtins: `iota`, `replicate`, `concat`, `take`, `drop`, the
//! shifts, `len`; a stored `concat` writes a map part straight into its
//! result.

use super::*;

impl Translator<'_, '_> {
    /// The builtins.
    pub fn builtin(&mut self, bi: Builtin, args: &[Expr]) -> Result<Values, JitError> {
        match bi {
            Builtin::Len => {
                let a = self.array(&args[0])?;
                Ok(Values::Int(a.len))
            }
            Builtin::Iota => {
                let n = self.count(&args[0])?;
                let size = self.count_size(&args[0])?;
                let counted = self.counts().array(&size, &Type::Int);
                let (ptr, _) = self.alloc_array(n, &Shape::Int, counted)?;
                self.for_range(n, &mut |t, i| {
                    let offset = t.b.ins().ishl_imm_s(i, 3);
                    let at = t.b.ins().iadd(ptr, offset);
                    t.b.ins().store(mem(), i, at, 0);
                    Ok(())
                })?;
                Ok(Values::Array(ArrayVal {
                    ptr,
                    len: n,
                    elem: Shape::Int,
                }))
            }
            Builtin::Replicate => {
                let n = self.count(&args[0])?;
                let v = self.lower(&args[1])?;
                let Some(shape) = v.shape() else {
                    return unsupported("replicate of a condition");
                };
                let size = self.count_size(&args[0])?;
                let elem = self.type_of(&args[1])?;
                let counted = self.counts().array(&size, &elem);
                let (ptr, stride) = self.alloc_array(n, &shape, counted)?;
                self.for_range(n, &mut |t, i| {
                    let at = t.element_addr(ptr, i, stride);
                    t.store(at, &v, &shape)
                })?;
                Ok(Values::Array(ArrayVal {
                    ptr,
                    len: n,
                    elem: shape,
                }))
            }
            Builtin::Concat => self.concat(args),
            Builtin::Take | Builtin::Drop => {
                let k = self.count(&args[0])?;
                let a = self.array(&args[1])?;
                let fits = self.b.ins().icmp(IntCC::SignedLessThanOrEqual, k, a.len);
                self.check(fits, Status::TakeDropOutOfRange, k);
                Ok(Values::Array(if bi == Builtin::Take {
                    ArrayVal { len: k, ..a }
                } else {
                    let stride = unchecked_bytes(self.b, &a.elem);
                    let ptr = self.element_addr(a.ptr, k, stride);
                    let len = self.b.ins().isub(a.len, k);
                    ArrayVal { ptr, len, ..a }
                }))
            }
            Builtin::Shift1L | Builtin::Shift1R => {
                // An empty array stays empty.
                let a = self.array(&args[0])?;
                let nonempty = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, a.len, 0);
                let dropped = self.b.ins().uextend(types::I64, nonempty);
                let len = self.b.ins().isub(a.len, dropped);
                let ptr = if bi == Builtin::Shift1L {
                    let stride = unchecked_bytes(self.b, &a.elem);
                    self.element_addr(a.ptr, dropped, stride)
                } else {
                    a.ptr
                };
                Ok(Values::Array(ArrayVal { ptr, len, ..a }))
            }
        }
    }

    /// `concat(a, b)`: each part that is a `map`/`map2` writes its elements
    /// into the result directly; the others are copied.
    pub(super) fn concat(&mut self, args: &[Expr]) -> Result<Values, JitError> {
        let mut parts = Vec::with_capacity(2);
        let mut counted = Vec::with_capacity(2);
        for e in &args[..2] {
            parts.push(match &e.kind {
                ExprKind::ArrayOp(op @ (ArrayOp::Map | ArrayOp::Map2), f, xs) => {
                    let (params, body) = self.lambda(f, op.fn_arity())?;
                    let m = self.mapping(params, body, xs)?;
                    counted.push(self.counts().array(&m.size, &m.out_ty));
                    Part::Mapped(m)
                }
                _ => {
                    let ty = self.type_of(e)?;
                    counted.push(self.counts().bytes(&ty));
                    Part::Array(self.array(e)?)
                }
            });
        }
        let (first, second) = (parts[0].len_shape(), parts[1].len_shape());
        self.check_same_shape(first.1, second.1, Status::LengthMismatch)?;
        let shape = first.1.clone();
        let n = self.b.ins().iadd(first.0, second.0);
        let (ptr, stride) = self.alloc_array(n, &shape, crate::workspace::sum(counted))?;
        let mut at = ptr;
        for part in &parts {
            let len = part.len_shape().0;
            match part {
                Part::Mapped(m) => self.write_mapping(m, at, stride)?,
                Part::Array(a) => {
                    let bytes = self.b.ins().imul(a.len, stride);
                    self.copy(at, a.ptr, bytes)?;
                }
            }
            let bytes = self.b.ins().imul(len, stride);
            at = self.b.ins().iadd(at, bytes);
        }
        Ok(Values::Array(ArrayVal {
            ptr,
            len: n,
            elem: shape,
        }))
    }
}

/// A part of a `concat`.
pub(super) enum Part<'e> {
    Mapped(Mapping<'e>),
    Array(ArrayVal),
}

impl Part<'_> {
    pub(super) fn len_shape(&self) -> (Value, &Shape) {
        match self {
            Part::Mapped(m) => (m.len, &m.shape),
            Part::Array(a) => (a.len, &a.elem),
        }
    }
}
