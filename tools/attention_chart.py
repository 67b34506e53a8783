#!/usr/bin/env python3
"""The attention results of one GPU run as a table and a chart, TFLOP/s per
problem: the forward's (table.md, attention.svg) from `attention_bench`'s
CSV (ours.csv) beside `attention_baselines.py`'s (baselines.csv); with
`--backward`, the backward's (table_bwd.md, attention_bwd.svg) from
`attention_bench --backward`'s CSV (attention_bwd_bench.csv) beside
`attention_baselines.py --backward`'s (given as the third argument).

usage: tools/attention_chart.py results/<run>
       tools/attention_chart.py --backward results/<run>/<ours dir> <baselines.csv>
"""
import csv
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_charts import bar_chart  # noqa: E402

nan = float("nan")
backward = sys.argv[1] == "--backward"
if backward:
    d, base_csv = sys.argv[2], sys.argv[3]
    ours_csv, title, out_svg, out_md = f"{d}/attention_bwd_bench.csv", "Attention backward", f"{d}/attention_bwd.svg", f"{d}/table_bwd.md"
else:
    d = sys.argv[1]
    base_csv, ours_csv, title, out_svg, out_md = f"{d}/baselines.csv", f"{d}/ours.csv", "Attention forward", f"{d}/attention.svg", f"{d}/table.md"
ours = {r["name"]: float(r["tflops"]) for r in csv.DictReader(open(ours_csv))}
base = {}
for r in csv.DictReader(open(base_csv)):
    c = r["contender"]
    if c.startswith("ours"):
        continue
    key = "cuDNN" if c.startswith("cuDNN") else "FlashAttention-2" if c.startswith("Flash") else "Pallas attention_mgpu"
    base.setdefault(r["name"], {})[key] = float(r["tflops"])
series = ["kernel_ops::attention", "cuDNN", "Pallas attention_mgpu", "FlashAttention-2"]
colors = ["#d62728", "#1f77b4", "#2ca02c", "#999999"]
if backward:  # Pallas has no backward kernel in attention_mgpu
    series, colors = [series[0], series[1], series[3]], [colors[0], colors[1], colors[3]]
groups = [(name, {"kernel_ops::attention": v, **base.get(name, {})}) for name, v in ours.items()]
svg = bar_chart(f"{title}, f16, H100 SXM (700 W): same inputs, one process per framework, one run", groups, series, colors, "TFLOP/s")
open(out_svg, "w").write(svg)
if backward:
    rows = ["| problem | ours | cuDNN | FlashAttention-2 | ours / cuDNN | ours / FA2 |", "|---|---:|---:|---:|---:|---:|"]
    for name, g in groups:
        o, c, f = (g.get(k, nan) for k in series)
        rows.append(f"| {name} | {o:.1f} | {c:.1f} | {f:.1f} | {o / c:.2f} | {o / f:.2f} |")
else:
    rows = ["| problem | ours | cuDNN | Pallas attention_mgpu | FlashAttention-2 | ours / cuDNN | ours / Pallas |", "|---|---:|---:|---:|---:|---:|---:|"]
    for name, g in groups:
        o, c, p, f = (g.get(k, nan) for k in series)
        rows.append(f"| {name} | {o:.1f} | {c:.1f} | {p:.1f} | {f:.1f} | {o / c:.2f} | {o / p:.2f} |")
open(out_md, "w").write("\n".join(rows) + "\n")
print("\n".join(rows))
