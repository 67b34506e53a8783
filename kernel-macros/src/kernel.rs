//! `#[kernel]`: parse -> validate -> codegen.
use crate::options::{self, InstanceValue, Instances, Options};
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::{Attribute, Error, FnArg, GenericParam, Ident, ItemFn, Lit, LitInt, Pat, ReturnType, Type};

/// A non-scratch parameter: passed by the host.
struct Param {
    name: Ident,
    pat: Pat,
    ty: Type,
    attrs: Vec<Attribute>,
    /// `#[unchecked]`: a raw-pointer parameter kept on purpose (no
    /// compile-time warning; the emulator's run report still notes it).
    unchecked: bool,
}

/// A `#[scratch]` parameter: placed in dynamic shared memory.
struct ScratchParam {
    name: Ident,
    pat: Pat,
    ty: Type,
    /// `arrivals = N` if given.
    arrivals: Option<(u32, Span)>,
}

/// A `#[global_scratch]` parameter: placed in the launch's global scratch.
struct GlobalParam {
    name: Ident,
    pat: Pat,
    ty: Type,
}

pub fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut errors = Vec::new();
    let opts = options::parse(attr, &mut errors);
    let mut func: ItemFn = match syn::parse2(item) {
        Ok(f) => f,
        Err(e) => {
            let mut e = e;
            e.combine(Error::new(Span::call_site(), "`#[kernel]` applies to a free function (`fn name(...) { ... }`)"));
            return e.to_compile_error();
        }
    };
    let (params, scratch, globals, instances) = check_signature(&mut func, &opts, &mut errors);
    check_arch_ops(&func, &opts, &mut errors);
    check_cta_group(&func, &scratch, &mut errors);
    crate::warp_specialize::expand_in_body(&mut func.block, &opts, &mut errors);
    if !errors.is_empty() {
        // Report every error at once, and keep the function (without the
        // `#[scratch]` markers) so the rest of the crate still resolves it.
        let errs = errors.iter().map(Error::to_compile_error);
        return quote! { #(#errs)* #[allow(dead_code, unused)] #func };
    }
    codegen(&func, &opts, &params, &scratch, &globals, &instances)
}

/// Validates the signature, strips `#[scratch]` / `#[global_scratch]`
/// attributes, and splits the parameters into host-passed, scratch and
/// global scratch.
fn check_signature(func: &mut ItemFn, opts: &Options, errors: &mut Vec<Error>) -> (Vec<Param>, Vec<ScratchParam>, Vec<GlobalParam>, Vec<Instance>) {
    let sig = &mut func.sig;
    if let Some(a) = &sig.asyncness {
        errors.push(Error::new(a.span(), "a kernel cannot be `async`: GPU kernels run to completion; remove `async`"));
    }
    if let ReturnType::Type(_, ty) = &sig.output {
        errors.push(Error::new(
            ty.span(),
            "a kernel cannot return a value: write results through a `*mut T` parameter and remove the return type",
        ));
    }
    if let Some(abi) = &sig.abi {
        errors.push(Error::new(abi.span(), "do not give a kernel an ABI: `#[kernel]` emits the `extern \"ptx-kernel\"` entry itself"));
    }
    if let Some(c) = &sig.constness {
        errors.push(Error::new(c.span(), "a kernel cannot be `const`"));
    }
    if let Some(v) = &sig.variadic {
        errors.push(Error::new(v.span(), "a kernel cannot be variadic"));
    }
    // A `where` clause may bound the generics (e.g. `Cols<BN>:
    // WgmmaShape`, so the body can use `Acc<BN>`): it is kept on the body
    // and entry functions; every listed instance must satisfy it.
    for g in &sig.generics.params {
        if let GenericParam::Lifetime(l) = g {
            errors.push(Error::new(l.span(), "a kernel cannot have lifetime parameters: kernel parameters are copied from the host"));
        }
    }
    let instances = resolve_instances(&sig.generics, opts.instances.as_ref(), errors);
    let mut params = Vec::new();
    let mut scratch = Vec::new();
    let mut globals = Vec::new();
    for arg in sig.inputs.iter_mut() {
        let pt = match arg {
            FnArg::Receiver(r) => {
                errors.push(Error::new(r.span(), "a kernel cannot take `self`: write it as a free function"));
                continue;
            }
            FnArg::Typed(pt) => pt,
        };
        let name = match &*pt.pat {
            Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => pi.ident.clone(),
            other => {
                errors.push(Error::new(other.span(), "kernel parameters must be plain identifiers (`name: Type`)"));
                continue;
            }
        };
        // Pull out `#[scratch]` / `#[scratch(arrivals = N)]` and `#[unchecked]`.
        let mut is_scratch = false;
        let mut arrivals = None;
        let mut unchecked = None;
        let mut global = None;
        let mut keep = Vec::new();
        for a in pt.attrs.drain(..) {
            if a.path().is_ident("unchecked") {
                unchecked = Some(a.span());
                continue;
            }
            if a.path().is_ident("global_scratch") {
                if global.is_some() {
                    errors.push(Error::new(a.span(), "duplicate `#[global_scratch]` attribute"));
                }
                if !matches!(a.meta, syn::Meta::Path(_)) {
                    errors.push(Error::new(
                        a.span(),
                        "`#[global_scratch]` takes no options: the type says what is allocated (`Semaphore`, `[Semaphore; N]`, `GlobalBuf<T, N>`); write `#[global_scratch] name: Type`",
                    ));
                }
                global = Some(a.span());
                continue;
            }
            if !a.path().is_ident("scratch") {
                keep.push(a);
                continue;
            }
            if is_scratch {
                errors.push(Error::new(a.span(), "duplicate `#[scratch]` attribute"));
            }
            is_scratch = true;
            if let syn::Meta::List(_) = &a.meta {
                let res = a.parse_nested_meta(|m| {
                    if m.path.is_ident("arrivals") {
                        let lit: LitInt = m.value()?.parse()?;
                        let n: u64 = lit.base10_parse()?;
                        let max = u64::from(kernel_spec::limits::MAX_MBARRIER_ARRIVALS);
                        if n == 0 || n > max {
                            return Err(Error::new(lit.span(), format!("`arrivals` must be in 1..{} (an mbarrier's arrival count is 20 bits); got {n}", max + 1)));
                        }
                        arrivals = Some((n as u32, lit.span()));
                        Ok(())
                    } else {
                        let key = m.path.to_token_stream().to_string();
                        Err(m.error(format!("unknown `#[scratch]` option `{key}`; valid options: `arrivals`")))
                    }
                });
                if let Err(e) = res {
                    errors.push(e);
                }
            }
        }
        pt.attrs = keep;
        let ty = (*pt.ty).clone();
        if let Some(span) = unchecked {
            if is_scratch || global.is_some() || !matches!(ty, Type::Ptr(_)) {
                errors.push(Error::new(span, "`#[unchecked]` marks a raw-pointer kernel parameter (`*const T` / `*mut T`) kept on purpose; this parameter is not one"));
            }
        }
        if let Some(span) = global {
            if is_scratch {
                errors.push(Error::new(
                    span,
                    "a parameter is either `#[scratch]` (this CTA's shared memory) or `#[global_scratch]` (global memory shared by the whole grid), not both: remove one",
                ));
            } else {
                globals.push(GlobalParam { name, pat: (*pt.pat).clone(), ty });
            }
            continue;
        }
        if is_scratch {
            scratch.push(ScratchParam { name, pat: (*pt.pat).clone(), ty, arrivals });
            continue;
        }
        if let Some(msg) = unsendable_type(&ty) {
            errors.push(Error::new(ty.span(), msg));
        }
        params.push(Param { name, pat: (*pt.pat).clone(), ty, attrs: pt.attrs.clone(), unchecked: unchecked.is_some() });
    }
    (params, scratch, globals, instances)
}

/// One instance: a value per generic parameter, in declaration order.
type Instance = Vec<InstanceValue>;

/// The instances `instances(..)` lists, each with one value per generic
/// parameter in declaration order: every combination of the values of the
/// parameters given by name (`E = [f16, bf16]`, in the order written, the
/// first varying slowest) and of the tuples, which give the other
/// parameters in declaration order. A kernel without generics has one
/// instance, with no values.
fn resolve_instances(generics: &syn::Generics, given: Option<&Instances>, errors: &mut Vec<Error>) -> Vec<Instance> {
    // (name, is a type parameter) of each type and const parameter.
    let params: Vec<(&Ident, bool)> = generics
        .params
        .iter()
        .filter_map(|g| match g {
            GenericParam::Type(t) => Some((&t.ident, true)),
            GenericParam::Const(c) => Some((&c.ident, false)),
            GenericParam::Lifetime(_) => None,
        })
        .collect();
    let n_types = params.iter().filter(|p| p.1).count();
    let errors_before = errors.len();
    let Some(given) = given else {
        if n_types > 0 {
            let names = params.iter().filter(|p| p.1).map(|p| format!("`{}`", p.0)).collect::<Vec<_>>().join(", ");
            errors.push(Error::new(
                generics.span(),
                format!("a kernel with type parameters must list the types (and const values) to compile: add e.g. `instances({} = [f16, bf16], ..)` to `#[kernel(...)]` for {names}", params.iter().find(|p| p.1).map(|p| p.0.to_string()).unwrap_or_default()),
            ));
        } else if !params.is_empty() {
            let n = params.len();
            errors.push(Error::new(
                generics.span(),
                format!("a kernel with const generics must list the instances to compile: add `instances((..))` with {n} value(s) each to `#[kernel(...)]`"),
            ));
        }
        return vec![Vec::new()];
    };
    if params.is_empty() {
        errors.push(Error::new(given.span, "`instances(...)` needs generic parameters on the kernel, e.g. `fn k<const TILE: usize>(..)` or `fn k<E: Elem>(..)`"));
        return vec![Vec::new()];
    }
    let all = params.iter().map(|p| format!("`{}`", p.0)).collect::<Vec<_>>().join(", ");
    // Which parameter each named list gives; the rest come from the tuples.
    let mut named: Vec<(usize, &[InstanceValue])> = Vec::new();
    for (name, values) in &given.named {
        match params.iter().position(|p| p.0 == name) {
            None => errors.push(Error::new(name.span(), format!("`{name}` is not a generic parameter of this kernel; its generic parameters are {all}"))),
            Some(i) if named.iter().any(|(j, _)| *j == i) => errors.push(Error::new(name.span(), format!("`{name}` is given twice in `instances(..)`; list its values once: `{name} = [a, b, ..]`"))),
            Some(_) if values.is_empty() => errors.push(Error::new(name.span(), format!("`{name} = []` lists no value; list at least one"))),
            Some(i) => named.push((i, values)),
        }
    }
    if errors.len() > errors_before {
        return vec![Vec::new()];
    }
    let positional: Vec<usize> = (0..params.len()).filter(|i| !named.iter().any(|(j, _)| j == i)).collect();
    let mut tuples: Vec<&[InstanceValue]> = given.tuples.iter().map(|(_, t)| t.as_slice()).collect();
    if tuples.is_empty() {
        if !positional.is_empty() {
            let rest = positional.iter().map(|i| format!("`{}`", params[*i].0)).collect::<Vec<_>>().join(", ");
            errors.push(Error::new(given.span, format!("`instances(..)` gives no value for {rest}: add tuples of their values in declaration order, e.g. `({})`", positional.iter().map(|_| "..").collect::<Vec<_>>().join(", "))));
            return vec![Vec::new()];
        }
        tuples.push(&[]);
    }
    for (span, t) in &given.tuples {
        if t.len() != positional.len() {
            let span = t.first().map(InstanceValue::span).unwrap_or(*span);
            let what = if named.is_empty() { String::new() } else { " not given by name".to_string() };
            let kinds = if n_types == 0 { "const generic" } else { "generic" };
            errors.push(Error::new(span, format!("this instance gives {} value(s); the kernel has {} {kinds} parameter(s){what}", t.len(), positional.len())));
        }
    }
    // A literal for a type parameter, or a type for a const one.
    let mut check = |i: usize, v: &InstanceValue| match (v, params[i].1) {
        (InstanceValue::Lit(l), true) => errors.push(Error::new(
            l.span(),
            format!("`{}` is a type parameter: give a type here (e.g. `f16`), not the literal `{}`", params[i].0, l.to_token_stream()),
        )),
        (InstanceValue::Type(t), false) => errors.push(Error::new(
            t.span(),
            format!(
                "`{}` is a const parameter: give an integer or bool literal here, not `{}` (a literal, not a named constant: it names the entry point)",
                params[i].0,
                t.to_token_stream()
            ),
        )),
        _ => {}
    };
    for (i, values) in &named {
        values.iter().for_each(|v| check(*i, v));
    }
    for t in tuples.iter().filter(|t| t.len() == positional.len()) {
        positional.iter().zip(t.iter()).for_each(|(i, v)| check(*i, v));
    }
    if errors.len() > errors_before {
        return vec![Vec::new()];
    }
    // Every combination: the named lists (first varying slowest), then the tuples.
    let mut out: Vec<Instance> = vec![Vec::new()];
    let mut slots: Vec<usize> = named.iter().map(|(i, _)| *i).collect();
    for (_, values) in &named {
        out = out.iter().flat_map(|o| values.iter().map(move |v| [o.as_slice(), std::slice::from_ref(v)].concat())).collect();
    }
    slots.extend(&positional);
    out = out.iter().flat_map(|o| tuples.iter().map(move |t| [o.as_slice(), t].concat())).collect();
    // Reorder each instance's values from `slots` order to declaration order.
    let out: Vec<Instance> = out
        .into_iter()
        .map(|vals| {
            let mut inst: Vec<Option<InstanceValue>> = vec![None; params.len()];
            for (slot, v) in slots.iter().zip(vals) {
                inst[*slot] = Some(v);
            }
            inst.into_iter().map(|v| v.expect("every parameter has a value")).collect()
        })
        .collect();
    let mut seen: Vec<String> = Vec::new();
    for inst in &out {
        let name = instance_suffix(inst);
        if seen.contains(&name) {
            let shown = inst.iter().map(|v| v.to_token_stream().to_string()).collect::<Vec<_>>().join(", ");
            errors.push(Error::new(given.span, format!("the instance `({shown})` is listed twice (its entry point would be defined twice); list it once")));
        }
        seen.push(name);
    }
    out
}

/// Types that can never cross from the host, recognized by syntax. Everything
/// else is checked by the `DeviceParam` bound in the generated code.
fn unsendable_type(ty: &Type) -> Option<String> {
    let shown = ty.to_token_stream().to_string();
    match ty {
        Type::Reference(_) => Some(format!(
            "kernel parameter type `{shown}` is a reference, which cannot cross from the host: use `*const T` or `*mut T` to device memory"
        )),
        Type::Slice(_) => Some(format!("kernel parameter type `{shown}` is a slice: pass a `*const T`/`*mut T` and a length")),
        Type::ImplTrait(_) => Some(format!("kernel parameter type `{shown}` is `impl Trait`: kernel parameters need concrete types")),
        Type::TraitObject(_) => Some(format!("kernel parameter type `{shown}` is a trait object, which cannot cross to the device")),
        Type::BareFn(_) => Some(format!("kernel parameter type `{shown}` is a function pointer, which cannot cross to the device")),
        Type::Never(_) => Some("kernel parameter type `!` cannot be passed".to_string()),
        _ => None,
    }
}

/// Whether this expansion is in the crate the device build compiles, as
/// opposed to a kernels crate it depends on. A kernels crate may depend on
/// another (for its building blocks, or to re-export its kernels, as the
/// examples' Hopper ladder re-exports `kernel_ops_kernels`' matmul); its
/// nvptx build is one fat-LTO cdylib, which would export every
/// `#[no_mangle]` entry of every dependency: the dependency's kernels would
/// be compiled, assembled and embedded a second time, in the wrong crate's
/// `DEVICE_CODE`. `kernel_host::build` sets `KERNEL_DEVICE_CRATE` to the
/// crate it builds (its lib name) for the nvptx cargo run; a dependency
/// compiled in that run gets no PTX entries (its `KernelSpec` and host
/// items are unchanged; its kernels are launched from its own
/// `DEVICE_CODE`). Without the variable (host builds, a hand-run nvptx
/// build) every crate gets its entries. The variable is not tracked by
/// cargo, and the device builds of all kernels crates share one target dir
/// per architecture; that is sound because a kernels crate's cached nvptx
/// artifact is always an rlib built as another crate's dependency (so with
/// "not the root"): built for itself it emits PTX only, which cargo
/// compiles on every run.
fn is_device_build_root() -> bool {
    match (std::env::var(kernel_spec::DEVICE_CRATE_ENV), std::env::var("CARGO_CRATE_NAME")) {
        (Ok(root), Ok(this)) => root == this,
        _ => true,
    }
}

/// An instance value as it appears in the entry name: a literal in decimal
/// (`true`/`false` for a bool), a type by its last path segment and its
/// generic arguments, every other character an underscore (`f16`,
/// `kernel_device::bf16` -> `bf16`, `Foo<2>` -> `Foo_2`).
fn value_text(v: &InstanceValue) -> String {
    match v {
        InstanceValue::Lit(Lit::Int(i)) => i.base10_digits().to_string(),
        InstanceValue::Lit(Lit::Bool(b)) => b.value.to_string(),
        InstanceValue::Lit(other) => other.to_token_stream().to_string(),
        InstanceValue::Type(t) => {
            let text = match t {
                Type::Path(tp) if tp.qself.is_none() => tp.path.segments.last().map(|s| s.to_token_stream().to_string()).unwrap_or_default(),
                other => other.to_token_stream().to_string(),
            };
            let mapped: String = text.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
            mapped.split('_').filter(|p| !p.is_empty()).collect::<Vec<_>>().join("_")
        }
    }
}

/// `a_b_c`: the part of an instance's entry name after `name__`.
fn instance_suffix(inst: &[InstanceValue]) -> String {
    inst.iter().map(value_text).collect::<Vec<_>>().join("_")
}

fn codegen(func: &ItemFn, opts: &Options, params: &[Param], scratch: &[ScratchParam], globals: &[GlobalParam], instances: &[Instance]) -> TokenStream {
    let vis = &func.vis;
    let name = &func.sig.ident;
    let docs: Vec<&Attribute> = func.attrs.iter().filter(|a| a.path().is_ident("doc")).collect();
    let other_attrs: Vec<&Attribute> = func.attrs.iter().filter(|a| !a.path().is_ident("doc")).collect();
    let unsafety = &func.sig.unsafety;
    let block = &func.block;
    let krate = quote!(::kernel_device);

    // Raw-pointer parameters: the race detector cannot see their accesses.
    // A compile-time warning (a use of a deprecated constant, spanned at the
    // parameter's type: stable Rust has no other way for a macro to warn)
    // unless the parameter says `#[unchecked]`; and a note in the emulator's
    // run report either way.
    let raw: Vec<&Param> = params.iter().filter(|p| matches!(p.ty, Type::Ptr(_))).collect();
    let raw_warnings = raw.iter().filter(|p| !p.unchecked).map(|p| {
        let (pn, ty) = (&p.name, &p.ty);
        let note = format!(
            "kernel `{name}`: parameter `{pn}: {}` is a raw pointer: the CPU emulator's race detector cannot see its accesses (it sees `Gmem`/`GmemRef`, tiles and TMA maps); use `Gmem<T>` (`GmemRef<T>` if read-only), or mark the parameter `#[unchecked]` to keep the raw pointer on purpose",
            ty.to_token_stream().to_string().replace("* ", "*")
        );
        quote_spanned! {ty.span()=>
            const _: () = {
                #[deprecated(note = #note)]
                #[allow(non_upper_case_globals)]
                const raw_pointer_parameter_not_race_checked: () = ();
                raw_pointer_parameter_not_race_checked
            };
        }
    });
    let raw_names = raw.iter().map(|p| format!("`{}`", p.name)).collect::<Vec<_>>().join(", ");
    let raw_note = if raw.is_empty() {
        quote!()
    } else {
        quote!(#krate::emu::warn_unchecked_pointers(<Self as #krate::launch::KernelSpec>::NAME, #raw_names);)
    };
    let raw_warnings = quote!(#(#raw_warnings)*);

    // Generics: on the functions and the inherent impl `<E: Bound, const
    // A: usize, ..>` (`gen_decl`), used as `<E, A, ..>` (`gen_use`); the
    // struct declares them without bounds and holds the type parameters in
    // a `PhantomData`.
    let generics = &func.sig.generics;
    let (gen_decl, gen_use, where_clause) = generics.split_for_impl();
    let turbofish = gen_use.as_turbofish();
    let gen_ids: Vec<&Ident> = generics
        .params
        .iter()
        .filter_map(|g| match g {
            GenericParam::Type(t) => Some(&t.ident),
            GenericParam::Const(c) => Some(&c.ident),
            GenericParam::Lifetime(_) => None,
        })
        .collect();
    let type_ids: Vec<&Ident> = generics.type_params().map(|t| &t.ident).collect();
    let struct_params = generics.params.iter().map(|g| match g {
        GenericParam::Type(t) => t.ident.to_token_stream(),
        GenericParam::Const(c) => {
            let (id, ty) = (&c.ident, &c.ty);
            quote!(const #id: #ty)
        }
        GenericParam::Lifetime(l) => l.to_token_stream(),
    });
    let struct_decl = if gen_ids.is_empty() { quote!() } else { quote!(<#(#struct_params),*>) };
    // The inherent impl keeps the `where` predicates on the type parameters
    // (`E: Elem`: its layout's scratch types may need them); those on const
    // generics stay on the functions, so an instance that breaks one is
    // reported at the instance.
    let type_preds = where_clause.iter().flat_map(|w| &w.predicates).filter(|p| match p {
        syn::WherePredicate::Type(pt) => matches!(&pt.bounded_ty, Type::Path(tp) if tp.qself.is_none() && tp.path.get_ident().is_some_and(|i| type_ids.contains(&i))),
        _ => false,
    });
    let impl_where = quote!(where #(#type_preds,)*);

    let body_fn = format_ident!("__kernel_body_{}", name);
    let entry_fn = format_ident!("__kernel_entry_{}", name);

    let (bx, by, bz) = (opts.block.x as u32, opts.block.y as u32, opts.block.z as u32);
    let (cx, cy, cz) = (opts.cluster.x as u32, opts.cluster.y as u32, opts.cluster.z as u32);
    let cluster_ctas = opts.cluster.volume();
    let non_portable = opts.non_portable_cluster;

    let p_names: Vec<&Ident> = params.iter().map(|p| &p.name).collect();
    let p_tys: Vec<&Type> = params.iter().map(|p| &p.ty).collect();
    let p_pats: Vec<&Pat> = params.iter().map(|p| &p.pat).collect();
    let p_attrs: Vec<&Vec<Attribute>> = params.iter().map(|p| &p.attrs).collect();
    let s_names: Vec<&Ident> = scratch.iter().map(|s| &s.name).collect();
    let s_tys: Vec<&Type> = scratch.iter().map(|s| &s.ty).collect();
    let s_pats: Vec<&Pat> = scratch.iter().map(|s| &s.pat).collect();
    let s_idx: Vec<usize> = (0..scratch.len()).collect();
    let n_scratch = scratch.len();
    // `#[global_scratch]`: one hidden trailing entry parameter (the launch's
    // zeroed global allocation), split by the prologue into the handles.
    let g_names: Vec<&Ident> = globals.iter().map(|g| &g.name).collect();
    let g_tys: Vec<&Type> = globals.iter().map(|g| &g.ty).collect();
    let g_pats: Vec<&Pat> = globals.iter().map(|g| &g.pat).collect();
    let g_idx: Vec<usize> = (0..globals.len()).collect();
    let n_globals = globals.len();
    let has_globals = !globals.is_empty();
    let g_decl = if has_globals { quote!(__global_scratch: *mut u8) } else { quote!() };
    let g_fn_ty = if has_globals { quote!(*mut u8) } else { quote!() };
    let g_arg = if has_globals { quote!(__global_scratch) } else { quote!() };
    let g_abi_decl = if has_globals { quote!(__global_scratch: u64) } else { quote!() };
    let g_abi_arg = if has_globals { quote!(__global_scratch as *mut u8) } else { quote!() };
    let global_checks = globals.iter().map(|g| {
        let ty = &g.ty;
        quote_spanned!(ty.span()=> __global_scratch::<#ty>();)
    });
    let s_arrivals: Vec<u32> = scratch.iter().map(|s| s.arrivals.map(|a| a.0).unwrap_or(1)).collect();
    // A ClusterBarrier's count is derived from the cluster shape; every other
    // barrier takes `arrivals` (default 1).
    let s_counts = scratch.iter().zip(&s_arrivals).map(|(s, n)| {
        let ty = &s.ty;
        quote!(#krate::smem::scratch_arrivals::<#ty>(#n, [#cx, #cy, #cz]))
    });

    // Spanned trait checks: the error points at the offending type.
    let param_checks = params.iter().map(|p| {
        let ty = &p.ty;
        quote_spanned!(ty.span()=> __device_param::<#ty>();)
    });
    let scratch_checks = scratch.iter().map(|s| {
        let ty = &s.ty;
        quote_spanned!(ty.span()=> __scratch::<#ty>();)
    });
    let arrivals_checks = scratch.iter().filter_map(|s| {
        let (_, span) = s.arrivals?;
        let ty = &s.ty;
        let msg = format!(
            "kernel `{name}`, scratch parameter `{}`: `arrivals` applies only to barrier scratch (Barrier, Barriers<N>); remove it",
            s.name
        );
        Some(quote_spanned!(span=> assert!(<#ty as #krate::smem::Scratch>::TAKES_ARRIVALS, #msg);))
    });
    // ClusterBarrier rules, each spanned at the offending type or option.
    let cluster_barrier_checks = scratch.iter().map(|s| {
        let ty = &s.ty;
        let sname = &s.name;
        let no_cluster = format!(
            "kernel `{name}`, scratch parameter `{sname}`: a ClusterBarrier needs a cluster of more than one CTA, and this kernel's cluster is ({cx}, {cy}, {cz}); add `cluster = (2, 1, 1)` (or more) to `#[kernel(...)]`, or use a `Barrier` for the CTA alone"
        );
        let in_cluster: Vec<&str> = [("x", cx), ("y", cy), ("z", cz)].iter().filter(|(_, n)| *n > 1).map(|(a, _)| *a).collect();
        let bad_axes = format!(
            "kernel `{name}`, scratch parameter `{sname}`: the ClusterBarrier's axes name an axis along which the cluster ({cx}, {cy}, {cz}) has only 1 CTA; name only axes with more than one CTA ({}), or use `ClusterBarrier<WholeCluster>`",
            if in_cluster.is_empty() { "none here".to_string() } else { in_cluster.join(", ") }
        );
        let mut checks = quote_spanned! {ty.span()=>
            assert!(<#ty as #krate::smem::Scratch>::CLUSTER_AXES == 0 || #cluster_ctas > 1, #no_cluster);
            assert!(<#ty as #krate::smem::Scratch>::CLUSTER_AXES == 0 || #krate::cluster_barrier::cluster_axes_in_cluster(<#ty as #krate::smem::Scratch>::CLUSTER_AXES, [#cx, #cy, #cz]), #bad_axes);
        };
        if let Some((n, span)) = s.arrivals {
            let derived = format!(
                "kernel `{name}`, scratch parameter `{sname}`: a ClusterBarrier's arrival count is derived from the cluster shape (one arrival per CTA along its axes), so `arrivals = {n}` cannot be given; remove it"
            );
            checks.extend(quote_spanned! {span=>
                assert!(<#ty as #krate::smem::Scratch>::CLUSTER_AXES == 0, #derived);
            });
        }
        checks
    });
    let tmem_budget_msg = format!(
        "kernel `{name}`: its Tmem scratch parameters need more than {cols} TMEM columns (each tile rounded up to a power of two of at least 32 columns); a CTA has {lanes} lanes x {cols} columns: use smaller or fewer Tmem tiles",
        cols = kernel_spec::limits::MAX_TMEM_COLS,
        lanes = kernel_spec::limits::TMEM_LANES,
    );
    let pair_msg = format!(
        "kernel `{name}`: collective (cta_group::2) tensor-core work needs CTA pairs: a TmemPair scratch (and the collective MMA and commit that take it) needs a cluster whose x extent is a multiple of 2, and this kernel's cluster is ({cx}, {cy}, {cz}): use `cluster = (2, 1, 1)` (or another even x extent)"
    );
    let mixed_group_msg = format!(
        "kernel `{name}`: every tcgen05 op of a kernel uses one CTA group (ptxas rejects a kernel with both `.cta_group::1` and `.cta_group::2`), and this kernel has both collective TMEM (`TmemPair`, cta_group::2) and one CTA's `Tmem` (cta_group::1) scratch: make every TMEM scratch of a pair kernel a `TmemPair`"
    );
    let tmem_arch_check = if opts.arch.as_deref() == Some("sm_100a") {
        quote!()
    } else {
        let msg = format!(
            "kernel `{name}`: Tmem scratch is tensor memory, which exists only on sm_100a (tcgen05), and this kernel is also built for {}: add `arch = sm_100a` to `#[kernel(...)]`",
            opts.arch.as_deref().unwrap_or("sm_90a")
        );
        quote!(assert!(cols == 0, #msg);)
    };
    let tmem_scope_arch_check = if opts.arch.as_deref() == Some("sm_100a") {
        quote!()
    } else {
        let msg = format!(
            "kernel `{name}`: a TmemScope allocates tensor memory, which exists only on sm_100a (tcgen05), and this kernel is also built for {}: add `arch = sm_100a` to `#[kernel(...)]`",
            opts.arch.as_deref().unwrap_or("sm_90a")
        );
        quote!(assert!(!scoped, #msg);)
    };
    let budget_msg = format!(
        "kernel `{name}`: its scratch parameters need more than {} bytes ({} KiB) of shared memory, the most one CTA can use on the H100/H200 and the B200 (kernel_spec::limits::MAX_SMEM_BYTES); use fewer stages or smaller tiles",
        kernel_spec::limits::MAX_SMEM_BYTES,
        kernel_spec::limits::MAX_SMEM_BYTES / 1024
    );

    // The device items exist on nvptx64, and only for `arch` if given, and
    // only in the crate the device build is for (see `is_device_build_root`).
    let device_cfg = match &opts.arch {
        _ if !is_device_build_root() => quote!(#[cfg(any())]),
        Some(a) => quote!(#[cfg(all(target_arch = "nvptx64", target_feature = #a))]),
        None => quote!(#[cfg(target_arch = "nvptx64")]),
    };
    let archs = match &opts.arch {
        Some(a) => quote!(&[#a]),
        None => quote!(&[]),
    };
    // `min_blocks_per_sm`, `max_registers` and `allow_spills` go to the
    // build in the kernel-meta line (`kernel_host::build::kernel_meta`).
    let occupancy_meta = crate::options::meta_fields(opts);
    let mut per_instance = TokenStream::new();
    for inst in instances {
        let entry_name = if inst.is_empty() { name.to_string() } else { format!("{name}__{}", instance_suffix(inst)) };
        let entry_ident = Ident::new(&entry_name, name.span());
        let keep_ident = format_ident!("__KERNEL_KEEP_{}", entry_name);
        let inst_args = if inst.is_empty() { quote!() } else { quote!(<#(#inst),*>) };
        // The parameter types of this instance: the generics replaced by
        // the instance's values (`Tma<Tile<E, BM, 64, Sw>>` with `E = f16`,
        // `BM = 128`), for the items outside the generic functions.
        let inst_map: Vec<(Ident, InstanceValue)> = gen_ids.iter().map(|i| (*i).clone()).zip(inst.iter().cloned()).collect();
        let inst_tys: Vec<Type> = params.iter().map(|p| substitute_generics(&p.ty, &inst_map)).collect();
        let p_tys: Vec<&Type> = inst_tys.iter().collect();
        let inst_turbofish = if inst.is_empty() { quote!() } else { quote!(::<#(#inst),*>) };
        // Blackwell cluster kernels carry their cluster shape in the PTX.
        let reqncta = if opts.arch.as_deref() == Some("sm_100a") && cluster_ctas > 1 { format!(" reqnctapercluster={cx},{cy},{cz}") } else { String::new() };
        let smem_for_min_blocks = crate::options::smem_check(opts, &name.to_string(), quote!(<#name #inst_args as #krate::launch::KernelSpec>::SMEM_BYTES));
        let instance = if inst.is_empty() { String::new() } else { format!(" instance={}", inst.iter().map(value_text).collect::<Vec<_>>().join(",")) };
        let meta = format!("// kernel-meta entry={entry_name} maxntid={bx},{by},{bz} cluster={cx},{cy},{cz}{reqncta}{occupancy_meta} kernel={name}{instance} byaddr={{}}");
        let doc = format!("PTX entry point of kernel [`{name}`] (generated by `#[kernel]`).");
        // Parameters whose body value needs the parameter's address (TMA
        // descriptors): `mov` of the PTX parameter symbol + `cvta.param`.
        let conversions = params.iter().enumerate().map(|(i, p)| {
            let (pn, ty) = (&p.name, &inst_tys[i]);
            let addr_asm = format!("mov.b64 {{0}}, {entry_name}_param_{i};\n\tcvta.param.u64 {{0}}, {{0}};");
            quote! {
                let #pn: #ty = <#ty as #krate::launch::DeviceParam>::from_abi(#pn, if <#ty as #krate::launch::DeviceParam>::BY_ADDRESS {
                    let addr: u64;
                    // SAFETY: reads the address of this kernel's own parameter.
                    unsafe { ::core::arch::asm!(#addr_asm, out(reg64) addr, options(pure, nomem, nostack, preserves_flags)) };
                    addr
                } else {
                    0
                });
            }
        });
        let p_idx: Vec<u32> = (0..params.len() as u32).collect();
        // Host: parameter `i` is `params.i`; a by-address parameter's address
        // is that of its value inside `params`.
        let host_conversions = params.iter().enumerate().map(|(i, p)| {
            let (pn, ty) = (&p.name, &inst_tys[i]);
            let idx = syn::Index::from(i);
            quote! {
                let #pn: #ty = <#ty as #krate::launch::DeviceParam>::from_abi(
                    params.#idx,
                    if <#ty as #krate::launch::DeviceParam>::BY_ADDRESS { ::core::ptr::addr_of!(params.#idx) as u64 } else { 0 },
                );
            }
        });
        // Spanned at each type, so a non-DeviceParam type is reported there.
        let abi_tys: Vec<TokenStream> = params
            .iter()
            .zip(&inst_tys)
            .map(|(p, ty)| {
                let span = p.ty.span();
                quote_spanned!(span=> <#ty as #krate::launch::DeviceParam>::Abi)
            })
            .collect();
        per_instance.extend(quote! {
            impl #krate::launch::KernelSpec for #name #inst_args {
                const NAME: &'static str = #entry_name;
                const BLOCK: #krate::Dim3 = #krate::Dim3::new(#bx, #by, #bz);
                const CLUSTER: #krate::Dim3 = #krate::Dim3::new(#cx, #cy, #cz);
                const NON_PORTABLE_CLUSTER: bool = #non_portable;
                const SMEM_BYTES: u32 = <#name #inst_args>::__SMEM_BYTES as u32;
                const GLOBAL_SCRATCH_BYTES: usize = <#name #inst_args>::__GLOBAL_LAYOUT.1;
                type Params = (#(#abi_tys,)*);
                const ARCHS: &'static [&'static str] = #archs;
            }
            // Evaluate the layout (and its budget and arrivals checks) for this instance.
            const _: () = {
                let _ = <#name #inst_args as #krate::launch::KernelSpec>::SMEM_BYTES;
                #smem_for_min_blocks
                let _ = <#name #inst_args>::__TMEM_COLS;
                let _ = <#name #inst_args>::__TMEM_COLLECTIVE;
                let _ = <#name #inst_args>::__TMEM_SCOPED;
                <#name #inst_args>::__CHECKS
            };
            #[cfg(not(target_arch = "nvptx64"))]
            impl #krate::launch::HostEntry for #name #inst_args {
                // The pointer is the launch's global scratch, which the
                // emulator (the only caller) allocates for the run.
                #[allow(clippy::not_unsafe_ptr_arg_deref)]
                fn run_thread(params: &Self::Params, __global_scratch: *mut u8) {
                    #raw_note
                    #(#host_conversions)*
                    let _ = __global_scratch;
                    // SAFETY: the emulator runs this once per emulated thread of
                    // a launch with this kernel's block and cluster shape, with
                    // the launch's zeroed global scratch.
                    unsafe { #entry_fn #inst_turbofish(#(#p_names,)* #g_arg) }
                }
            }
            // On the host, keep the entry's prologue and body compiled, so
            // post-monomorphization rules (tile shapes, wgmma shapes, register
            // counts) are checked by a host build too, not only by the
            // device build.
            #[cfg(not(target_arch = "nvptx64"))]
            #[used]
            #[doc(hidden)]
            #[allow(non_upper_case_globals)]
            static #keep_ident: unsafe fn(#(#p_tys,)* #g_fn_ty) = #entry_fn #inst_turbofish;
            #device_cfg
            ::core::arch::global_asm!(#meta, const 0u64 #(| ((<#p_tys as #krate::launch::DeviceParam>::BY_ADDRESS as u64) << #p_idx))*);
            #device_cfg
            #[doc = #doc]
            #[no_mangle]
            #[allow(non_snake_case)]
            pub unsafe extern "ptx-kernel" fn #entry_ident(#(#p_names: <#p_tys as #krate::launch::DeviceParam>::Abi,)* #g_abi_decl) {
                #(#conversions)*
                // SAFETY: the launch contract of the kernel (all threads of the
                // grid run this with the declared block and cluster shape; the
                // host passes the zeroed global scratch last).
                unsafe { #entry_fn #inst_turbofish(#(#p_names,)* #g_abi_arg) }
            }
        });
    }

    quote! {
        #(#docs)*
        ///
        /// Launch metadata of this kernel (generated by `#[kernel]`): see
        /// `kernel_device::KernelSpec`.
        #[allow(non_camel_case_types)]
        #vis struct #name #struct_decl {
            _private: ::core::marker::PhantomData<fn() -> (#(#type_ids,)*)>,
        }

        #[allow(dead_code)]
        impl #gen_decl #name #gen_use #impl_where {
            #[doc(hidden)]
            pub const __SCRATCH_LAYOUT: ([usize; #n_scratch + 1], usize) = #krate::smem::scratch_layout([
                #((<#s_tys as #krate::smem::Scratch>::BYTES, <#s_tys as #krate::smem::Scratch>::ALIGN),)*
                // The slot `tcgen05.alloc` writes the TMEM address to.
                if Self::__TMEM_LAYOUT.1 > 0 { (4, 16) } else { (0, 1) }
            ]);
            #[doc(hidden)]
            pub const __GLOBAL_LAYOUT: ([usize; #n_globals], usize) = #krate::smem::scratch_layout([
                #((<#g_tys as #krate::global::GlobalScratch>::BYTES, <#g_tys as #krate::global::GlobalScratch>::ALIGN),)*
            ]);
            #[doc(hidden)]
            pub const __TMEM_LAYOUT: ([usize; #n_scratch], usize) = #krate::tmem::tmem_layout([
                #(<#s_tys as #krate::smem::Scratch>::TMEM_COLS),*
            ]);
            #[doc(hidden)]
            pub const __TMEM_COLS: usize = {
                let cols = Self::__TMEM_LAYOUT.1;
                assert!(cols <= #krate::tmem::TMEM_COLS, #tmem_budget_msg);
                #tmem_arch_check
                cols
            };
            #[doc(hidden)]
            pub const __TMEM_COLLECTIVE: bool = {
                let c = false #(|| <#s_tys as #krate::smem::Scratch>::TMEM_COLLECTIVE)*;
                assert!(!c || #cx % 2 == 0, #pair_msg);
                let one_cta = false #(|| (<#s_tys as #krate::smem::Scratch>::TMEM_COLS > 0 && !<#s_tys as #krate::smem::Scratch>::TMEM_COLLECTIVE))*;
                assert!(!(c && one_cta), #mixed_group_msg);
                c
            };
            /// Whether the kernel allocates TMEM in scopes (`TmemScope`):
            /// then the prologue keeps its allocation permit.
            #[doc(hidden)]
            pub const __TMEM_SCOPED: bool = {
                let scoped = false #(|| <#s_tys as #krate::smem::Scratch>::TMEM_SCOPED)*;
                #tmem_scope_arch_check
                scoped
            };
            #[doc(hidden)]
            pub const __SMEM_BYTES: usize = {
                let bytes = Self::__SCRATCH_LAYOUT.1;
                assert!(bytes <= #krate::launch::MAX_SMEM_BYTES, #budget_msg);
                bytes
            };
            #[doc(hidden)]
            pub const __HAS_BARRIERS: bool = false #(|| <#s_tys as #krate::smem::Scratch>::TAKES_ARRIVALS)*;
            #[doc(hidden)]
            pub const __CHECKS: () = { #(#arrivals_checks)* #(#cluster_barrier_checks)* };
            #[doc(hidden)]
            #[allow(unused_parens)]
            fn __check_types() {
                fn __device_param<T: #krate::launch::DeviceParam>() {}
                fn __scratch<T: #krate::smem::Scratch>() {}
                fn __global_scratch<T: #krate::global::GlobalScratch>() {}
                #(#param_checks)*
                #(#scratch_checks)*
                #(#global_checks)*
            }
        }

        #per_instance

        #raw_warnings

        /// Body of the kernel (generated by `#[kernel]`).
        #[doc(hidden)]
        #[inline(always)]
        #[allow(non_snake_case, clippy::too_many_arguments, unused_mut)]
        #(#other_attrs)*
        #vis #unsafety fn #body_fn #gen_decl (#(#(#p_attrs)* #p_pats: #p_tys,)* #(#s_pats: #s_tys,)* #(#g_pats: #g_tys,)*) #where_clause #block

        /// Prologue (scratch placement, barrier init), body, epilogue
        /// (generated by `#[kernel]`).
        ///
        /// # Safety
        /// Called once by every thread of a CTA launched with this kernel's
        /// block and cluster shape and `SMEM_BYTES` of dynamic shared memory.
        #[doc(hidden)]
        #[inline(always)]
        #[allow(non_snake_case, clippy::too_many_arguments, unused_unsafe)]
        #vis unsafe fn #entry_fn #gen_decl (#(#p_names: #p_tys,)* #g_decl) #where_clause {
            #[allow(clippy::let_unit_value)]
            let () = <#name #gen_use>::__CHECKS;
            let __smem = #krate::smem::dynamic_smem_base();
            let __offsets = <#name #gen_use>::__SCRATCH_LAYOUT.0;
            #(
                // SAFETY: the layout gives each scratch parameter its own aligned range.
                #[allow(unused_mut)]
                let mut #s_names = unsafe { <#s_tys as #krate::smem::Scratch>::from_smem(__smem.add(__offsets[#s_idx])) };
            )*
            let __global_offsets = <#name #gen_use>::__GLOBAL_LAYOUT.0;
            let _ = __global_offsets;
            #(
                // SAFETY: the launch's zeroed global scratch, one aligned range per parameter.
                #[allow(unused_mut)]
                let mut #g_names = unsafe { <#g_tys as #krate::global::GlobalScratch>::from_global(#krate::global::global_scratch_ptr(__global_scratch, __global_offsets[#g_idx])) };
            )*
            let __tmem_cols = <#name #gen_use>::__TMEM_COLS as u32;
            // SAFETY: the slot after the scratch parameters (4 bytes when TMEM is used).
            let __tmem_slot = unsafe { __smem.add(__offsets[#n_scratch]) } as *mut u32;
            if __tmem_cols > 0 && #krate::index::warp_idx() == 0 {
                // SAFETY: one whole warp (warp 0, converged at entry); a power of
                // two in 32..=512 (checked at compile time); a 4-byte SMEM slot.
                unsafe {
                    if <#name #gen_use>::__TMEM_COLLECTIVE {
                        // Collective TMEM: one warp in each CTA of the pair, cta_group::2.
                        #krate::tcgen05::raw::alloc::<#krate::tcgen05::Cta2>(#krate::smem::shared_addr(__tmem_slot), __tmem_cols);
                        #krate::tcgen05::raw::relinquish_alloc_permit::<#krate::tcgen05::Cta2>();
                    } else {
                        #krate::tcgen05::raw::alloc::<#krate::tcgen05::Cta1>(#krate::smem::shared_addr(__tmem_slot), __tmem_cols);
                        // A kernel that allocates in scopes later keeps its permit.
                        if !<#name #gen_use>::__TMEM_SCOPED {
                            #krate::tcgen05::raw::relinquish_alloc_permit::<#krate::tcgen05::Cta1>();
                        }
                    }
                }
            }
            if <#name #gen_use>::__HAS_BARRIERS && #krate::index::thread_linear() == 0 {
                // SAFETY: one thread, before any use; ordered by the barrier below.
                #( unsafe { #krate::smem::Scratch::init(&#s_names, #s_counts) }; )*
                #krate::fence::fence_mbarrier_init();
            }
            if #cluster_ctas > 1 {
                #krate::cluster::cluster_sync();
            } else if <#name #gen_use>::__HAS_BARRIERS || __tmem_cols > 0 {
                #krate::sync::sync_threads();
            }
            let mut __tmem_base = 0u32;
            if __tmem_cols > 0 {
                #krate::tcgen05::raw::fence_after_thread_sync();
                // SAFETY: written by `tcgen05.alloc` before the barrier above.
                __tmem_base = unsafe { ::core::ptr::read_volatile(__tmem_slot) };
                let __tmem_offsets = <#name #gen_use>::__TMEM_LAYOUT.0;
                // SAFETY: each TMEM scratch gets its own columns of the allocation.
                #( unsafe { #krate::smem::Scratch::bind_tmem(&mut #s_names, __tmem_base + __tmem_offsets[#s_idx] as u32) }; )*
            }
            #body_fn #turbofish(#(#p_names,)* #(#s_names,)* #(#g_names,)*);
            if __tmem_cols > 0 {
                // Every thread's tcgen05 work is ordered before the free.
                #krate::tcgen05::raw::fence_before_thread_sync();
                if <#name #gen_use>::__TMEM_COLLECTIVE {
                    // The peer's MMAs (issued by the leader) write this CTA's
                    // columns too: both CTAs are done before either frees.
                    #krate::cluster::cluster_sync();
                } else {
                    #krate::sync::sync_threads();
                }
                if #krate::index::warp_idx() == 0 {
                    #krate::tcgen05::raw::fence_after_thread_sync();
                    // SAFETY: warp 0; the allocation made above; no thread uses it any more.
                    unsafe {
                        if <#name #gen_use>::__TMEM_COLLECTIVE {
                            #krate::tcgen05::raw::dealloc::<#krate::tcgen05::Cta2>(__tmem_base, __tmem_cols)
                        } else {
                            #krate::tcgen05::raw::dealloc::<#krate::tcgen05::Cta1>(__tmem_base, __tmem_cols)
                        }
                    };
                }
            }
            if #cluster_ctas > 1 {
                // No CTA leaves while another may still use its shared memory.
                #krate::cluster::cluster_sync();
            }
        }
    }
}

/// The tensor-core generation of a kernel restricted to one architecture:
/// a Hopper-only op (`wgmma*`) in an `arch = sm_100a` kernel, or a
/// Blackwell-only op or type (`tcgen05*`, `Tmem`, `TensorCore`, ..) in an `arch = sm_90a` kernel, is
/// an error at the name; so is a TMA gather (`gather4`, `GatherRow`) in any
/// kernel not `arch = sm_100a` (seen in the kernel's signature and body; an op
/// reached through a helper function is caught by ptxas instead).
fn check_arch_ops(func: &ItemFn, opts: &Options, errors: &mut Vec<Error>) {
    let mut tokens = func.block.to_token_stream();
    tokens.extend(func.sig.inputs.to_token_stream());
    // TMA gather4 exists only on sm_100a: a kernel without `arch` is also
    // built for sm_90a, so it is refused there too.
    let gather_arch = opts.arch.as_deref().unwrap_or("sm_90a and sm_100a (no `arch` given)");
    if gather_arch != "sm_100a" {
        gather_walk(tokens.clone(), gather_arch, errors);
    }
    fn gather_walk(ts: TokenStream, arch: &str, errors: &mut Vec<Error>) {
        for tt in ts {
            match tt {
                proc_macro2::TokenTree::Group(g) => gather_walk(g.stream(), arch, errors),
                proc_macro2::TokenTree::Ident(id) if id == "gather4" || id == "GatherRow" => errors.push(Error::new(
                    id.span(),
                    format!("`{id}` is a TMA gather (`cp.async.bulk.tensor.2d.tile::gather4`), which exists only on sm_100a (Blackwell), and this kernel is built for {arch}: add `arch = sm_100a` to `#[kernel(...)]`, or load whole tiles with `Tma::load`"),
                )),
                _ => {}
            }
        }
    }
    let Some(arch) = opts.arch.as_deref() else { return };
    fn walk(ts: TokenStream, arch: &str, errors: &mut Vec<Error>) {
        for tt in ts {
            match tt {
                proc_macro2::TokenTree::Group(g) => walk(g.stream(), arch, errors),
                proc_macro2::TokenTree::Ident(id) => {
                    let n = id.to_string();
                    if arch == "sm_100a" && n.starts_with("wgmma") {
                        errors.push(Error::new(
                            id.span(),
                            format!("`{n}` is a Hopper (sm_90a) wgmma operation, and this kernel is `arch = sm_100a`, where wgmma does not exist: use tcgen05 (`tcgen05_mma` into a `Tmem` accumulator)"),
                        ));
                    } else if arch == "sm_90a" && (n == "try_cluster_cancel" || n == "query_cluster_cancel" || n == "dynamic_scheduling_loop" || n == "ClcResponse") {
                        errors.push(Error::new(
                            id.span(),
                            format!("`{n}` is cluster launch control (`clusterlaunchcontrol.try_cancel`/`query_cancel`), which exists only on sm_100 (Blackwell), and this kernel is `arch = sm_90a`: schedule statically with `nd_loop`, or make the kernel `arch = sm_100a`"),
                        ));
                    } else if arch == "sm_90a" && (n.starts_with("tcgen05") || ["Tmem", "TmemPair", "TmemScope", "TensorCore", "PairTma", "Cta2"].contains(&n.as_str())) {
                        errors.push(Error::new(
                            id.span(),
                            format!("`{n}` is a Blackwell (sm_100a) tcgen05/TMEM item, and this kernel is `arch = sm_90a`, which has no tensor memory: use wgmma, or make the kernel `arch = sm_100a`"),
                        ));
                    }
                }
                _ => {}
            }
        }
    }
    walk(tokens, arch, errors);
}

/// One CTA group per kernel (ptxas rejects a kernel with both
/// `.cta_group::1` and `.cta_group::2` tcgen05 instructions): in a kernel
/// with collective TMEM scratch (`TmemPair`, `Tmem<.., Cta2>`), which
/// `#[kernel]` allocates with `cta_group::2`, a cta_group::1 issuer (`Cta1`)
/// in the body is an error at the name. Seen on the kernel's own tokens,
/// like [`check_arch_ops`]; through a helper function ptxas reports it.
fn check_cta_group(func: &ItemFn, scratch: &[ScratchParam], errors: &mut Vec<Error>) {
    fn names(ts: TokenStream, out: &mut Vec<Ident>) {
        for tt in ts {
            match tt {
                proc_macro2::TokenTree::Group(g) => names(g.stream(), out),
                proc_macro2::TokenTree::Ident(id) => out.push(id),
                _ => {}
            }
        }
    }
    let mut tys = Vec::new();
    for s in scratch {
        names(s.ty.to_token_stream(), &mut tys);
    }
    let Some(pair) = tys.iter().find(|id| *id == "TmemPair" || *id == "Cta2") else { return };
    let pair = pair.to_string();
    let mut body = Vec::new();
    names(func.block.to_token_stream(), &mut body);
    for id in body.iter().filter(|id| *id == "Cta1") {
        errors.push(Error::new(
            id.span(),
            format!("`Cta1` issues cta_group::1 tensor-core work, and this kernel's TMEM is collective (a `{pair}` scratch, allocated with cta_group::2): every tcgen05 op of a kernel uses one CTA group (ptxas rejects a kernel with both); issue the pair's MMAs and commits with the pair's leader (`&leader` from `pair_role().leader()`)"),
        ));
    }
}

/// `ty` with every generic parameter of `map` replaced by its value: a
/// const generic used as a type's generic argument (`Tile<f16, BM, 64>`)
/// or an array length (`[T; S]`) by its literal, a type parameter (`E`,
/// `<E as Elem>::Acc`) by its type. (`E::Acc` is not rewritten: write
/// `<E as Trait>::Acc` in a kernel's parameter types.)
fn substitute_generics(ty: &Type, map: &[(Ident, InstanceValue)]) -> Type {
    use syn::visit_mut::VisitMut;
    struct Sub<'a>(&'a [(Ident, InstanceValue)]);
    impl Sub<'_> {
        fn lookup(&self, path: &syn::Path) -> Option<&InstanceValue> {
            let id = path.get_ident()?;
            self.0.iter().find(|(i, _)| i == id).map(|(_, v)| v)
        }
        fn lit(&self, path: &syn::Path) -> Option<Lit> {
            match self.lookup(path)? {
                InstanceValue::Lit(l) => Some(l.clone()),
                InstanceValue::Type(_) => None,
            }
        }
    }
    impl VisitMut for Sub<'_> {
        fn visit_generic_argument_mut(&mut self, arg: &mut syn::GenericArgument) {
            let lit = match arg {
                syn::GenericArgument::Type(Type::Path(tp)) if tp.qself.is_none() => self.lit(&tp.path),
                syn::GenericArgument::Const(syn::Expr::Path(ep)) => self.lit(&ep.path),
                _ => None,
            };
            match lit {
                Some(lit) => *arg = syn::GenericArgument::Const(syn::Expr::Lit(syn::ExprLit { attrs: Vec::new(), lit })),
                None => syn::visit_mut::visit_generic_argument_mut(self, arg),
            }
        }
        fn visit_type_mut(&mut self, t: &mut Type) {
            if let Type::Path(tp) = t {
                if tp.qself.is_none() {
                    if let Some(InstanceValue::Type(v)) = self.lookup(&tp.path) {
                        *t = v.clone();
                        return;
                    }
                }
            }
            syn::visit_mut::visit_type_mut(self, t);
        }
        fn visit_expr_mut(&mut self, e: &mut syn::Expr) {
            if let syn::Expr::Path(ep) = e {
                if let Some(lit) = self.lit(&ep.path) {
                    *e = syn::Expr::Lit(syn::ExprLit { attrs: Vec::new(), lit });
                    return;
                }
            }
            syn::visit_mut::visit_expr_mut(self, e);
        }
    }
    let mut t = ty.clone();
    Sub(map).visit_type_mut(&mut t);
    t
}
