//! Parsing and validation of `#[kernel(...)]` options.
use proc_macro2::{Span, TokenStream};
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{bracketed, parenthesized, token, Error, Expr, ExprLit, ExprTuple, Ident, Lit, LitInt, Token, Type};
// The block and cluster rules (and their messages) are `kernel_spec`'s, as
// the host and the emulator check them at launch.
use kernel_spec::launch::{check_block, check_cluster};
use kernel_spec::limits::{MAX_MAXNREG, MAX_SM_BLOCKS, MAX_SM_THREADS, MIN_MAXNREG, REGISTER_FILE, WARP_SIZE};
use kernel_spec::occupancy::{blocks_by_registers, max_registers_for, warps_per_block};
use kernel_spec::registers::entry_registers;
use kernel_spec::Dim3;

pub const VALID_OPTIONS: &str =
    "`block`, `cluster`, `non_portable_cluster`, `instances`, `arch`, `min_blocks_per_sm`, `max_registers`, `allow_spills`";
/// Architectures a kernel can be restricted to.
pub const ARCHS: [&str; 2] = ["sm_90a", "sm_100a"];

#[derive(Clone, Copy, Debug)]
pub struct Dims {
    pub x: u64,
    pub y: u64,
    pub z: u64,
    pub span: Span,
}

impl Dims {
    pub fn volume(&self) -> u64 {
        self.x.saturating_mul(self.y).saturating_mul(self.z)
    }

    /// As a [`Dim3`]; an error on `span` when a dimension is over `u32::MAX`.
    fn to_dim3(self, what: &str) -> Result<Dim3, Error> {
        match (u32::try_from(self.x), u32::try_from(self.y), u32::try_from(self.z)) {
            (Ok(x), Ok(y), Ok(z)) => Ok(Dim3::new(x, y, z)),
            _ => Err(Error::new(
                self.span,
                format!(
                    "{what} ({}, {}, {}) has a dimension over u32::MAX = {}, far over the hardware's limits",
                    self.x,
                    self.y,
                    self.z,
                    u32::MAX
                ),
            )),
        }
    }
}

pub struct Options {
    pub block: Dims,
    pub cluster: Dims,
    /// `non_portable_cluster`: clusters of up to 16 CTAs (the host sets
    /// `CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED` at load time).
    pub non_portable_cluster: bool,
    /// `instances(..)`: resolved against the generic parameters by
    /// `kernel::check_signature`.
    pub instances: Option<Instances>,
    /// `arch = sm_90a`: compile the entry point only for that architecture.
    pub arch: Option<String>,
    /// `min_blocks_per_sm = N`: PTX `.minnctapersm N` (ptxas keeps the
    /// registers per thread low enough for N blocks per SM).
    pub min_blocks_per_sm: Option<(u32, Span)>,
    /// `max_registers = R`: PTX `.maxnreg R` (at most R registers per thread).
    pub max_registers: Option<(u32, Span)>,
    /// `allow_spills = "reason"`: no build warning about the kernel's stack
    /// frame or spills in local memory.
    pub allow_spills: Option<String>,
}

/// One `key = value` or `key(...)` option.
enum RawOption {
    Block(Ident, Dims),
    Cluster(Ident, Dims),
    NonPortableCluster(Ident, bool),
    Instances(Ident, Instances),
    Arch(Ident, String),
    /// `min_blocks_per_sm = N` / `max_registers = R`: the key and the value.
    Count(Ident, u64, Span),
    AllowSpills(Ident, String),
}

/// One value of an instance: an integer or `bool` literal for a const
/// parameter, a type for a type parameter.
#[derive(Clone)]
pub enum InstanceValue {
    Lit(Lit),
    Type(Type),
}

impl InstanceValue {
    pub fn span(&self) -> Span {
        match self {
            InstanceValue::Lit(l) => l.span(),
            InstanceValue::Type(t) => syn::spanned::Spanned::span(t),
        }
    }
}

impl quote::ToTokens for InstanceValue {
    fn to_tokens(&self, out: &mut TokenStream) {
        match self {
            InstanceValue::Lit(l) => l.to_tokens(out),
            InstanceValue::Type(t) => t.to_tokens(out),
        }
    }
}

impl Parse for InstanceValue {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        if input.peek(Lit) {
            return match input.parse::<Lit>()? {
                l @ (Lit::Int(_) | Lit::Bool(_)) => Ok(InstanceValue::Lit(l)),
                other => Err(Error::new(other.span(), "an instance value must be an integer or bool literal (for a const parameter) or a type (for a type parameter): it names the entry point")),
            };
        }
        Ok(InstanceValue::Type(input.parse()?))
    }
}

/// `instances(P = [v, ..], .., (a, b, ..), ..)`: the values of the
/// parameters given by name, and tuples of the other parameters' values in
/// declaration order; the instances are every combination (see the
/// `kernel` docs).
pub struct Instances {
    pub span: Span,
    pub named: Vec<(Ident, Vec<InstanceValue>)>,
    pub tuples: Vec<(Span, Vec<InstanceValue>)>,
}

impl Parse for Instances {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut out = Instances { span: input.span(), named: Vec::new(), tuples: Vec::new() };
        while !input.is_empty() {
            let span = input.span();
            if input.peek(Ident) && input.peek2(Token![=]) {
                // `P = [v, ..]` or `P = v`.
                let name: Ident = input.parse()?;
                input.parse::<Token![=]>()?;
                let values = if input.peek(token::Bracket) {
                    let content;
                    bracketed!(content in input);
                    Punctuated::<InstanceValue, Token![,]>::parse_terminated(&content)?.into_iter().collect()
                } else {
                    vec![input.parse()?]
                };
                out.named.push((name, values));
            } else if input.peek(token::Paren) {
                // `(a, b, ..)` or `(a)`.
                let content;
                parenthesized!(content in input);
                out.tuples.push((span, Punctuated::<InstanceValue, Token![,]>::parse_terminated(&content)?.into_iter().collect()));
            } else {
                out.tuples.push((span, vec![input.parse()?]));
            }
            if input.is_empty() {
                break;
            }
            input.parse::<Token![,]>()?;
        }
        Ok(out)
    }
}

fn lit_u64(lit: &LitInt, what: &str) -> syn::Result<u64> {
    lit.base10_parse::<u64>()
        .map_err(|_| Error::new(lit.span(), format!("{what} must be a non-negative integer literal")))
}

fn expr_u64(e: &Expr, what: &str) -> syn::Result<u64> {
    match e {
        Expr::Lit(ExprLit { lit: Lit::Int(i), .. }) => lit_u64(i, what),
        other => Err(Error::new_spanned(other, format!("{what} must be an integer literal"))),
    }
}

/// `(x, y, z)`, `(x, y)` or `(x)` as dims; `n` alone as `(n, 1, 1)`.
fn parse_dims(input: ParseStream, what: &str) -> syn::Result<Dims> {
    let span = input.span();
    if input.peek(LitInt) {
        let n = lit_u64(&input.parse::<LitInt>()?, what)?;
        return Ok(Dims { x: n, y: 1, z: 1, span });
    }
    let tuple: ExprTuple = input.parse()?;
    let v = tuple.elems.iter().map(|e| expr_u64(e, what)).collect::<syn::Result<Vec<_>>>()?;
    match v.as_slice() {
        [x] => Ok(Dims { x: *x, y: 1, z: 1, span }),
        [x, y] => Ok(Dims { x: *x, y: *y, z: 1, span }),
        [x, y, z] => Ok(Dims { x: *x, y: *y, z: *z, span }),
        _ => Err(Error::new_spanned(tuple, format!("{what} takes 1 to 3 dimensions: `n` or `(x, y, z)`"))),
    }
}

impl Parse for RawOption {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let key: Ident = input.parse()?;
        match key.to_string().as_str() {
            "block" => {
                input.parse::<Token![=]>()?;
                let span = input.span();
                let dims = if input.peek(Ident) {
                    let unit: Ident = input.parse()?;
                    let content;
                    parenthesized!(content in input);
                    let n = lit_u64(&content.parse::<LitInt>()?, "the block size")?;
                    match unit.to_string().as_str() {
                        "warpgroups" => Dims { x: n.saturating_mul(128), y: 1, z: 1, span },
                        "warps" => Dims { x: n.saturating_mul(32), y: 1, z: 1, span },
                        "threads" => Dims { x: n, y: 1, z: 1, span },
                        _ => {
                            return Err(Error::new(
                                unit.span(),
                                format!("unknown block unit `{unit}`; write `warpgroups(N)`, `warps(N)`, `threads(N)` or `(x, y, z)`"),
                            ))
                        }
                    }
                } else {
                    parse_dims(input, "the block shape")?
                };
                Ok(RawOption::Block(key, dims))
            }
            "cluster" => {
                input.parse::<Token![=]>()?;
                Ok(RawOption::Cluster(key, parse_dims(input, "the cluster shape")?))
            }
            "non_portable_cluster" => {
                // A flag; `= true` / `= false` is accepted too.
                let on = if input.peek(Token![=]) {
                    input.parse::<Token![=]>()?;
                    input.parse::<syn::LitBool>()?.value
                } else {
                    true
                };
                Ok(RawOption::NonPortableCluster(key, on))
            }
            "instances" => {
                let content;
                parenthesized!(content in input);
                Ok(RawOption::Instances(key, content.parse()?))
            }
            "arch" => {
                input.parse::<Token![=]>()?;
                let (name, span) = if input.peek(syn::LitStr) {
                    let l: syn::LitStr = input.parse()?;
                    (l.value(), l.span())
                } else {
                    let i: Ident = input.parse()?;
                    (i.to_string(), i.span())
                };
                if !ARCHS.contains(&name.as_str()) {
                    return Err(Error::new(span, format!("unknown architecture `{name}`; `arch` takes one of: {}", ARCHS.join(", "))));
                }
                Ok(RawOption::Arch(key, name))
            }
            "min_blocks_per_sm" | "max_registers" => {
                input.parse::<Token![=]>()?;
                let lit: LitInt = input.parse()?;
                let what = format!("`{key}`");
                Ok(RawOption::Count(key, lit_u64(&lit, &what)?, lit.span()))
            }
            "allow_spills" => {
                let why = "`allow_spills` takes the reason the kernel keeps its stack frame or spills, as a string: \
                           `allow_spills = \"the accumulator's row index is hoisted out of the loop\"`";
                if !input.peek(Token![=]) {
                    return Err(Error::new(key.span(), why));
                }
                input.parse::<Token![=]>()?;
                let reason = match input.parse::<syn::LitStr>() {
                    Ok(l) if !l.value().trim().is_empty() => l.value(),
                    Ok(l) => return Err(Error::new(l.span(), why)),
                    Err(e) => return Err(Error::new(e.span(), why)),
                };
                Ok(RawOption::AllowSpills(key, reason))
            }
            other => Err(Error::new(key.span(), format!("unknown `#[kernel]` option `{other}`; valid options: {VALID_OPTIONS}"))),
        }
    }
}

/// Parses the attribute arguments; every problem is collected into `errors`.
pub fn parse(attr: TokenStream, errors: &mut Vec<Error>) -> Options {
    let mut opts = Options {
        block: Dims { x: 128, y: 1, z: 1, span: Span::call_site() },
        cluster: Dims { x: 1, y: 1, z: 1, span: Span::call_site() },
        non_portable_cluster: false,
        instances: None,
        arch: None,
        min_blocks_per_sm: None,
        max_registers: None,
        allow_spills: None,
    };
    let parsed = match syn::parse::Parser::parse2(Punctuated::<RawOption, Token![,]>::parse_terminated, attr) {
        Ok(p) => p,
        Err(e) => {
            errors.push(e);
            return opts;
        }
    };
    let mut seen: Vec<String> = Vec::new();
    for opt in parsed {
        let key = match &opt {
            RawOption::Block(k, _)
            | RawOption::Cluster(k, _)
            | RawOption::NonPortableCluster(k, _)
            | RawOption::Instances(k, _)
            | RawOption::Arch(k, _)
            | RawOption::Count(k, _, _)
            | RawOption::AllowSpills(k, _) => k.clone(),
        };
        let name = key.to_string();
        if seen.contains(&name) {
            errors.push(Error::new(key.span(), format!("duplicate `#[kernel]` option `{name}`; give each option once")));
            continue;
        }
        seen.push(name);
        match opt {
            RawOption::Block(_, d) => opts.block = d,
            RawOption::Cluster(_, d) => opts.cluster = d,
            RawOption::NonPortableCluster(_, on) => opts.non_portable_cluster = on,
            RawOption::Arch(_, a) => opts.arch = Some(a),
            RawOption::AllowSpills(_, why) => opts.allow_spills = Some(why),
            RawOption::Count(k, n, span) => {
                let n = (u32::try_from(n).unwrap_or(u32::MAX), span);
                if k == "min_blocks_per_sm" {
                    opts.min_blocks_per_sm = Some(n);
                } else {
                    opts.max_registers = Some(n);
                }
            }
            RawOption::Instances(k, mut v) => {
                if v.named.is_empty() && v.tuples.is_empty() {
                    errors.push(Error::new(k.span(), "`instances()` lists no instance; list at least one, e.g. `instances((128, 64))`"));
                }
                v.span = k.span();
                opts.instances = Some(v);
            }
        }
    }
    // The rules and their messages are `kernel_spec::launch`'s (the same
    // ones `kernel_host::check_launch` and the emulator apply).
    let b = opts.block;
    match b.to_dim3("the block") {
        Ok(block) => {
            if let Err(p) = check_block(block) {
                errors.push(Error::new(b.span, p.to_string()));
            }
        }
        Err(e) => errors.push(e),
    }
    let c = opts.cluster;
    match c.to_dim3("the cluster") {
        Ok(cluster) => {
            if let Err(p) = check_cluster(cluster, opts.non_portable_cluster) {
                errors.push(Error::new(c.span, p.to_string()));
            }
        }
        Err(e) => errors.push(e),
    }
    check_occupancy_options(&opts, errors);
    opts
}

/// The rules of `min_blocks_per_sm` and `max_registers`, alone and
/// together (the limits and the occupancy rules are `kernel_spec`'s), so
/// that ptxas never ignores one (it would, with a warning nobody sees).
fn check_occupancy_options(opts: &Options, errors: &mut Vec<Error>) {
    let threads = u32::try_from(opts.block.volume()).unwrap_or(u32::MAX);
    let warps = warps_per_block(threads);
    if let Some((n, span)) = opts.min_blocks_per_sm {
        if n == 0 || n > MAX_SM_BLOCKS {
            errors.push(Error::new(
                span,
                format!(
                    "`min_blocks_per_sm = {n}` is outside 1..={MAX_SM_BLOCKS}: an SM holds at most {MAX_SM_BLOCKS} blocks \
                     (kernel_spec::limits::MAX_SM_BLOCKS), and ptxas ignores a larger `.minnctapersm`; give a count in 1..={MAX_SM_BLOCKS}"
                ),
            ));
        } else if u64::from(n) * u64::from(warps * WARP_SIZE) > u64::from(MAX_SM_THREADS) {
            let most = MAX_SM_THREADS / (warps * WARP_SIZE);
            errors.push(Error::new(
                span,
                format!(
                    "`min_blocks_per_sm = {n}` blocks of {threads} threads are {} threads, over the {MAX_SM_THREADS} an SM holds \
                     (kernel_spec::limits::MAX_SM_THREADS), and ptxas ignores such a `.minnctapersm`; \
                     use `min_blocks_per_sm = {most}` or smaller blocks",
                    u64::from(n) * u64::from(warps * WARP_SIZE)
                ),
            ));
        }
    }
    if let Some((r, span)) = opts.max_registers {
        let entry = entry_registers(threads);
        if !(MIN_MAXNREG..=MAX_MAXNREG).contains(&r) {
            errors.push(Error::new(
                span,
                format!(
                    "`max_registers = {r}` is outside {MIN_MAXNREG}..={MAX_MAXNREG}, the per-thread register caps ptxas honours \
                     (kernel_spec::limits::MIN_MAXNREG, MAX_MAXNREG: ptxas raises a lower cap to {MIN_MAXNREG} and ignores a higher one); \
                     give a multiple of 8 in {MIN_MAXNREG}..={}",
                    MAX_MAXNREG / 8 * 8
                ),
            ));
        } else if r % 8 != 0 && r != MAX_MAXNREG {
            errors.push(Error::new(
                span,
                format!(
                    "`max_registers = {r}` is not a multiple of 8: registers are allocated 8 per thread \
                     (kernel_spec::limits::REGISTER_ALLOC_UNIT per warp), so {r} takes as many as {}, which the kernel could use; \
                     write `max_registers = {}` or `{}`",
                    r.div_ceil(8) * 8,
                    r / 8 * 8,
                    r.div_ceil(8) * 8
                ),
            ));
        } else if r >= entry {
            errors.push(Error::new(
                span,
                format!(
                    "`max_registers = {r}` has no effect: ptxas already gives a block of {threads} threads at most {entry} registers \
                     per thread ({REGISTER_FILE} registers per SM / {threads}, rounded down to a multiple of 8: \
                     kernel_spec::registers::entry_registers); give a cap below {entry}, or drop `max_registers`"
                ),
            ));
        } else if let Some((n, nspan)) = opts.min_blocks_per_sm {
            let fit = blocks_by_registers(threads, r);
            if (1..=MAX_SM_BLOCKS).contains(&n) && fit < n {
                let need = max_registers_for(threads, n);
                let mut e = Error::new(
                    span,
                    format!(
                        "`max_registers = {r}` and `min_blocks_per_sm = {n}` disagree: at {r} registers per thread only {fit} \
                         block(s) of {threads} threads fit an SM's {REGISTER_FILE} registers (kernel_spec::occupancy), and ptxas \
                         would lower the cap to {need} for {n}; write `max_registers = {need}`, or drop one of the two"
                    ),
                );
                e.combine(Error::new(nspan, format!("`min_blocks_per_sm = {n}` is here")));
                errors.push(e);
            }
        }
    }
}

/// The kernel-meta line's fields for `min_blocks_per_sm`, `max_registers`
/// and `allow_spills` (each with a leading space; empty when not given).
pub fn meta_fields(opts: &Options) -> String {
    let mut s = String::new();
    if let Some((n, _)) = opts.min_blocks_per_sm {
        s.push_str(&format!(" minnctapersm={n}"));
    }
    if let Some((r, _)) = opts.max_registers {
        s.push_str(&format!(" maxnreg={r}"));
    }
    if opts.allow_spills.is_some() {
        s.push_str(" allow_spills");
    }
    s
}

/// For `min_blocks_per_sm = N`: a const assertion (in the instance's
/// const block; `smem` is the instance's `SMEM_BYTES`) that N blocks'
/// shared memory fits one SM (`kernel_spec::occupancy::max_smem_for`).
pub fn smem_check(opts: &Options, kernel: &str, smem: TokenStream) -> TokenStream {
    let Some((n, _)) = opts.min_blocks_per_sm else { return TokenStream::new() };
    if n == 0 || n > MAX_SM_BLOCKS {
        return TokenStream::new(); // reported by `check_occupancy_options`
    }
    let max = kernel_spec::occupancy::max_smem_for(n);
    let msg = format!(
        "kernel `{kernel}`: `min_blocks_per_sm = {n}` needs each block's shared memory (its `#[scratch]` parameters) to be \
         at most {max} bytes, so that {n} blocks fit an SM's {} with the {} bytes reserved per block (kernel_spec::occupancy); \
         use fewer stages or smaller tiles, or a lower `min_blocks_per_sm`",
        kernel_spec::limits::SM_SMEM_BYTES,
        kernel_spec::limits::SMEM_RESERVED_PER_BLOCK
    );
    quote::quote!(assert!(#smem <= #max, #msg);)
}
