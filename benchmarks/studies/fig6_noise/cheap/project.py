"""Shift the Fig. 6 optimiser-flow ensemble mean by each noise correction measured from seed 0's
start (correction = prediction - discrete HB on Level T, same start) and read the distance to the
runs in seed sd (fig6.csv). Assumes the correction is the same for the other 9 starts."""
import csv
import json
import os

from common import CELLS, FIG6_CSV, OUT

os.chdir(OUT)
fig6 = {(r["preset"], float(r["eta_z"]), float(r["ratio"])): r
        for r in csv.DictReader(open(FIG6_CSV))}
for c, key in CELLS.items():
    r = fig6[key]; m, s, o = float(r["sgd_mean"]), float(r["sgd_std"]), float(r["optflow_T_mean"])
    run = json.load(open(f"runs_{c}_B128.json")); hb = run["H_hb_T"]
    R = 64 if "m10" in c else 128
    out = [f"{c}: now {abs(o-m)/s:.2f} sd"]
    lna = f"lna_{c}_lna_R{R}_s7.json"
    if os.path.exists(lna):
        l = json.load(open(lna))
        out.append(f"LNA-Jensen only {abs(o + l['H_pred'] - hb - m)/s:.2f} sd")
        out.append(f"LNA+O(1/B) mean {abs(o + l['H_pert'] - hb - m)/s:.2f} sd")
    mc = f"lna_{c}_mc2_R{R}_s7.json"
    if os.path.exists(mc):
        l = json.load(open(mc)); out.append(f"mc2 {abs(o + l['H_pred'] - hb - m)/s:.2f} sd")
    nl = json.load(open(f"nl_{c}_gauss_R40_B128.json"))
    out.append(f"nonlinear Gaussian HB {abs(o + nl['H_mean'] - hb - m)/s:.2f} sd")
    out.append(f"runs-from-seed0 themselves {abs(o + run['H_runs_mean'] - hb - m)/s:.2f} sd")
    print(" | ".join(out))
