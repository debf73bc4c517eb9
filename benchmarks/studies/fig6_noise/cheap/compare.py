"""Table: each cheap estimate vs the study's Monte Carlo 'LNA+O(1/B) mean' (H_pert), step 100.
Distance in seed sd as project.py: |optflow_T_mean + (H_pred - H_hb_T) - sgd_mean| / sgd_std."""
import csv
import glob
import json
from collections import defaultdict

from shared import CELLS, FIG6_CSV, OUT
from shared import STUDY_OUT as ST  # the parent study's runs and R = 64-128 LNA

fig6 = {(r["preset"], float(r["eta_z"]), float(r["ratio"])): r for r in csv.DictReader(open(FIG6_CSV))}
ref = {}
for c, key in CELLS.items():
    r = fig6[key]; m, s, o = float(r["sgd_mean"]), float(r["sgd_std"]), float(r["optflow_T_mean"])
    hb = json.load(open(f"{ST}/runs_{c}_B128.json"))["H_hb_T"]
    R = 64 if "m10" in c else 128
    mc = json.load(open(f"{ST}/lna_{c}_lna_R{R}_s7.json"))
    ref[c] = dict(m=m, s=s, o=o, hb=hb, mc=mc["H_pert"], mc_sec=mc["seconds"], R=R)
dist = lambda c, H: abs(ref[c]["o"] + H - ref[c]["hb"] - ref[c]["m"]) / ref[c]["s"]
print("| cell | HB T | MC H_pert (R) | MC shift | MC dist (sd) | now (sd) |")
print("|---|---|---|---|---|---|")
for c, v in ref.items():
    print(f"| {c} | {v['hb']:.4f} | {v['mc']:.4f} ({v['R']}) | {v['mc']-v['hb']:+.4f} | {dist(c, v['mc']):.2f} | {dist(c, v['hb']):.2f} |")
rows = defaultdict(dict)
for fn in sorted(glob.glob(f"{OUT}/lr_*.json")):
    d = json.load(open(fn)); lab = f"rank-{d['r']} {d['noise']} p{d['p']} s{d['seed']}"
    rows[lab][d["cell"]] = (d["H_pert"], d["seconds"], d["grad_calls_per_step"], d.get("kept_energy_mean"))
for fn in sorted(glob.glob(f"{OUT}/hy_*.json")):
    d = json.load(open(fn)); lab = f"hybrid: rank-{d['r']} class + MC within R_w={d['p']} s{d['seed']}"
    rows[lab][d["cell"]] = (d["H_pert"], d["seconds"], d["grad_calls_per_step"], None)
for fn in sorted(glob.glob(f"{OUT}/lna_*_lna_R*_s*.json")):
    d = json.load(open(fn)); lab = f"MC R={d['R_lin']} s{d['seed']}"
    rows[lab][d["cell"]] = (d["H_pert"], d["seconds"], d["grad_evals_per_step"], None)
for fn in sorted(glob.glob(f"{OUT}/orth_*_lna_R*_s*.json")):
    d = json.load(open(fn)); lab = f"MC-orth R={d['R_lin']} s{d['seed']}"
    rows[lab][d["cell"]] = (d["H_pert"], d["seconds"], d["grad_evals_per_step"], None)
for fn in sorted(glob.glob(f"{OUT}/x_*.json")):
    d = json.load(open(fn)); lab = d["label"]
    rows[lab][d["cell"]] = (d["H_pert"], d["seconds"], d["grad_calls_per_step"], None)
print()
print("| method | " + " | ".join(CELLS) + " | grads/step | s/start (m3, m10 ez3) |")
print("|---|" + "---|" * (len(CELLS) + 2))
for lab, dd in rows.items():
    cells = []
    for c in CELLS:
        if c in dd:
            H = dd[c][0]
            cells.append(f"{H:.4f} (Δ{(H-ref[c]['mc'])/(ref[c]['mc']-ref[c]['hb'])*100:+.0f}%; {dist(c,H):.2f} sd)")
        else:
            cells.append("–")
    g = next(iter(dd.values()))[2]
    sec = "/".join(f"{dd[c][1]:.1f}" if c in dd else "–" for c in ("m3_ez3_r10", "m10_ez3_r10"))
    print(f"| {lab} | " + " | ".join(cells) + f" | {g:.0f} | {sec} |")
