//! The builtins: `iota`, `replicate`, `concat`, `take`, `drop`, the
//! shifts, `len`; a stored `concat` writes a map part straight into its
//! result.

use super::*;
use gradlift_lang::kernels::Layout;

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
            Builtin::Get => {
                let i = self.integer(&args[1])?;
                let known = match self.type_of(&args[0])? {
                    Type::Array(_, n) => self.below.get(&i) == Some(&n),
                    _ => false,
                };
                if crate::arrays::fused_elements_cannot_fail(&args[0]) {
                    let s = self.source(&args[0])?;
                    let p = if known {
                        i
                    } else {
                        self.checked_position(s.len(), i)
                    };
                    return self.element(&s, p);
                }
                let a = self.array(&args[0])?;
                // An element of `iota(n)` indexing an array of size `n` is
                // in range: no check, no wrap.
                let p = if known {
                    i
                } else {
                    self.checked_position(a.len, i)
                };
                let stride = unchecked_bytes(self.b, &a.elem);
                let addr = self.element_addr(a.ptr, p, stride);
                Ok(load(self.b, addr, &a.elem))
            }
            Builtin::Gather => self.gather(args),
            Builtin::Transpose => self.transpose(args),
            Builtin::MatMul => self.matmul(args),
            Builtin::ReduceByIndex(op) => self.reduce_by_index(op, args),
        }
    }

    /// An integer operand.
    fn integer(&mut self, e: &Expr) -> Result<Value, JitError> {
        match self.lower(e)? {
            Values::Int(i) => Ok(i),
            _ => Err(JitError::Internal("an index that is not an integer".into())),
        }
    }

    /// `gather(A, I)`: a loop over `I`, each element of `A` it names
    /// copied after its bounds check. Indices a fused map computes are
    /// computed in the loop.
    fn gather(&mut self, args: &[Expr]) -> Result<Values, JitError> {
        let a = self.array(&args[0])?;
        let idx = self.elements(&args[1])?;
        let Type::Array(elem, _) = self.type_of(&args[0])? else {
            return Err(JitError::Internal("gather of a non-array".into()));
        };
        let Type::Array(_, m) = self.type_of(&args[1])? else {
            return Err(JitError::Internal("gather with non-array indices".into()));
        };
        let counted = self.counts().array(&m, &elem);
        let len = idx.len();
        let (ptr, stride) = self.alloc_array(len, &a.elem, counted)?;
        let from_stride = unchecked_bytes(self.b, &a.elem);
        self.for_range(len, &mut |t, j| {
            let Values::Int(i) = t.element(&idx, j)? else {
                return Err(JitError::Internal("an index that is not an integer".into()));
            };
            let p = t.checked_position(a.len, i);
            let from = t.element_addr(a.ptr, p, from_stride);
            let v = load(t.b, from, &a.elem);
            let to = t.element_addr(ptr, j, stride);
            t.store(to, &v, &a.elem)
        })?;
        Ok(Values::Array(ArrayVal {
            ptr,
            len,
            elem: a.elem,
        }))
    }

    /// `transpose(c, M)`: new memory for the c columns of M, filled by a
    /// loop over the columns and, in it, over the rows.
    fn transpose(&mut self, args: &[Expr]) -> Result<Values, JitError> {
        let c = self.count(&args[0])?;
        let m = self.array(&args[1])?;
        let Shape::Array(row_len, inner) = &m.elem else {
            return Err(JitError::Internal("transpose of a non-matrix".into()));
        };
        let same = self.b.ins().icmp(IntCC::Equal, *row_len, c);
        self.check(same, Status::LengthMismatch, c);
        let inner = (**inner).clone();
        let Type::Array(row_ty, r) = self.type_of(&args[1])? else {
            return Err(JitError::Internal("transpose of a non-array".into()));
        };
        let Type::Array(elem_ty, columns) = *row_ty else {
            return Err(JitError::Internal("transpose of a non-matrix".into()));
        };
        let out_ty = Type::array(*elem_ty, r);
        let counted = self.counts().array(&columns, &out_ty);
        let out_elem = Shape::Array(m.len, Box::new(inner.clone()));
        let (ptr, stride) = self.alloc_array(c, &out_elem, counted)?;
        let inner_bytes = unchecked_bytes(self.b, &inner);
        let row_bytes = unchecked_bytes(self.b, &m.elem);
        let rows = m.len;
        self.for_range(c, &mut |t, j| {
            let column = t.element_addr(ptr, j, stride);
            let first = t.element_addr(m.ptr, j, inner_bytes);
            t.for_range(rows, &mut |u, i| {
                let from = u.element_addr(first, i, row_bytes);
                let v = load(u.b, from, &inner);
                let to = u.element_addr(column, i, inner_bytes);
                u.store(to, &v, &inner)
            })
        })?;
        Ok(Values::Array(ArrayVal {
            ptr,
            len: c,
            elem: out_elem,
        }))
    }

    /// `matmul(n, A, B)`: the operands stored (rows contiguous), an operand
    /// written `transpose(c, M)` read from `M` by columns in place
    /// ([`gradlift_lang::kernels::operand`], the interpreter's decision too);
    /// the product new workspace memory written by the runtime's matrix
    /// kernel (the interpreter's, so both round alike). Every row length is
    /// checked against the counts the kernel is given: it reads `m·k` reals
    /// of `A`'s memory and `k·n` of `B`'s.
    fn matmul(&mut self, args: &[Expr]) -> Result<Values, JitError> {
        let Some(rt) = self.runtime else {
            return unsupported(
                "`matmul` outside the JIT (it calls the matrix kernel of gradlift's runtime)",
            );
        };
        let n = self.count(&args[0])?;
        let a = self.operand(&args[1])?;
        let bm = self.operand(&args[2])?;
        // A's columns (when it has rows, or is read by columns) are B's
        // rows; B's columns are `n`.
        let zero = self.b.ins().iconst(types::I64, 0);
        let (a_rows, a_cols, b_rows, b_cols) = (a.1, a.2, bm.1, bm.2);
        let a_known = match a.3 {
            Layout::Rows => self.b.ins().icmp(IntCC::NotEqual, a_rows, zero),
            Layout::Columns => self.b.ins().icmp(IntCC::Equal, zero, zero),
        };
        let same = self.b.ins().icmp(IntCC::Equal, a_cols, b_rows);
        let unknown = self.b.ins().icmp_imm_s(IntCC::Equal, a_known, 0);
        let fits = self.b.ins().bor(same, unknown);
        self.check(fits, Status::LengthMismatch, b_rows);
        // A stored B of no rows says nothing of its columns.
        let same = self.b.ins().icmp(IntCC::Equal, b_cols, n);
        let fits = match bm.3 {
            Layout::Rows => {
                let empty = self.b.ins().icmp_imm_s(IntCC::Equal, b_rows, 0);
                self.b.ins().bor(same, empty)
            }
            Layout::Columns => same,
        };
        self.check(fits, Status::LengthMismatch, n);
        let Type::Array(_, m_size) = self.type_of(&args[1])? else {
            return Err(JitError::Internal("matmul of a non-array".into()));
        };
        let n_size = self.count_size(&args[0])?;
        let row_ty = Type::array(Type::Real, n_size);
        let counted = self.counts().array(&m_size, &row_ty);
        let out_elem = Shape::Array(n, Box::new(Shape::Real));
        let (ptr, _) = self.alloc_array(a_rows, &out_elem, counted)?;
        let pool = self.pool_address(rt);
        let layouts = i64::from(a.3 == Layout::Columns) | (i64::from(bm.3 == Layout::Columns) << 1);
        let layouts = self.b.ins().iconst(types::I64, layouts);
        self.b.ins().call(
            rt.matmul,
            &[a_rows, b_rows, n, a.0, bm.0, ptr, layouts, pool],
        );
        Ok(Values::Array(ArrayVal {
            ptr,
            len: a_rows,
            elem: out_elem,
        }))
    }

    /// An operand of `matmul`: the address of its stored matrix, the
    /// operand's rows and columns (a stored matrix of no rows gives its
    /// row length as it is; the caller does not read it), and its layout.
    /// A matrix of reals read by columns has its row length checked
    /// against the count `transpose` gives.
    fn operand(&mut self, e: &Expr) -> Result<(Value, Value, Value, Layout), JitError> {
        let (m, layout, c) = gradlift_lang::kernels::operand(e);
        let stored = self.array(m)?;
        let Shape::Array(cols, inner) = &stored.elem else {
            return Err(JitError::Internal("matmul of a non-matrix".into()));
        };
        if !matches!(**inner, Shape::Real) {
            return Err(JitError::Internal("matmul of a matrix of non-reals".into()));
        }
        let cols = *cols;
        Ok(match c {
            None => (stored.ptr, stored.len, cols, layout),
            Some(c) => {
                let c = self.count(c)?;
                let same = self.b.ins().icmp(IntCC::Equal, cols, c);
                let empty = self.b.ins().icmp_imm_s(IntCC::Equal, stored.len, 0);
                let fits = self.b.ins().bor(same, empty);
                self.check(fits, Status::LengthMismatch, c);
                (stored.ptr, c, stored.len, layout)
            }
        })
    }

    /// The elements of `e` as a loop reads them: computed in the loop when
    /// a fused map computes them and cannot fail (so no error changes
    /// place), else stored.
    fn elements<'e>(&mut self, e: &'e Expr) -> Result<Source<'e>, JitError> {
        if crate::arrays::fused_elements_cannot_fail(e) {
            return self.source(e);
        }
        let a = self.array(e)?;
        let stride = unchecked_bytes(self.b, &a.elem);
        Ok(Source::Array(a, stride))
    }

    /// `reduce_by_index(D, op, I, V)`: the bins are new workspace memory,
    /// filled from `D` (a `replicate` written in place fills them without
    /// being stored itself), and each value is combined into its bin
    /// there, in place, in the order of the indices. Indices and values a
    /// fused map computes are computed in the loop.
    fn reduce_by_index(
        &mut self,
        op: gradlift_lang::Prim,
        args: &[Expr],
    ) -> Result<Values, JitError> {
        let ty = self.type_of(&args[0])?;
        let counted = self.counts().bytes(&ty);
        let (ptr, len, shape, stride) = match &args[0].kind {
            ExprKind::Builtin(Builtin::Replicate, rep) => {
                let n = self.count(&rep[0])?;
                let v = self.lower(&rep[1])?;
                let Some(shape) = v.shape() else {
                    return unsupported("bins of conditions");
                };
                let (ptr, stride) = self.alloc_array(n, &shape, counted)?;
                self.for_range(n, &mut |t, i| {
                    let at = t.element_addr(ptr, i, stride);
                    t.store(at, &v, &shape)
                })?;
                (ptr, n, shape, stride)
            }
            _ => {
                let dest = self.array(&args[0])?;
                let (ptr, stride) = self.alloc_array(dest.len, &dest.elem, counted)?;
                let bytes = self.b.ins().imul(dest.len, stride);
                self.copy(ptr, dest.ptr, bytes)?;
                (ptr, dest.len, dest.elem, stride)
            }
        };
        let idx = self.elements(&args[1])?;
        let vals = self.elements(&args[2])?;
        let m = idx.len();
        let same = self.b.ins().icmp(IntCC::Equal, m, vals.len());
        self.check(same, Status::LengthMismatch, m);
        self.for_range(m, &mut |t, j| {
            let Values::Int(i) = t.element(&idx, j)? else {
                return Err(JitError::Internal("an index that is not an integer".into()));
            };
            let v = t.element(&vals, j)?;
            let p = t.checked_position(len, i);
            let bin = t.element_addr(ptr, p, stride);
            t.combine_into(op, bin, &v, &shape)
        })?;
        Ok(Values::Array(ArrayVal {
            ptr,
            len,
            elem: shape,
        }))
    }

    /// `*bin = *bin op v` for every real of an element of `shape` (the
    /// lengths of `v`'s arrays checked against it).
    fn combine_into(
        &mut self,
        op: gradlift_lang::Prim,
        bin: Value,
        v: &Values,
        shape: &Shape,
    ) -> Result<(), JitError> {
        match (v, shape) {
            (Values::Real(y), Shape::Real) => {
                let x = self.b.ins().load(types::F64, mem(), bin, 0);
                let calls = &self.calls;
                let lookup = |q: gradlift_lang::Prim| calls[&q];
                let r = crate::prims::lower_prim(self.b, &lookup, self.exp_table, op, &[x, *y]);
                self.b.ins().store(mem(), r, bin, 0);
                Ok(())
            }
            (Values::Tuple(vs), Shape::Tuple(ss)) if vs.len() == ss.len() => {
                let mut b = bin;
                for (v, s) in vs.iter().zip(ss) {
                    self.combine_into(op, b, v, s)?;
                    let k = unchecked_bytes(self.b, s);
                    b = self.b.ins().iadd(b, k);
                }
                Ok(())
            }
            (Values::Array(a), Shape::Array(len, elem)) => {
                let own = Shape::Array(a.len, Box::new(a.elem.clone()));
                self.check_same_shape(&own, shape, Status::ShapeMismatch)?;
                let stride = unchecked_bytes(self.b, elem);
                let elem = (**elem).clone();
                let a = a.clone();
                self.for_range(*len, &mut |t, i| {
                    let b = t.element_addr(bin, i, stride);
                    let from = t.element_addr(a.ptr, i, stride);
                    let v = load(t.b, from, &elem);
                    t.combine_into(op, b, &v, &elem)
                })
            }
            _ => Err(JitError::Internal(
                "reduce_by_index of another layout".into(),
            )),
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
