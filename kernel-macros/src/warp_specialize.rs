//! `#[warp_specialize(..)]` on a `match` inside a `#[kernel]` body: roles by
//! warpgroup (with per-role register counts through `setmaxnreg`) or by warp
//! inside a warpgroup. `#[kernel]` finds these attributes while rewriting the
//! body (attributes on expressions are unstable in Rust, so the attribute is
//! never seen by rustc), validates the roles and inserts the `setmaxnreg`.
use crate::options::Options;
use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::spanned::Spanned;
use syn::visit_mut::VisitMut;
use kernel_spec::registers::{counts_fit, entry_registers, register_pool, setmaxnreg_count_ok, EntryCountReason, REGISTER_POOL_RULE};
use syn::{Attribute, Error, Expr, ExprMatch, Lit, Pat, RangeLimits};

const VALID: &str = "`warpgroups`, `warps`, `registers = [..]`";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum By {
    Warpgroups,
    Warps,
}

struct Spec {
    by: By,
    registers: Option<(Span, Vec<u64>)>,
}

fn parse_spec(attr: &Attribute) -> syn::Result<Spec> {
    let mut by = None;
    let mut registers = None;
    attr.parse_nested_meta(|m| {
        if m.path.is_ident("warpgroups") || m.path.is_ident("warps") {
            let b = if m.path.is_ident("warpgroups") { By::Warpgroups } else { By::Warps };
            if by.replace(b).is_some() {
                return Err(m.error("give one role kind: `warpgroups` or `warps`"));
            }
            Ok(())
        } else if m.path.is_ident("registers") {
            let value = m.value()?;
            let arr: syn::ExprArray = value.parse()?;
            let mut v = Vec::new();
            for e in &arr.elems {
                match e {
                    Expr::Lit(syn::ExprLit { lit: Lit::Int(i), .. }) => v.push(i.base10_parse::<u64>()?),
                    other => return Err(Error::new_spanned(other, "register counts must be integer literals")),
                }
            }
            registers = Some((arr.span(), v));
            Ok(())
        } else {
            let name = quote::ToTokens::to_token_stream(&m.path).to_string();
            Err(m.error(format!("unknown `#[warp_specialize]` option `{name}`; valid options: {VALID}")))
        }
    })?;
    let by = by.ok_or_else(|| Error::new(attr.span(), "say how roles are assigned: `#[warp_specialize(warpgroups, ..)]` or `#[warp_specialize(warps)]`"))?;
    if by == By::Warps && registers.is_some() {
        return Err(Error::new(registers.as_ref().map(|r: &(Span, Vec<u64>)| r.0).unwrap_or_else(|| attr.span()), "`registers` applies to roles by `warpgroups` (setmaxnreg works per warpgroup)"));
    }
    Ok(Spec { by, registers })
}

/// The role indices an arm pattern covers, or `None` for `_`.
fn pattern_indices(pat: &Pat, out: &mut Vec<u64>) -> syn::Result<bool> {
    match pat {
        Pat::Wild(_) => Ok(false),
        Pat::Lit(l) => match &l.lit {
            Lit::Int(i) => {
                out.push(i.base10_parse()?);
                Ok(true)
            }
            other => Err(Error::new_spanned(other, "a role is an integer literal")),
        },
        Pat::Or(o) => {
            for c in &o.cases {
                if !pattern_indices(c, out)? {
                    return Err(Error::new_spanned(c, "`_` cannot be part of an or-pattern of roles"));
                }
            }
            Ok(true)
        }
        Pat::Range(r) => {
            let bound = |e: &Option<Box<Expr>>| -> syn::Result<u64> {
                match e.as_deref() {
                    Some(Expr::Lit(syn::ExprLit { lit: Lit::Int(i), .. })) => i.base10_parse(),
                    _ => Err(Error::new_spanned(r, "role ranges need integer literal bounds (`0..=1`)")),
                }
            };
            let (lo, hi) = (bound(&r.start)?, bound(&r.end)?);
            let hi = if matches!(r.limits, RangeLimits::HalfOpen(_)) { hi.saturating_sub(1) } else { hi };
            out.extend(lo..=hi);
            Ok(true)
        }
        other => Err(Error::new_spanned(other, "a role pattern is an integer, `a | b`, `a..=b` or `_`")),
    }
}

fn is_call_to(e: &Expr, name: &str) -> bool {
    match e {
        Expr::Call(c) => matches!(&*c.func, Expr::Path(p) if p.path.segments.last().map(|s| s.ident == name).unwrap_or(false)),
        Expr::Paren(p) => is_call_to(&p.expr, name),
        _ => false,
    }
}

/// The error of per-warpgroup register counts `regs` (one per warpgroup of a
/// block of `threads` threads, whose entry count is `baseline`; each a
/// valid `setmaxnreg` count) over the CTA's register pool
/// (`kernel_spec::registers::counts_fit`), or `None` when they fit: the
/// rule, the values and counts that fit (lowering the smallest counts
/// first, down to 24).
fn over_pool(regs: &[u64], threads: u64, baseline: u64) -> Option<String> {
    let counts: Vec<u32> = regs.iter().map(|&r| u32::try_from(r).unwrap_or(u32::MAX)).collect();
    if counts_fit(&counts) {
        return None;
    }
    let units = regs.len() as u64;
    let pool = u64::from(register_pool(u32::try_from(threads).unwrap_or(u32::MAX)));
    let sum: u64 = regs.iter().sum();
    let plus = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join(" + ");
    // Counts that fit: lower the smallest counts first (the producer's,
    // usually), none below setmaxnreg's 24.
    let mut fixed = regs.to_vec();
    let mut excess = sum - pool;
    let mut order: Vec<usize> = (0..fixed.len()).collect();
    order.sort_by_key(|&i| fixed[i]);
    for i in order {
        let cut = excess.min(fixed[i].saturating_sub(24));
        fixed[i] -= cut;
        excess -= cut;
    }
    let changed = regs.iter().zip(&fixed).filter(|(a, b)| a != b).count();
    let list = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
    let fix = match (excess, changed) {
        (0, 1) => format!("lower a count by {}, e.g. `registers = [{}]` ({} = {pool} fits)", sum - pool, list(&fixed), plus(&fixed)),
        (0, _) => format!("lower the counts by {} in all, e.g. `registers = [{}]` ({} = {pool} fits)", sum - pool, list(&fixed), plus(&fixed)),
        _ => format!("use fewer warpgroups: even 24 each ({}) is over the pool", 24 * units),
    };
    Some(format!(
        "register counts {} = {sum} are over the CTA's register pool, {units} warpgroups x {baseline} = {pool} per thread: \
         {REGISTER_POOL_RULE}; with {sum} a setmaxnreg.inc waits forever (the kernel hangs). \
         {}. Fix: {fix}",
        plus(regs),
        EntryCountReason(u32::try_from(threads).unwrap_or(u32::MAX))
    ))
}

/// Validates one annotated match and prepends `setmaxnreg` to its arms.
fn rewrite(m: &mut ExprMatch, spec: &Spec, opts: &Options, errors: &mut Vec<Error>) {
    let threads = opts.block.volume();
    let (scrutinee, units) = match spec.by {
        By::Warpgroups => ("warpgroup_idx", threads / 128),
        By::Warps => ("warp_in_warpgroup", 4),
    };
    if !is_call_to(&m.expr, scrutinee) {
        errors.push(Error::new(m.expr.span(), format!("a `#[warp_specialize({})]` match must be on `{scrutinee}()`", if spec.by == By::Warpgroups { "warpgroups" } else { "warps" })));
        return;
    }
    if spec.by == By::Warpgroups && (threads % 128 != 0 || opts.block.y != 1 || opts.block.z != 1) {
        errors.push(Error::new(m.span(), format!("roles by warpgroup need a block of whole warpgroups (`block = warpgroups(N)`); this block has {threads} threads")));
        return;
    }
    // Register counts: legal values and the pool (kernel_spec::registers).
    let threads32 = u32::try_from(threads).unwrap_or(u32::MAX);
    let baseline = u64::from(entry_registers(threads32));
    if let Some((span, regs)) = &spec.registers {
        if regs.len() as u64 != units {
            errors.push(Error::new(*span, format!("`registers` needs one count per warpgroup: the block has {units}, {} given", regs.len())));
            return;
        }
        // A cap lowers the entry count, and with it the pool setmaxnreg
        // moves registers in: the counts would be checked against the wrong pool.
        let cap = match (opts.max_registers, opts.min_blocks_per_sm) {
            (Some((r, s)), _) => Some((format!("max_registers = {r}"), s)),
            (None, Some((n, s))) if n > 1 => Some((format!("min_blocks_per_sm = {n}"), s)),
            _ => None,
        };
        if let Some((opt, opt_span)) = cap {
            let mut e = Error::new(
                *span,
                format!(
                    "`registers = [..]` (setmaxnreg) and `#[kernel({opt})]` do not go together: setmaxnreg moves registers within \
                     the pool of the kernel's entry count ({baseline} registers per thread for {threads} threads), which the cap lowers; \
                     set each warpgroup's count with `registers` and drop `{opt}`"
                ),
            );
            e.combine(Error::new(opt_span, format!("`{opt}` is here")));
            errors.push(e);
            return;
        }
        for &r in regs {
            if !u32::try_from(r).is_ok_and(setmaxnreg_count_ok) {
                errors.push(Error::new(*span, format!("register count {r} is not allowed: setmaxnreg takes a multiple of 8 in 24..=256")));
                return;
            }
        }
        if let Some(msg) = over_pool(regs, threads, baseline) {
            errors.push(Error::new(*span, msg));
            return;
        }
    }
    let mut seen: Vec<(u64, Span)> = Vec::new();
    let mut covered_by_wild = Vec::new();
    for arm in m.arms.iter_mut() {
        let mut idx = Vec::new();
        let concrete = match pattern_indices(&arm.pat, &mut idx) {
            Ok(c) => c,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        if !concrete {
            covered_by_wild = (0..units).filter(|u| !seen.iter().any(|(s, _)| s == u)).collect();
            idx = covered_by_wild.clone();
        }
        for &i in &idx {
            if concrete && i >= units {
                errors.push(Error::new(arm.pat.span(), format!("role {i} is outside the block: it has {units} {} (0..{units})", if spec.by == By::Warpgroups { "warpgroups" } else { "warps per warpgroup" })));
            }
            if concrete {
                if let Some((_, _)) = seen.iter().find(|(s, _)| *s == i) {
                    errors.push(Error::new(arm.pat.span(), format!("role {i} is claimed by two arms: each warp{} has one role", if spec.by == By::Warpgroups { "group" } else { "" })));
                }
                seen.push((i, arm.pat.span()));
            }
        }
        let Some((_, regs)) = &spec.registers else { continue };
        let counts: Vec<u64> = idx.iter().filter(|&&i| i < units).map(|&i| regs[i as usize]).collect();
        let Some(&r) = counts.first() else { continue };
        if counts.iter().any(|&c| c != r) {
            errors.push(Error::new(arm.pat.span(), "warpgroups sharing an arm must have the same register count (one setmaxnreg per arm)"));
            continue;
        }
        let r_lit = proc_macro2::Literal::u32_unsuffixed(r as u32);
        let set = if r > baseline {
            quote!(::kernel_device::wgmma::setmaxnreg_inc::<#r_lit>();)
        } else if r < baseline {
            quote!(::kernel_device::wgmma::setmaxnreg_dec::<#r_lit>();)
        } else {
            quote!()
        };
        let body = &arm.body;
        arm.body = Box::new(syn::parse_quote!({ #set #body }));
    }
    let _ = covered_by_wild;
}

struct Finder<'a> {
    opts: &'a Options,
    errors: &'a mut Vec<Error>,
}

impl VisitMut for Finder<'_> {
    fn visit_expr_match_mut(&mut self, m: &mut ExprMatch) {
        let mut spec = None;
        let mut keep = Vec::new();
        for a in m.attrs.drain(..) {
            if a.path().is_ident("warp_specialize") {
                match parse_spec(&a) {
                    Ok(s) if spec.is_none() => spec = Some(s),
                    Ok(_) => self.errors.push(Error::new(a.span(), "duplicate `#[warp_specialize]` on one match")),
                    Err(e) => self.errors.push(e),
                }
            } else {
                keep.push(a);
            }
        }
        m.attrs = keep;
        syn::visit_mut::visit_expr_match_mut(self, m);
        if let Some(s) = spec {
            rewrite(m, &s, self.opts, self.errors);
        }
    }
    fn visit_expr_mut(&mut self, e: &mut Expr) {
        // `#[warp_specialize]` on anything but a match.
        let attrs = match e {
            Expr::Match(_) => None,
            Expr::If(x) => Some(&mut x.attrs),
            Expr::Block(x) => Some(&mut x.attrs),
            Expr::Call(x) => Some(&mut x.attrs),
            Expr::Loop(x) => Some(&mut x.attrs),
            Expr::ForLoop(x) => Some(&mut x.attrs),
            _ => None,
        };
        if let Some(attrs) = attrs {
            if let Some(a) = attrs.iter().find(|a| a.path().is_ident("warp_specialize")) {
                self.errors.push(Error::new(a.span(), "`#[warp_specialize]` goes on a `match` over the role index (`match warpgroup_idx() { .. }`)"));
                attrs.retain(|a| !a.path().is_ident("warp_specialize"));
            }
        }
        syn::visit_mut::visit_expr_mut(self, e);
    }
}

/// Rewrites every `#[warp_specialize]` match in a kernel body.
pub fn expand_in_body(block: &mut syn::Block, opts: &Options, errors: &mut Vec<Error>) {
    Finder { opts, errors }.visit_block_mut(block);
}

/// `#[warp_specialize]` used as an item attribute (on a function): always an
/// error that says where it goes.
pub fn misplaced(item: TokenStream) -> TokenStream {
    let e = Error::new(
        Span::call_site(),
        "`#[warp_specialize(..)]` goes on a `match` over the role index inside a `#[kernel]` function body \
         (e.g. `#[warp_specialize(warpgroups, registers = [232, 232, 40])] match warpgroup_idx() { .. }`); \
         `#[kernel]` expands it",
    )
    .to_compile_error();
    quote!(#e #item)
}

#[cfg(test)]
mod tests {
    use super::over_pool;

    #[test]
    fn counts_over_the_pool_name_the_rule_the_values_and_counts_that_fit() {
        // The H100 hang: 384 threads start with 168 each, pool 504.
        let e = over_pool(&[240, 240, 32], 384, 168).expect("512 > 504");
        assert!(e.contains("240 + 240 + 32 = 512") && e.contains("3 warpgroups x 168 = 504"), "{e}");
        assert!(e.contains("must sum to at most the pool"), "{e}");
        assert!(e.contains("lower a count by 8, e.g. `registers = [240, 240, 24]` (240 + 240 + 24 = 504 fits)"), "{e}");
        // The smallest count lowered first, then the next, none below 24.
        let e = over_pool(&[240, 240, 240], 384, 168).expect("720 > 504");
        assert!(e.contains("lower a count by 216, e.g. `registers = [24, 240, 240]`"), "{e}");
        let e = over_pool(&[256, 256, 256], 384, 168).expect("768 > 504");
        assert!(e.contains("lower the counts by 264 in all, e.g. `registers = [24, 224, 256]` (24 + 224 + 256 = 504 fits)"), "{e}");
        // What the library uses fits.
        assert_eq!(over_pool(&[232, 232, 40], 384, 168), None);
        assert_eq!(over_pool(&[240, 240, 24], 384, 168), None);
        assert_eq!(over_pool(&[160, 160, 160, 32], 512, 128), None);
    }
}
