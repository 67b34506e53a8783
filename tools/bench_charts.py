#!/usr/bin/env python3
"""SVG charts of a benchmark CSV, no plotting dependencies. The CSV's kind
is recognised by its columns:

* `bench` (examples/host/src/bin/bench.rs): ladder.svg (best TFLOP/s of each
  ladder step at the seed shape, with cuBLAS and cuBLASLt as lines) and
  shapes.svg (per shape: best cuBLAS, best cuBLASLt, our best ladder kernel,
  kernel_ops::matmul);
* `fp8_bench` (kernel-ops/src/bin/fp8_bench.rs): fp8.svg (per shape:
  cuBLASLt FP8 with fast accumulation and with its promoting default, our
  per-tensor kernel's best instance, our row-wise and block-scaled kernels);
* `grouped_bench` (kernel-ops/src/bin/grouped_bench.rs): grouped.svg (per
  problem: our grouped GEMM against the loop of cuBLAS calls);
* `grouped_fp8_bench` (kernel-ops/src/bin/grouped_fp8_bench.rs):
  grouped_fp8.svg (per problem: our block-scaled grouped GEMM against the
  faster loop of cuBLASLt FP8 calls);
* `decode_bench.csv` (python/bench/decode_bench.py): decode.svg (per
  case: GB/s of K and V read by our decode, SDPA cuDNN, SDPA
  FlashAttention-2, and the copy of K and V, read plus written).

usage: tools/bench_charts.py results/<run>/<bench>.csv [out_dir]
"""
import csv, sys, os, html

def load(path):
    with open(path) as f:
        return list(csv.DictReader(f))

def bar_chart(title, groups, series, colors, ylabel, width=900, height=420, lines=()):
    """groups: list of (label, {series: value}); lines: (label, value, color)."""
    # Room under the plot for the rotated group labels and the legend.
    longest = max([len(label) for label, _ in groups] + [0])
    left, right, top, bottom = max(70, int(5.2 * longest)), 20, 50, max(110, 50 + int(3.2 * longest))
    height = max(height, top + bottom + 250)
    pw, ph = width - left - right, height - top - bottom
    vmax = max([v for _, d in groups for v in d.values() if v == v] + [v for _, v, _ in lines] + [1.0])
    vmax = (int(vmax / 100) + 1) * 100
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width/2}" y="22" text-anchor="middle" font-size="15">{html.escape(title)}</text>']
    for i in range(0, vmax + 1, 100):
        y = top + ph - ph * i / vmax
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left+pw}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left-6}" y="{y+4:.1f}" text-anchor="end">{i}</text>')
    out.append(f'<text x="16" y="{top+ph/2}" transform="rotate(-90 16 {top+ph/2})" text-anchor="middle">{html.escape(ylabel)}</text>')
    gw = pw / max(len(groups), 1)
    bw = gw * 0.8 / max(len(series), 1)
    for gi, (label, d) in enumerate(groups):
        x0 = left + gi * gw + gw * 0.1
        for si, s in enumerate(series):
            v = d.get(s)
            if v is None or v != v:
                continue
            h = ph * v / vmax
            x = x0 + si * bw
            out.append(f'<rect x="{x:.1f}" y="{top+ph-h:.1f}" width="{bw*0.95:.1f}" height="{h:.1f}" fill="{colors[si]}"><title>{html.escape(s)}: {v:.1f}</title></rect>')
            out.append(f'<text x="{x+bw/2:.1f}" y="{top+ph-h-3:.1f}" text-anchor="middle" font-size="9">{v:.0f}</text>')
        out.append(f'<text x="{x0+gw*0.4:.1f}" y="{top+ph+14}" text-anchor="end" transform="rotate(-30 {x0+gw*0.4:.1f} {top+ph+14})" font-size="10">{html.escape(label)}</text>')
    for label, v, color in lines:
        y = top + ph - ph * v / vmax
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left+pw}" y2="{y:.1f}" stroke="{color}" stroke-dasharray="6,3"/>')
        out.append(f'<text x="{left+pw-4}" y="{y-4:.1f}" text-anchor="end" fill="{color}">{html.escape(label)} {v:.0f}</text>')
    lx = left
    for si, s in enumerate(series):
        out.append(f'<rect x="{lx}" y="{height-22}" width="12" height="12" fill="{colors[si]}"/>')
        out.append(f'<text x="{lx+16}" y="{height-12}">{html.escape(s)}</text>')
        lx += 24 + 8 * len(s)
    out.append('</svg>')
    return '\n'.join(out)

def fp8_charts(rows, out_dir):
    """fp8.svg from an fp8_bench CSV."""
    shapes = []
    for r in rows:
        key = f"{r['m']}x{r['n']}x{r['k']}"
        if key not in shapes:
            shapes.append(key)
    def best(shape, pred):
        v = [float(r['tflops']) for r in rows if f"{r['m']}x{r['n']}x{r['k']}" == shape and pred(r['contender'])]
        return max(v) if v else float('nan')
    series = ['cuBLASLt FP8, fast accumulation', 'cuBLASLt FP8 (promoting default)', 'ours: per-tensor (matmul_fp8)', 'ours: row-wise (matmul_fp8_rowwise)', 'ours: block-scaled (matmul_fp8_blockscaled)']
    groups = [(s, {
        series[0]: best(s, lambda c: c.startswith('cuBLASLt') and 'fast accumulation' in c),
        series[1]: best(s, lambda c: c.startswith('cuBLASLt') and 'fast accumulation' not in c),
        series[2]: best(s, lambda c: 'matmul_fp8 (' in c),
        series[3]: best(s, lambda c: 'rowwise' in c),
        series[4]: best(s, lambda c: 'blockscaled' in c),
    }) for s in shapes]
    device = rows[0]['device'] if rows else ''
    path = os.path.join(out_dir, 'fp8.svg')
    with open(path, 'w') as f:
        f.write(bar_chart(f'FP8 e4m3 GEMM, M x N x K (TFLOP/s, {device})', groups, series, ['#8e44ad', '#c39bd3', '#2e86c1', '#85c1e9', '#27ae60'], 'TFLOP/s', width=1100, height=460))
    print('wrote', path)

def grouped_charts(rows, out_dir, fp8=False):
    """grouped.svg from a grouped_bench CSV, or grouped_fp8.svg from a
    grouped_fp8_bench one (fp8=True): per problem, ours against the loop."""
    if fp8:
        series = ['ours (grouped, block-scaled FP8)', 'loop of cuBLASLt FP8 calls (the faster mode)']
        loop_col, name, title, colors = 'best_loop_tflops', 'grouped_fp8.svg', 'Grouped FP8 GEMM for mixture of experts', ['#27ae60', '#8e44ad']
    else:
        series = ['ours (grouped GEMM)', 'loop of cuBLAS calls']
        loop_col, name, title, colors = 'loop_tflops', 'grouped.svg', 'Grouped GEMM for mixture of experts', ['#27ae60', '#c0392b']
    groups = [(f"G{r['experts']} K{r['k']} N{r['n']} M{int(r['m_total']) // 1024}k {r['sizes']}", {
        series[0]: float(r['ours_tflops']), series[1]: float(r[loop_col])}) for r in rows]
    path = os.path.join(out_dir, name)
    with open(path, 'w') as f:
        f.write(bar_chart(f'{title}: G experts, total M rows (TFLOP/s)', groups, series, colors, 'TFLOP/s', width=1300, height=500))
    print('wrote', path)

def decode_chart(rows, out_dir):
    cases = []
    for r in rows:
        if r['case'] not in cases:
            cases.append(r['case'])
    series = sorted({r['contender'] for r in rows}, key=lambda c: (not c.startswith('kernel_ops'), c))
    groups = [(c.split(' (')[0], {r['contender']: float(r['GB_per_s']) for r in rows if r['case'] == c}) for c in cases]
    colors = ['#2e86c1', '#c0392b', '#8e44ad', '#7f8c8d', '#27ae60']
    path = os.path.join(out_dir, 'decode.svg')
    with open(path, 'w') as f:
        f.write(bar_chart('Decode attention, bf16 D128, 32 query heads (GB/s of K+V; FP8 rows: GB/s of e4m3 bytes)', groups, series, colors[:len(series)], 'GB/s', width=1200, height=480))
    print('wrote', path)


def main():
    rows = load(sys.argv[1])
    out_dir = sys.argv[2] if len(sys.argv) > 2 else os.path.dirname(sys.argv[1])
    columns = set(rows[0]) if rows else set()
    if 'vs_best_cublaslt_fp8' in columns:
        return fp8_charts(rows, out_dir)
    if 'best_loop_tflops' in columns:
        return grouped_charts(rows, out_dir, fp8=True)
    if 'loop_tflops' in columns:
        return grouped_charts(rows, out_dir)
    if 'GB_per_s' in columns:
        return decode_chart(rows, out_dir)
    shapes = []
    for r in rows:
        if r['shape'] not in shapes:
            shapes.append(r['shape'])
    def best(shape, pred):
        v = [float(r['tflops']) for r in rows if r['shape'] == shape and pred(r)]
        return max(v) if v else float('nan')
    seed = shapes[0]
    steps = sorted({int(r['step']) for r in rows if r['step'] != ''})
    groups = [(f'step {s}', {'best instance': best(seed, lambda r, s=s: r['step'] == str(s))}) for s in steps]
    lib = best(seed, lambda r: r['kind'] == 'library')
    if lib == lib:
        groups.append(('kernel_ops::matmul', {'best instance': lib}))
    lines = [('cuBLAS', best(seed, lambda r: r['kind'] == 'cublas'), '#c0392b'),
             ('cuBLASLt', best(seed, lambda r: r['kind'] == 'cublaslt'), '#8e44ad')]
    lines = [l for l in lines if l[1] == l[1]]
    with open(os.path.join(out_dir, 'ladder.svg'), 'w') as f:
        f.write(bar_chart(f'Hopper GEMM ladder at {seed} (TFLOP/s, f16 in, f32 acc)', groups, ['best instance'], ['#2e86c1'], 'TFLOP/s', lines=lines))
    series = ['cuBLAS (best layout)', 'cuBLASLt (best algo)', 'ours: best ladder kernel', 'kernel_ops::matmul']
    groups = []
    for s in shapes:
        groups.append((s.split(': ')[-1], {
            series[0]: best(s, lambda r: r['kind'] == 'cublas'),
            series[1]: best(s, lambda r: r['kind'] == 'cublaslt'),
            series[2]: best(s, lambda r: r['kind'] == 'ours'),
            series[3]: best(s, lambda r: r['kind'] == 'library'),
        }))
    with open(os.path.join(out_dir, 'shapes.svg'), 'w') as f:
        f.write(bar_chart('Shape suite (TFLOP/s)', groups, series, ['#c0392b', '#8e44ad', '#2e86c1', '#27ae60'], 'TFLOP/s', width=1100, height=460))
    print('wrote', os.path.join(out_dir, 'ladder.svg'), os.path.join(out_dir, 'shapes.svg'))

if __name__ == '__main__':
    main()
