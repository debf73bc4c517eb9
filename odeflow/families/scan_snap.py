"""The Scan and Snap family (Tian, Wang, Chen, Du, NeurIPS 2023): its declaration.

Sequence classes (:class:`~odeflow.data.DataModel`) and one attention layer;
flows ``exact`` (Level E, Lemma 1, Eqns 3-4, 7), ``finite_t`` (Level T),
``reduced`` (Level R, Theorem 1, Eqns 8-10) and ``snap`` (Sec. 6, Theorem 4,
Eqns 13-14); closed forms CF1-CF6; the
paper's Figs. 4-6 as reproductions (``docs/model.md``, ``docs/reproduce.md``).
"""

from odeflow.families.base import Family


class ScanSnap(Family):
    """Scan and Snap: sequence classes, one attention layer, two learning rates."""

    name = "scan_snap"
    title = "Scan and Snap (Tian et al. 2023): sequence classes, one attention layer"
    data_type = "odeflow.data.model:DataModel"
    flows = {"exact": "odeflow.fields.exact:ExactFlow",
             "finite_t": "odeflow.fields.finite_t:FiniteTFlow",
             "reduced": "odeflow.fields.reduced:ReducedFlow",
             "snap": "odeflow.fields.snap:SnapFlow"}
    default_flow = "exact"
    solve_defaults = {"eta_y": 1.0, "eta_z": 0.1}
    accepts_none = True
    preset_names = ("syn-small", "snap-small", "shared-query-small", "shared-query-medium",
                    "syn-medium-1", "syn-medium-3", "syn-medium-5", "syn-medium-10")
    checks = "odeflow.analysis.checks_scan_snap:SCAN_SNAP_CHECKS"
    check_names = ("CF1", "CF2", "CF3", "CF4", "CF5", "CF6")
    figures = (
        ("margin", "odeflow.plots.scan_snap_figures:margin_figure",
         "h(t) and gamma(t): CF1, CF2 asymptotes, t_0, Lemma 5 recursion (Fig. 8)",
         ("data", "eta_y", "t_end")),
        ("scan-snap", "odeflow.plots.scan_snap:plot_scan_snap",
         "B_n(t) over (eta_Y, eta_Z): Level R beside CF6 (Figs. 3, 9)",
         ("data", "t_end", "flow")),
        ("attention-map", "odeflow.plots.scan_snap_figures:attention_map_figure",
         "attention f_n(t) as a tokens x time heat map (Fig. 4)",
         ("data", "eta_y", "eta_z", "t_end", "flow")),
        ("relative-gain", "odeflow.plots.scan_snap_figures:relative_gain_figure",
         "Eqn 11: relative gain from the flow beside the closed form",
         ("data", "eta_y", "eta_z", "t_end", "flow")),
        ("entropy", "odeflow.plots.entropy:plot_entropy",
         "distinct-token attention entropy against eta_Y and eta_Z (Fig. 6)",
         ("data", "t_end", "flow")),
        ("levels", "odeflow.plots.scan_snap_figures:levels_figure",
         "z_ml(t) from Level E, Level R and SGD side by side",
         ("data", "eta_y", "eta_z", "t_end")),
    )
    sweep_tasks = "odeflow.sweeps.scan_snap:TASK_KINDS"
    experiments = {
        "fig4": ("odeflow.cli.reproduce_scan_snap:run",
                 "Scan and Snap Fig. 4: SGD (momentum 0.9, batch 128, T = 128) on syn-small "
                 "from the zero start, eta_Z = eta_Y = 1: loss and attention entropy per step "
                 "beside Levels E, R, T and the heavy-ball flows (fig4.csv, fig4.png)"),
        "fig5": ("odeflow.cli.reproduce_scan_snap:run",
                 "Fig. 5: the same with Adam at eta_Z = 0.1 and 1 (fig5.csv, fig5.png)"),
        "fig6": ("odeflow.cli.reproduce_scan_snap:run",
                 "Fig. 6: the final attention entropy of SGD over syn-medium-1/3/5/10 x eta_Z "
                 "in {0.5, 1, 2, 3} x eta_Y/eta_Z in {1, 2, 5, 10} (64 cells, uniform start) "
                 "beside the levels; recall curves of Appendix G (fig6*.csv, fig6*.png)"),
    }
    exports = {"DataModel": "odeflow.data.model:DataModel",
               "SequenceClass": "odeflow.data.model:SequenceClass"}
    train = "odeflow.training.protocol:train"
    compare = "odeflow.analysis.compare:compare_runs"
    run_options = {"eta_y": (float, None, "decoder learning rate eta_Y (1)"),
                   "eta_z": (float, None, "attention learning rate eta_Z (0.1)")}
    strategies = "odeflow.testing.scan_snap"
    docs = "model.md"
