"""The two-stage family: odeflow's model of two-stage learning of disentangled features.

After Gong et al. 2025 ("Disentangling Feature Structure: A Mathematically
Provable Two-Stage Training Dynamics in Transformers", arXiv 2502.20681), of
which only the abstract is readable: normalised ReLU attention with
block-diagonal weights ``W = diag(W_P, W_Q)`` classifies in context, from
elementary (large-margin, P) and specialised (small-margin, Q) features; the
model, its closed forms and every number are odeflow's (``docs/two_stage.md``).
Flows ``population`` (``N -> infinity``) and ``finite_n`` (a fixed sample of
prompts).
"""

from odeflow.families.base import Family


class TwoStage(Family):
    """Two-stage learning of elementary then specialised features, in the weights' spectrum."""

    name = "two_stage"
    title = ("two-stage features (after Gong et al. 2025; odeflow's model): P/Q margins, "
             "ReLU attention")
    data_type = "odeflow.data.two_stage:TwoStageData"
    flows = {"population": "odeflow.fields.two_stage.population:PopulationFlow",
             "finite_n": "odeflow.fields.two_stage.finite_n:FiniteSampleFlow"}
    default_flow = "population"
    preset_names = ("ts-default", "ts-cluster")
    checks = "odeflow.analysis.two_stage.verify:TWO_STAGE_CHECKS"
    check_names = ("CF-TS1", "CF-TS2")
    figures = (
        ("ts-accuracy", "odeflow.plots.two_stage_figures:accuracy_figure",
         "two-stage: accuracy on P-only, Q-only and both-feature queries over log t",
         ("data", "t_end", "flow")),
        ("ts-spectra", "odeflow.plots.two_stage_figures:spectra_figure",
         "two-stage: singular values of W_P and W_Q over log t", ("data", "t_end", "flow")),
    )
    sweep_tasks = "odeflow.sweeps.two_stage:TASK_KINDS"
    experiments = {
        "two-stage": ("odeflow.cli.reproduce_two_stage:run",
                      "two-stage features (odeflow's model after Gong et al. 2025), preset "
                      "ts-default: gradient descent on fixed samples of prompts (step 0.2; "
                      "5 seeds, 1000 steps by default) beside the population flow; stage "
                      "times, spectra, rank truncation (two_stage.csv, stages.csv, "
                      "rank_truncation.csv, two_stage.png)",
                      {"seeds": 5, "steps": 1000}),
    }
    exports = {"TwoStageData": "odeflow.data.two_stage:TwoStageData"}
    train = "odeflow.training.two_stage:train"
    compare = "odeflow.training.two_stage:compare"
    run_options = {}   # its flows take the shared options only
    strategies = "odeflow.testing.two_stage"
    docs = "two_stage.md"
