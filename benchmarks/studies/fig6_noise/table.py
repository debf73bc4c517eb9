"""Print the main table of the noise study (docs/studies.md) from its JSON results, markdown."""
import csv
import json
import os

from common import CELLS, FIG6_CSV, OUT

D = OUT
fig6 = {(r["preset"], float(r["eta_z"]), float(r["ratio"])): r
        for r in csv.DictReader(open(FIG6_CSV))}


def load(fn):
    fn = os.path.join(D, fn)
    return json.load(open(fn)) if os.path.exists(fn) else None
hdr = ("| cell | fig6 runs mean ± sd (10 starts) | fig6 optflow_T | R runs: mean H | sd | H(mean z) | HB Level T | "
       "Jensen gap | mean shift | LNA Jensen 0.5tr(H''C) | LNA H(m)+J | LNA+O(1/B) mean (pert) | mc2 closure | nonlinear Gaussian-noise HB |")
print(hdr); print("|" + "---|" * hdr.count("|")[:-1] if False else "|" + "---|" * (hdr.count("|") - 1))
for c, (preset, ez, ratio) in CELLS.items():
    r = load(f"runs_{c}_B128.json")
    R_lin = 64 if "m10" in c else 128
    l = load(f"lna_{c}_lna_R{R_lin}_s7.json"); m = load(f"lna_{c}_mc2_R{R_lin}_s7.json")
    nl = load(f"nl_{c}_gauss_R40_B128.json")
    f6 = fig6[(preset, ez, ratio)]
    def g(d, k, fmt="{:.4f}"):
        return fmt.format(d[k]) if d and d.get(k) is not None else "–"
    print(f"| {preset} ηZ={ez:g} r={ratio:g} | {float(f6['sgd_mean']):.4f} ± {float(f6['sgd_std']):.4f} | "
          f"{float(f6['optflow_T_mean']):.4f} | {g(r,'H_runs_mean')} ± {g(r,'H_runs_sem')} | {g(r,'H_runs_sd')} | "
          f"{g(r,'H_at_mean_z')} | {g(r,'H_hb_T')} | {g(r,'jensen_gap','{:+.4f}')} | {g(r,'mean_shift','{:+.4f}')} | "
          f"{g(l,'jensen_2nd','{:+.4f}')} | {g(l,'H_pred')} | {g(l,'H_pert')} | {g(m,'H_pred')} | "
          f"{g(nl,'H_mean')} ± {g(nl,'H_sem')} (sd {g(nl,'H_sd')}) |")
