"""The induction-head family (Chen, Sheen, Wang, Yang 2024): its declaration.

n-gram Markov data (:class:`~odeflow.data.induction.InductionData`) and a
two-layer transformer whose copier, selector and classifier are learned in
stages; flows ``population`` (``L -> infinity``), ``copier`` (the exact-copier
reduction) and ``finite_l`` (a fixed sample of sequences); closed forms CF-IH1
and CF-IH2 (``docs/induction.md``).
"""

from odeflow.families.base import Family


class Induction(Family):
    """Induction heads: n-gram Markov data, a copier, a selector and a classifier."""

    name = "induction"
    title = "induction heads (Chen, Sheen, Wang, Yang 2024): n-gram Markov data"
    data_type = "odeflow.data.induction:InductionData"
    flows = {"population": "odeflow.fields.induction.population:PopulationFlow",
             "copier": "odeflow.fields.induction.copier:CopierFlow",
             "finite_l": "odeflow.fields.induction.finite_length:FiniteLengthFlow"}
    default_flow = "population"
    preset_names = ("ih-paper", "ih-point")
    checks = "odeflow.analysis.induction.verify:INDUCTION_CHECKS"
    check_names = ("I_S", "CF-IH1", "CF-IH2")
    figures = (
        ("ih-subsets", "odeflow.plots.induction:plot_subset_weights",
         "induction heads: selector weights p_S(t) stacked over log t", ("data", "t_end", "flow")),
        ("ih-classifier", "odeflow.plots.induction:plot_classifier_weight",
         "induction heads: classifier weight a(t) on log time", ("data", "t_end", "flow")),
        ("ih-copier", "odeflow.plots.induction:plot_copier_logits",
         "induction heads: copier logits (H x H) at start and end", ("data", "t_end", "flow")),
        ("ih-loss", "odeflow.plots.induction:plot_loss",
         "induction heads: loss over log time", ("data", "t_end", "flow")),
    )
    sweep_tasks = "odeflow.sweeps.induction:TASK_KINDS"
    experiments = {
        "induction": ("odeflow.cli.reproduce_induction:run",
                      "induction heads (Chen, Sheen, Wang, Yang 2024), preset ih-paper: "
                      "full-batch gradient descent on 9000 sequences of length 100 per seed "
                      "beside the population flow and the finite-L level (induction*.csv, "
                      "induction.png)"),
    }
    exports = {"InductionData": "odeflow.data.induction:InductionData"}
    train = "odeflow.training.induction:train"
    compare = "odeflow.training.induction:compare"
    run_options = {
        "loss": (("nll", "code"), None, "the loss (nll: -log y of the target; code: the "
                 "training code's cross-entropy of y as logits); default nll"),
        "stages": (str, ("population", "finite_l"), "the authors' staged run T_C,T_W: c "
                   "alone for T_C, then w alone (rate 1e5) for T_W, then a alone until "
                   "--t-end (default: every group jointly at rate 1)",
                   "odeflow.cli.run_induction:staged_schedule"),
    }
    strategies = "odeflow.testing.induction"
    docs = "induction.md"
