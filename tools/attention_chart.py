#!/usr/bin/env python3
"""The attention results of one GPU run as a table (table.md) and a chart
(attention.svg): `attention_bench`'s CSV (ours.csv) beside
`attention_baselines.py`'s (baselines.csv), TFLOP/s per problem.

usage: tools/attention_chart.py results/<run>
"""
import csv
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_charts import bar_chart  # noqa: E402

d = sys.argv[1]
ours = {r["name"]: float(r["tflops"]) for r in csv.DictReader(open(f"{d}/ours.csv"))}
base = {}
for r in csv.DictReader(open(f"{d}/baselines.csv")):
    c = r["contender"]
    key = "cuDNN" if c.startswith("cuDNN") else "FlashAttention-2" if c.startswith("Flash") else "Pallas attention_mgpu"
    base.setdefault(r["name"], {})[key] = float(r["tflops"])
series = ["kernel_ops::attention", "cuDNN", "Pallas attention_mgpu", "FlashAttention-2"]
colors = ["#d62728", "#1f77b4", "#2ca02c", "#999999"]
groups = [(name, {"kernel_ops::attention": v, **base.get(name, {})}) for name, v in ours.items()]
svg = bar_chart("Attention forward, f16, H100 SXM (700 W): same inputs, one process per framework, one run", groups, series, colors, "TFLOP/s")
open(f"{d}/attention.svg", "w").write(svg)
nan = float("nan")
rows = ["| problem | ours | cuDNN | Pallas attention_mgpu | FlashAttention-2 | ours / cuDNN | ours / Pallas |", "|---|---:|---:|---:|---:|---:|---:|"]
for name, g in groups:
    o, c, p, f = (g.get(k, nan) for k in series)
    rows.append(f"| {name} | {o:.1f} | {c:.1f} | {p:.1f} | {f:.1f} | {o / c:.2f} | {o / p:.2f} |")
open(f"{d}/table.md", "w").write("\n".join(rows) + "\n")
print("\n".join(rows))
