//! The GradBench modules gradlift provides: for each, its program (a file
//! of `crates/gradlift-cli/gradbench/`, built into the binary) and what each
//! GradBench function computes from the program's definitions.

/// What a GradBench function computes from a definition of the module.
#[derive(Clone, Copy, Debug)]
pub enum Derive {
    /// The definition's value.
    Value(&'static str),
    /// The gradient of the definition with respect to some parameters, in
    /// the order of the definition's parameters: shaped as the parameter
    /// for one, flattened (row-major) and concatenated for several.
    Gradient {
        /// The definition.
        function: &'static str,
        /// The parameters.
        wrt: &'static [&'static str],
    },
    /// The gradient with respect to some parameters (in the order of the
    /// definition's parameters), sent as an object from each parameter's
    /// name to its gradient, shaped as the parameter.
    NamedGradient {
        /// The definition.
        function: &'static str,
        /// The parameters.
        wrt: &'static [&'static str],
    },
    /// The value of a definition returning a tuple of arrays whose
    /// elements are all alike (the data repeated), sent as an object: for
    /// component i, `names[i].0` maps to an object holding the first
    /// element under `names[i].1` and the length under `"repeated"`.
    Repeated {
        /// The definition.
        function: &'static str,
        /// For each component, its key and the key of its first element.
        names: &'static [(&'static str, &'static str)],
    },
    /// GradBench ba's sparse Jacobian: the definition returns, for p
    /// observations, one 2 × 15 block each (the derivatives of the
    /// observation's two residuals with respect to its camera's 11
    /// parameters, its point's 3 coordinates and its weight) and the
    /// derivative of each weight's residual. Sent in compressed sparse rows
    /// (`rows`, `cols`, `vals`) of the Jacobian of all 3p residuals with
    /// respect to the 11n + 3m + p unknowns, as GradBench's ba takes it:
    /// its first 30 entries (the first observation's block) and its last.
    BundleJacobian {
        /// The definition.
        function: &'static str,
    },
    /// GradBench ht's dense Jacobian: the definition returns a row per
    /// residual, the derivatives with respect to the residual's two
    /// barycentric coordinates and then to the pose parameters. Sent as
    /// the rows, without the first two columns when the size `u` (the
    /// number of rows of `us`) is 0: the simple variant, which has no
    /// barycentric coordinates.
    HandJacobian {
        /// The definition.
        function: &'static str,
    },
    /// The Newton direction J ⊘ H for one parameter, where J is the
    /// gradient and H the Hessian times a vector of ones (the diagonal of a
    /// diagonal Hessian), by forward over reverse mode.
    NewtonDirection {
        /// The definition.
        function: &'static str,
        /// The parameter.
        wrt: &'static str,
    },
}

/// A module: its program and the functions GradBench calls.
pub struct ModuleSource {
    /// The name GradBench uses.
    pub name: &'static str,
    /// The program.
    pub text: &'static str,
    /// GradBench function names and what they compute.
    pub functions: &'static [(&'static str, Derive)],
    /// How the input GradBench sends becomes the arguments of the
    /// program's definitions, step by step in this order.
    pub input: &'static [Reshape],
}

/// One step from a GradBench input to the program's arguments.
#[derive(Clone, Copy, Debug)]
pub enum Reshape {
    /// A member sent as 2k rows, read as k pairs of rows (row 2i and row
    /// 2i + 1): the same reals in the same order, so the flat buffers do
    /// not change.
    Pair(&'static str),
    /// A member that is an object: its members become members of the
    /// input in its place.
    Lift(&'static str),
    /// A member that is a boolean, read as the integer 0 (false) or 1.
    BoolAsInt(&'static str),
    /// A member no definition reads, removed.
    Drop(&'static str),
}

/// The modules gradlift provides.
pub const MODULES: &[ModuleSource] = &[
    ModuleSource {
        name: "hello",
        text: include_str!("../../gradbench/hello.grad"),
        functions: &[
            ("square", Derive::Value("square")),
            (
                "double",
                Derive::Gradient {
                    function: "square",
                    wrt: &["x"],
                },
            ),
        ],
        input: &[],
    },
    ModuleSource {
        name: "lse",
        text: include_str!("../../gradbench/lse.grad"),
        functions: &[
            ("primal", Derive::Value("primal")),
            (
                "gradient",
                Derive::Gradient {
                    function: "primal",
                    wrt: &["x"],
                },
            ),
        ],
        input: &[],
    },
    ModuleSource {
        name: "llsq",
        text: include_str!("../../gradbench/llsq.grad"),
        functions: &[
            ("primal", Derive::Value("primal")),
            (
                "gradient",
                Derive::Gradient {
                    function: "primal",
                    wrt: &["x"],
                },
            ),
        ],
        input: &[],
    },
    ModuleSource {
        name: "ode",
        text: include_str!("../../gradbench/ode.grad"),
        functions: &[
            ("primal", Derive::Value("primal")),
            (
                "gradient",
                Derive::Gradient {
                    function: "last",
                    wrt: &["x"],
                },
            ),
        ],
        input: &[],
    },
    ModuleSource {
        name: "kmeans",
        text: include_str!("../../gradbench/kmeans.grad"),
        functions: &[
            ("cost", Derive::Value("cost")),
            (
                "dir",
                Derive::NewtonDirection {
                    function: "cost_by_pairs",
                    wrt: "centroids",
                },
            ),
        ],
        input: &[],
    },
    ModuleSource {
        name: "lstm",
        text: include_str!("../../gradbench/lstm.grad"),
        functions: &[
            ("objective", Derive::Value("objective")),
            (
                "jacobian",
                Derive::Gradient {
                    function: "objective",
                    wrt: &["main_params", "extra_params"],
                },
            ),
        ],
        input: &[Reshape::Pair("main_params"), Reshape::Pair("state")],
    },
    ModuleSource {
        name: "gmm",
        text: include_str!("../../gradbench/gmm.grad"),
        functions: &[
            ("objective", Derive::Value("objective")),
            (
                "jacobian",
                Derive::NamedGradient {
                    function: "objective",
                    wrt: &["alpha", "mu", "q", "l"],
                },
            ),
        ],
        input: &[],
    },
    ModuleSource {
        name: "det",
        text: include_str!("../../gradbench/det.grad"),
        functions: &[
            ("primal", Derive::Value("primal")),
            (
                "gradient",
                Derive::Gradient {
                    function: "primal",
                    wrt: &["A"],
                },
            ),
        ],
        input: &[],
    },
    ModuleSource {
        name: "ba",
        text: include_str!("../../gradbench/ba.grad"),
        functions: &[
            (
                "objective",
                Derive::Repeated {
                    function: "residuals",
                    names: &[("reproj_error", "elements"), ("w_err", "element")],
                },
            ),
            (
                "jacobian",
                Derive::BundleJacobian {
                    function: "jacobian_blocks",
                },
            ),
        ],
        input: &[],
    },
    ModuleSource {
        name: "ht",
        text: include_str!("../../gradbench/ht.grad"),
        functions: &[
            ("objective", Derive::Value("objective")),
            (
                "jacobian",
                Derive::HandJacobian {
                    function: "residual_jacobian",
                },
            ),
        ],
        input: &[
            Reshape::Lift("data"),
            Reshape::Lift("model"),
            Reshape::BoolAsInt("is_mirrored"),
            Reshape::Drop("bone_count"),
            Reshape::Drop("bone_names"),
        ],
    },
    ModuleSource {
        name: "saddle",
        text: include_str!("../../gradbench/saddle.grad"),
        functions: &[
            ("rr", Derive::Value("rr")),
            ("ff", Derive::Value("ff")),
            ("fr", Derive::Value("fr")),
            ("rf", Derive::Value("rf")),
        ],
        input: &[],
    },
    ModuleSource {
        name: "particle",
        text: include_str!("../../gradbench/particle.grad"),
        functions: &[
            ("rr", Derive::Value("rr")),
            ("ff", Derive::Value("ff")),
            ("fr", Derive::Value("fr")),
            ("rf", Derive::Value("rf")),
        ],
        input: &[],
    },
];

/// The names of the modules, for messages and tests.
pub fn module_names() -> Vec<&'static str> {
    MODULES.iter().map(|m| m.name).collect()
}
