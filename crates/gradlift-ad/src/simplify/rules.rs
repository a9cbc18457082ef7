//! The rewrite rules of partial evaluation (§5.1) and Figure 12, as one
//! table of named rules, and the count of how often each fired.
//!
//! Each [`Rule`] is a row: a name (kebab-case, as printed in statistics),
//! the identity it applies (`lhs ⇝ rhs`) and its guard. The matching itself
//! lives in `pe.rs` (the partial-evaluation steps), `rewrite.rs` (the
//! algebraic and array rules, applied by partial evaluation as it builds
//! each node), `dce.rs` and `cse.rs`.
//!
//! Most rules do not raise the cost of Figure 11 (MOVES, ADDS, MULTS,
//! NLOPS): they remove operations, replace an array traversal by a
//! cheaper one, or only rename. Five trade a few arithmetic operations per
//! element for not writing an array and reading it back, which Figure 11
//! does not count: `map-split`, `derived-component`, `rebuilt-component`,
//! `inline-iota` (for maps of ranges) and `inline-cheap-map`. Notation: `0ₛ` is a structural zero
//! ([`gradlift_lang::Span::STRUCTURAL`]), `Fill(c)` an array whose
//! elements are all the constant `c` — `map (x. c) A`,
//! `map2 (a, b. c) A B` or `replicate(n, c)` — so `OnesLike(A)` is
//! `Fill(1)` and `ZerosLike(A)` is `Fill(0)`.
//!
//! Results are bit for bit those of the reference interpreter, except
//! where a guard says otherwise: rules about a structural zero may change
//! the sign of a zero or a NaN the zero would have produced (`0ₛ * inf`),
//! which is what "structural" licenses, and [`super::Options::algebraic`]
//! extends the same licence to zeros the user wrote. A rule that drops a
//! computation drops the run-time error it could raise too (the length
//! check of a `map2` whose argument is no longer read, an index into an
//! empty constant array), as dead-code elimination does.

use std::fmt;

macro_rules! rules {
    ($($(#[doc = $doc:literal])* $rule:ident = $name:literal, $identity:literal, $guard:literal;)*) => {
        /// A named rewrite rule.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Rule {
            $($(#[doc = $doc])* $rule,)*
        }

        impl Rule {
            /// Every rule, in table order.
            pub const ALL: &'static [Rule] = &[$(Rule::$rule,)*];

            /// The table row.
            pub const fn info(self) -> RuleInfo {
                match self {
                    $(Rule::$rule => RuleInfo { name: $name, identity: $identity, guard: $guard },)*
                }
            }
        }
    };
}

/// One row of the rule table.
#[derive(Clone, Copy, Debug)]
pub struct RuleInfo {
    /// The rule's name.
    pub name: &'static str,
    /// The identity, `lhs ⇝ rhs`.
    pub identity: &'static str,
    /// When it applies (empty: always).
    pub guard: &'static str,
}

rules! {
    // ---- Partial evaluation (§5.1; Figure 12 "Inlining and forward substitution")
    /// β-reduction of a lambda applied where it is written.
    Beta = "beta",
        "(fun (x₁..xₙ) -> e)(e₁..eₙ) ⇝ let x₁ = e₁ in … let xₙ = eₙ in e", "";
    /// Inlining of a function value (a `let`-bound continuation) at its
    /// application; a function applied twice has its body inlined twice,
    /// which costs what the two calls cost.
    InlineFun = "inline-fun",
        "let f = fun (x⃗) -> e in … f(a⃗) … ⇝ … (let x⃗ = a⃗ in e) …", "";
    /// Forward substitution of variables and constants.
    ForwardSubst = "forward-subst",
        "let x = y in e ⇝ e[y/x];  let x = c in e ⇝ e[c/x]", "";
    /// A tuple bound by `let` becomes one binding per component.
    TupleSplit = "tuple-split",
        "let p = (e₁..eₙ) in e ⇝ let p₁ = e₁ in … e[(p₁..pₙ)/p];  let (x₁..xₙ) = (e₁..eₙ) in e ⇝ let x₁ = e₁ in …", "";
    /// Let normalisation.
    LetFloat = "let-float",
        "let x = (let y = e₁ in e₂) in e₃ ⇝ let y = e₁ in let x = e₂ in e₃;  f(let x = e₁ in e₂) ⇝ let x = e₁ in f(e₂)",
        "not out of a lambda body or a branch of `if`";
    /// Tuple partial evaluation.
    TupleProj = "proj-tuple", "(e₁..eₙ).i ⇝ eᵢ", "";

    // ---- Algebraic simplifications (Figure 12)
    /// A zero annihilates a product.
    ZeroProduct = "zero-product", "0 * e ⇝ 0;  e * 0 ⇝ 0;  0 / e ⇝ 0",
        "the zero is structural, or `algebraic` (0 * inf is nan)";
    /// Negating a structural zero.
    NegZero = "neg-zero", "-0ₛ ⇝ 0ₛ", "the zero is structural";
    /// Zero is the unit of addition.
    AddZero = "add-zero", "0 + e ⇝ e;  e + 0 ⇝ e",
        "the zero is structural or -0.0, or `algebraic` (0.0 + -0.0 is 0.0)";
    /// Subtracting zero.
    SubZero = "sub-zero", "e - 0 ⇝ e",
        "the zero is 0.0 or structural, or `algebraic` (-0.0 - -0.0 is 0.0)";
    /// One is the unit of multiplication.
    MulOne = "mul-one", "1 * e ⇝ e;  e * 1 ⇝ e", "";
    /// Dividing by one.
    DivOne = "div-one", "e / 1 ⇝ e", "";
    /// Constant folding, evaluated as the interpreter does (`Prim::eval_real`).
    ConstFold = "const-fold", "op(c₁..cₙ) ⇝ c", "";

    // ---- Conditionals (Figure 12)
    /// Comparisons of constants, and `and`/`or`/`not` with a known operand.
    CondFold = "cond-fold", "c₁ < c₂ ⇝ true/false;  true and b ⇝ b;  false and b ⇝ false; …", "";
    /// A conditional whose condition is known.
    IfKnown = "if-known", "if true then e₁ else e₂ ⇝ e₁;  if false then e₁ else e₂ ⇝ e₂", "";
    /// A conditional whose branches are the same term.
    IfSame = "if-same", "if c then e else e ⇝ e", "";

    // ---- Functions
    /// η-contraction of a lambda to an operator section or a primitive.
    Eta = "eta", "(x, y. x op y) ⇝ (op);  (x. f(x)) ⇝ f;  (x, y. y op x) ⇝ (op)",
        "the last form only for + and *, which commute bit for bit";

    // ---- Array simplifications (Figure 12 and the rules of App. A.6)
    /// The identity map.
    MapIdentity = "map-identity", "map (x. x) A ⇝ A", "";
    /// A map2 that returns its first argument.
    Map2First = "map2-first", "map2 (a, b. a) A B ⇝ A", "A and B have one length (typing)";
    /// A map2 that returns its second argument.
    Map2Second = "map2-second", "map2 (a, b. b) A B ⇝ B", "A and B have one length (typing)";
    /// A map2 with a constant body.
    Map2Const = "map2-const", "map2 (a, b. c) A B ⇝ map (_. c) A   (map2 (a, b. 1) A B ⇝ OnesLike(A))", "";
    /// A map2 whose body ignores one argument.
    Map2UnusedArg = "map2-unused-arg", "map2 (a, b. e) A B ⇝ map (a. e) A   (b ∉ FV(e); symmetrically for a)", "";
    /// A map2 over a constant array reads the constant instead.
    Map2FillArg = "map2-fill-arg", "map2 (a, b. e) A Fill(c) ⇝ map (a. e[c/b]) A  (either side; c a constant or a variable)", "";
    /// Projecting an array of tuples built elementwise from variables.
    MapProj = "map-proj",
        "map (p. p.i) P ⇝ map2 (a, b. eᵢ) A B   where P = map2 (a, b. (e₀..eₙ)) A B (likewise map)",
        "eᵢ is a variable or a constant and A, B are variables, so nothing is computed twice";
    /// Reading the components of an array of tuples from where they come.
    TupleArg = "tuple-arg",
        "map2 (p, z. e) P Z ⇝ map (z. e[(c₀..cₙ)/p]) Z   where P = map2 (a, b. (c₀..cₙ)) A B;  ⇝ map2 (a, z. e[…a…/p]) A Z when e reads a component that is a",
        "e reads p only as p.i, and those components are constants, variables bound outside, or one parameter of P's function; A, B are variables";
    /// Multiplying by ones.
    Map2MulOnes = "map2-mul-ones", "map2 (*) A OnesLike(B) ⇝ A;  map2 (*) OnesLike(B) A ⇝ A", "";
    /// Multiplying by zeros.
    Map2MulZeros = "map2-mul-zeros", "map2 (*) A ZerosLike(B) ⇝ ZerosLike(B)  (either order)",
        "the zeros are structural, or `algebraic`";
    /// Adding zeros.
    Map2AddZeros = "map2-add-zeros", "map2 (+) A ZerosLike(B) ⇝ A  (either order)",
        "the zeros are structural or -0.0, or `algebraic`";
    /// Subtracting zeros.
    Map2SubZeros = "map2-sub-zeros", "map2 (-) A ZerosLike(B) ⇝ A",
        "the zeros are 0.0 or structural, or `algebraic`";
    /// A product of ones (for `reduce` and `foldl`).
    ReduceMulOnes = "reduce-mul-ones", "reduce (*) z OnesLike(A) ⇝ z   (reduce (*) 1 OnesLike(A) ⇝ 1)", "";
    /// A sum of zeros (for `reduce` and `foldl`).
    ReduceAddZeros = "reduce-add-zeros", "reduce (+) z ZerosLike(A) ⇝ z   (reduce (+) 0 ZerosLike(A) ⇝ 0)",
        "the zeros are structural or -0.0, or `algebraic`, or they are 0.0 and z is a constant other than -0.0";
    /// Shifting a constant array.
    ShiftFill = "shift-fill", "shift1L Fill(c, n+1) ⇝ Fill(c, n);  shift1R likewise   (shift1L OnesLike(n+1) ⇝ OnesLike(n))",
        "the array is written in place (not a shared variable)";
    /// Scanning a constant array with its unit.
    ScanFill = "scan-fill",
        "scanr (*) z OnesLike(n) ⇝ replicate(n+1, z);  scanl likewise;  scanl/scanr (+) z ZerosLike(n) ⇝ replicate(n+1, z)   (scanr (*) 1 OnesLike(n) ⇝ OnesLike(n+1))",
        "the length is known as a size; for zeros, the guard of add-zero";
    /// A fold or scan whose accumulator starts as a structural zero and
    /// stays one (the reverse of a scan whose result has no cotangent).
    ZeroCarry = "zero-carry",
        "foldl f 0ₛ A ⇝ 0ₛ;  scanl f 0ₛ A ⇝ replicate(len A + 1, 0ₛ);  scanr likewise   (0ₛ may be a tuple of them)",
        "f(0ₛ, a) is a structural zero by the rules for 0ₛ (0ₛ·e, e·0ₛ, 0ₛ/e, 0ₛ ± 0ₛ, −0ₛ, through let, tuples, projections and both branches of if), the components of a that A's function makes structural zeros being zeros";
    /// The length of an array computed elementwise, read from the array
    /// it is computed from.
    LenOfOp = "len-of-op",
        "len(map f A) ⇝ len(A);  len(map2 f A B) ⇝ len(A);  len(shift1L A) ⇝ len(A) - 1 (shift1R likewise);  len(scanl f z A) ⇝ len(A) + 1 (scanr likewise);  len(gather(A, I)) ⇝ len(I);  len(reduce_by_index(D, op, I, V)) ⇝ len(D)",
        "A (through these operations) is a variable; the run-time errors of the dropped computation go with it";
    /// A computed index that turns out constant.
    IndexConstant = "index-constant", "A[int(k)] ⇝ A[k]", "k an integer constant";
    /// Indexing a known array.
    IndexKnown = "index-known", "[e₀..eₙ][k] ⇝ eₖ;  Fill(c)[k] ⇝ c;  replicate(n, (c₀..cₘ))[k] ⇝ (c₀..cₘ)", "cᵢ constants (or tuples of them)";
    /// Map fusion (classic array simplification).
    MapFusion = "map-fusion",
        "map (x. e₁) (map2 (y₁, y₂. e₂) A B) ⇝ map2 (y₁, y₂. let x = e₂ in e₁) A B;  map f (map g A) ⇝ map (y. let x = g(y) in f(x)) A",
        "the inner array is written in place (not a shared variable)";

    /// A `map2`'s argument written in place as a `map` or `map2` is
    /// computed in the `map2`'s function.
    Map2ArgFusion = "map2-arg-fusion",
        "map2 f X (map g A) ⇝ map2 (x, a. f(x, g(a))) X A;  map2 f X (map2 g A B) ⇝ map2 (x, q. f(x, g(q.0, q.1))) X (map2 (a, b. (a, b)) A B)  (either position)",
        "the argument is written in place (not a shared variable); f and g are lambdas, neither a zip";
    /// A small function applied to a conditional structural zero is
    /// applied to each branch.
    ZeroSplit = "zero-split",
        "f(…, if c then v else 0ₛ, …) ⇝ if c then f(…, v, …) else f(…, 0ₛ, …)",
        "while fusing a map2's argument (map2-arg-fusion) whose element is that conditional; f has at most 64 nodes";
    /// Adding an array of zeros in one branch.
    AddIntoIf = "add-into-if",
        "map2 (+) S (if c then A else ZerosLike(B)) ⇝ if c then map2 (+) S A else S  (either order, either branch)",
        "S is a variable; the zeros are structural";
    /// Fold fusion: a reduction of a map reads the mapped elements as it
    /// goes instead of building the array.
    FoldFusion = "fold-fusion",
        "reduce f z (map g A) ⇝ foldl (acc, y. f(acc, g(y))) z A (not a reduce in lanes: gradlift_lang::reduce_order);  foldl f z (map g A) likewise;  foldl f z (map2 g A B) ⇝ foldl (acc, q. f(acc, g(q.0, q.1))) z (map2 (a, b. (a, b)) A B)",
        "the map is written in place (not a shared variable); reduce runs left to right from z; a map2 only for foldl (not reduce), when f is a lambda and g's body ends in a map or map2 (its elements are arrays), and never a zip";

    /// Map splitting: each fold reading arrays of a shared array of tuples
    /// computes them itself.
    MapSplit = "map-split",
        "let P = map (x. (e₀..eₙ)) A in C[foldl (a, p. …p.i…) z P, op (q. …q.j…) P] ⇝ let P = map (x. eⱼ) A in C[foldl (a, p. …p…) z (map (x. eᵢ) A), op (q. …q…) P]",
        "every use of P is an array argument whose function only projects it; eᵢ is built by an array operation";

    /// Fold merging: the folds of a block over the same array become one
    /// fold of the tuple of their accumulators.
    FoldMerge = "fold-merge",
        "let r = foldl (a, x. e₁) z₁ A in … C[foldl (b, y. e₂) z₂ A] ⇝ let m = foldl (s, q. (let a = s.0 in let x = q in e₁, let b = s.1 in let y = q in e₂)) (z₁, z₂) A in let r = m.0 in … C[m.1]",
        "both folds in one block, in a binding's value or its body at a position always evaluated with it (through tuples, projections, operands, indexing and the arguments of array operations and builtins; not under a binder or in a branch of if, not inside another such fold); neither reads a name bound after the first; A α-equal; foldl without a schedule, or a reduce folded from the left";

    /// A component of an array of tuples computed from the others where
    /// it is read, instead of being stored.
    DerivedComponent = "derived-component",
        "let P = map (x. (e₀..eₙ)) A in C[op (q. …q.i…) P] ⇝ let P = map (x. (e₀..eₙ without eᵢ)) A in C[op (q. …eᵢ[q.j/eⱼ]…) P]",
        "eᵢ is at most two primitives over constants, variables bound outside the map and at least one component eⱼ that is a variable; every use of P is the array argument of an array operation (P, a projection map of it, or the pairs of such an argument and another array) whose function only projects the tuple, none a reduce (whose accumulator is an element too); the tuple is the element's or a tuple literal in it; each consumer reading q.i computes eᵢ once more per element";

    /// A fold that recomputes a map's elements reads them instead.
    FoldReadsMap = "fold-reads-map",
        "let t = foldl (acc, v. F[E]) z X in … let P = map (v'. E[v'/v]) X in … ⇝ let P = map (v'. E[v'/v]) X in let t = foldl (acc, v. F[v]) z P in …",
        "E calls a transcendental function and cannot fail; v occurs in F only inside E; E mentions nothing bound between the two bindings";

    /// A map over the same arrays as a stored map of tuples, sharing work
    /// with it, becomes one more component of it.
    MapMerge = "map-merge",
        "let P = map (x. (e₀..eₙ)) A in C[map (x'. e) A] ⇝ let P = map (x. (e₀..eₙ, e[x/x'])) A in C[map (g. g.(n+1)) P]  (map2 likewise)",
        "the sibling is evaluated unconditionally after P (not under a lambda or a branch), mentions nothing bound after P, cannot fail, and has a loop or a transcendental call equal (up to names) to one in P's body or in a small value of its lets written out; where P's elements are not tuples, or are read whole somewhere (not only projected, through zips too), P stores the pairs (old element, e) and its uses read map (g. g.0) P";

    /// An array component of an array of tuples rebuilt from the reals it
    /// is made of where it is read, instead of being stored.
    RebuiltComponent = "rebuilt-component",
        "let P = map (x. let s = e in (…, map (a. E[a, s]) W, …)) A in C[op (q. …q.i…) P] ⇝ let P = map (x. let s = e in (…, s)) A in C[op (q. …map (a. E[a, q.k]) W…) P]",
        "W is bound outside the map, or it is the map's element of an array A (a variable) and every consumer reading .i is a map, map2 or foldl, which then reads zip(…, A) with the row as its .1; E is at most two primitives over a, constants, outer variables and at most two reals s bound in the body; or, one level down, the component is map/map2 (g, …. map (a. E) W) D … over an array D the body binds, read as g.j, and D's g.j is stored instead (map (g. g.j) D); the tuple is the element's or a tuple literal in it; every use of P is the array argument of an array operation (P, a projection map of it, or the pairs of such an argument and another array) whose function only projects that tuple, none a reduce";

    /// An operand of a matrix product that is a transpose is read in
    /// place by the kernel, never built (`gradlift_lang::kernels::operand`).
    ProductOperand = "product-operand",
        "let t = transpose(c, M) in C[matmul(n, t, B), len(t)] ⇝ let t = transpose(c, M) in C[matmul(n, transpose(c, M), B), c], the let dropped when t is then dead;  len(transpose(c, M)) ⇝ c;  matmul(n, transpose(c, transpose(c', M)), B) ⇝ matmul(n, M, B)  (either operand)",
        "M is a variable; t is then dead where only products read it";
    /// A transpose of a transpose is the matrix.
    TransposeTwice = "transpose-twice",
        "transpose(c, transpose(c', M)) ⇝ M  (or of a variable bound to transpose(c', M))",
        "M is a variable";

    // ---- Clean-up
    /// Dead-code elimination.
    DeadLet = "dead-let", "let x = e₁ in e₂ ⇝ e₂", "x ∉ FV(e₂)";
    /// A real no observable result reads, through array elements and
    /// loop accumulators.
    DeadLeaf = "dead-leaf",
        "… (…, a ⊙ b, …) … ⇝ … (…, 0, …) …",
        "the component's demand is empty: no read of the result, of the arrays whose elements it is, or of the loop accumulators it is carried in, reaches it (see `demand.rs`)";
    /// A map of arithmetic whose length alone is read.
    LengthOnly = "length-only",
        "len(map2 p A B) ⇝ len(A);  … map (_. c) (map2 p A B) … ⇝ … map (_. c) A …  (map p A likewise)",
        "only the length of the map is read (see `demand.rs`); p is an arithmetic primitive, so A has the map's type; A and B have one length (typing)";
    /// Unused components of a tuple-valued binding.
    DeadComponent = "dead-component",
        "let x = (if c then (a₀, a₁) else (b₀, b₁)) in C[x.0] ⇝ let x = (if c then a₀ else b₀) in C[x]",
        "x is only projected, never used whole; every tail of the bound value is a tuple";
    /// Unused components of the tuples a map written in place builds for
    /// the operation it is the argument of.
    DeadElementComponent = "dead-element-component",
        "op (q. C[q.i]) (map (x. (e₀..eₙ)) A) ⇝ op (q. C[q]) (map (x. eᵢ) A)  (map2 likewise; several components kept as a tuple)",
        "the map is written in place as the argument; the operation's function uses its parameter q only as q.i; every tail of the map's body is a tuple";
    /// A component that is one constant in every tuple a map written in
    /// place builds is read as that constant.
    ConstComponent = "const-component",
        "op (q. C[q.i]) (map (x. if c then (…, k, …) else (…, k, …)) A) ⇝ op (q. C[k]) (map (x. …) A)",
        "the map is written in place as the argument; component i of every tail of its body is the constant k (bit for bit, structural or not alike); the operation's function uses q only by projections";
    /// A sum of cotangents moved into the branches that build its operand.
    SumIntoBranches = "sum-into-branches",
        "let x = (if c then (…aᵢ…) else (…bᵢ…)) in C[map2 (+) S x.i] ⇝ let x = (if c then (…map2 (+) S aᵢ…) else (…map2 (+) S bᵢ…)) in C[x.i]",
        "x.i occurs once in C, on every path (not in a lambda or a branch of `if`); S is a variable bound outside the `let`; every tail of the bound value is a tuple (through `let`s and `if`s); every path runs the same additions";
    /// Inlining of a value used once.
    InlineOnce = "inline-once", "let x = e₁ in C[x] ⇝ C[e₁]",
        "x occurs once, not inside a lambda (which would repeat e₁ per element), and e₁ is shallow";
    /// Inlining of an index range at each of its uses.
    InlineIota = "inline-iota", "let x = iota(e) in C[x, x] ⇝ C[iota(e), iota(e)];  likewise let x = map (i. b) iota(e)",
        "e is a size expression (variables, constants, len of a variable, +, -, *); b is at most 12 constants, variables, primitives and ifs; no use is inside a lambda; the native backend computes the elements in the loop that reads them, or the one element an index reads";
    /// Inlining of a cheap map of a variable at each of its uses.
    InlineCheapMap = "inline-cheap-map", "let x = map (a. b) V in C[x, x] ⇝ C[map (a. b) V, map (a. b) V];  likewise let x = map2 (a, b. (a, b)) V W",
        "V is a variable (V and W variables or such maps for the zip); b is at most two of + - * / and negation over a, constants, variables and their projections; no use is inside a lambda; the native backend computes the elements in the loop that reads them";
    /// Common-subexpression elimination.
    Cse = "cse", "let x = e in … e … ⇝ let x = e in … x …", "the free variables of e mean the same at both places";
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.info().name)
    }
}

/// How often each rule fired.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    counts: std::collections::BTreeMap<Rule, usize>,
}

impl Stats {
    /// Records one firing of `rule`.
    pub(crate) fn fire(&mut self, rule: Rule) {
        *self.counts.entry(rule).or_insert(0) += 1;
    }

    /// How often `rule` fired.
    pub fn count(&self, rule: Rule) -> usize {
        self.counts.get(&rule).copied().unwrap_or(0)
    }

    /// How often the rule called `name` fired (0 for an unknown name).
    pub fn count_named(&self, name: &str) -> usize {
        Rule::ALL
            .iter()
            .find(|r| r.info().name == name)
            .map_or(0, |r| self.count(*r))
    }

    /// Every rule that fired, with its count, in table order.
    pub fn fired(&self) -> impl Iterator<Item = (Rule, usize)> + '_ {
        self.counts.iter().map(|(r, n)| (*r, *n))
    }

    /// The number of firings in all.
    pub fn total(&self) -> usize {
        self.counts.values().sum()
    }

    /// Adds the counts of `other`.
    pub fn merge(&mut self, other: &Stats) {
        for (r, n) in other.fired() {
            *self.counts.entry(r).or_insert(0) += n;
        }
    }
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (r, n)) in self.fired().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{r}: {n}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_kebab_case() {
        let mut seen = std::collections::HashSet::new();
        for r in Rule::ALL {
            let name = r.info().name;
            assert!(seen.insert(name), "{name} twice");
            assert!(name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'));
            assert!(r.info().identity.contains('⇝'), "{name} has no identity");
        }
    }
}
