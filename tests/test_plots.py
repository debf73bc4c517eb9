"""odeflow.plots, ``odeflow plot`` and the docs gallery, rendered headless (Agg).

Every figure is drawn with small grids and short horizons so the module stays
well under a minute: the PNG is non-empty, the axes are labelled, and the
expected curves and artists are there. The entropy test checks the data
behind paper Fig. 6, not the picture.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.collections import QuadMesh  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

import odeflow  # noqa: E402
from odeflow import plots  # noqa: E402
from odeflow.analysis.closed_forms import decoder_margin, transition_time  # noqa: E402
from odeflow.cli import main as cli_main  # noqa: E402
from odeflow.plots.levels import sgd_available  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def saved(fig, tmp_path, name="figure.png") -> Path:
    path = plots.save_figure(fig, tmp_path / name)
    assert path.stat().st_size > 5000
    return path


def curves(ax, min_points=2):
    """Lines of ``ax`` with at least ``min_points`` points (curves, not legend proxies)."""
    return [line for line in ax.get_lines() if len(line.get_xdata()) >= min_points]


def markers(ax):
    """Single-point marker lines of ``ax``."""
    return [line for line in ax.get_lines() if len(line.get_xdata()) == 1
            and line.get_marker() not in (None, "None", "")]


def assert_labelled(ax):
    assert ax.get_xlabel() and ax.get_ylabel()


# --------------------------------------------------------------------- figures
def test_margin_figure(tmp_path):
    fig = plots.plot_margin(t_end=1e3, markers=12)
    assert isinstance(fig, Figure)
    ax_h, ax_g = fig.axes
    for ax in (ax_h, ax_g):
        assert_labelled(ax)
        assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
        # closed form, early asymptote, late asymptote, Lemma 5 markers, t_0 line
        assert len(curves(ax)) == 5
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert len(labels) == 5
    assert any("Eqn 45" in t for t in [x.get_text() for x in ax_h.get_legend().get_texts()])
    t0 = float(transition_time(34, 1.0, 0.5))
    t0_lines = [line for line in ax_g.get_lines() if line.get_linestyle() == ":"]
    assert t0_lines and np.allclose(t0_lines[0].get_xdata(), t0)
    saved(fig, tmp_path)


@pytest.mark.parametrize("t_end", [1e300, 1e260])
def test_margin_far_horizon_draws_without_overflow(tmp_path, t_end):
    """Autoscaling's margin past t_end = 1e300 and the log locator's decade past the end
    overflowed in exp/power ("overflow encountered in exp", issue 31): the time axis is
    now exactly [t_start, t_end] with decade ticks below the largest float."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = plots.plot_margin(t_end=t_end, markers=6)
        saved(fig, tmp_path)
    for ax in fig.axes:
        assert ax.get_xlim()[1] == pytest.approx(t_end)
        ticks = ax.get_xticks()
        assert 2 <= len(ticks) <= 7 and np.all(np.isfinite(ticks)) and ticks.max() <= t_end


def test_lemma5_recursion_tracks_cf1():
    """The discrete recursion (per visit, t = k/pi) follows Eqn 44's closed form."""
    h = plots.lemma5_margin(eta_y=0.1, vocab_size=30, visits=5000)
    k = np.array([100, 1000, 5000])
    continuous = decoder_margin(k / 0.5, 30, 0.1, 0.5)
    assert np.all(np.abs(h[k] - continuous) / continuous < 0.02)
    assert h[0] == 0.0 and np.all(np.diff(h) > 0)
    with pytest.raises(odeflow.ValidationError, match="visits"):
        plots.lemma5_margin(1.0, 30, 0)


def test_scan_snap_figure(tmp_path):
    fig = plots.plot_scan_snap(eta_ys=(0.5, 2.0), eta_zs=(0.5, 2.0), t_end=1e3, points=40)
    ax_y, ax_z, ax_r = fig.axes
    for ax in (ax_y, ax_z):
        assert_labelled(ax)
        assert len(curves(ax)) == 4  # numerics and CF6 for two learning rates
        assert len(markers(ax)) == 2  # B_n(t_0) for each
        # numerics and closed form agree (Level R against CF6, weak common token)
        numeric, closed = curves(ax)[0].get_ydata(), curves(ax)[1].get_ydata()
        assert np.allclose(numeric, closed, rtol=0.05)
    assert_labelled(ax_r)
    assert len(markers(ax_r)) == 4 and len(curves(ax_r)) == 1
    saved(fig, tmp_path)


def test_scan_snap_rejects_data_outside_theorem4():
    with pytest.raises(odeflow.ValidationError, match="common token"):
        plots.plot_scan_snap(data=odeflow.DataModel.preset("shared-query-small"), t_end=10)
    with pytest.raises(odeflow.ValidationError, match="one query token"):
        plots.plot_scan_snap(data=odeflow.DataModel.preset("syn-small"), t_end=10)


def test_attention_map_figure(tmp_path):
    data = odeflow.DataModel.preset("syn-small")
    fig = plots.plot_attention_map(data, eta_z=5.0, t_end=100.0, points=30)
    main_axes = [ax for ax in fig.axes if ax.get_title()]
    assert len(main_axes) == 2
    for ax in main_axes:
        assert_labelled(ax)
        meshes = [c for c in ax.collections if isinstance(c, QuadMesh)]
        assert len(meshes) == 1
        image = np.asarray(meshes[0].get_array()).reshape(20, 30)  # support of class 1 x time
        # common tokens (bottom rows) lose attention, the likeliest distinct token gains
        assert image[:10, -1].max() < image[:10, 0].min()
        assert image[-1, -1] > image[-1, 0]
    colourbar = [ax for ax in fig.axes if ax not in main_axes]
    assert len(colourbar) == 1 and "Eqn 5" in colourbar[0].get_ylabel()
    saved(fig, tmp_path)


def test_relative_gain_figure(tmp_path):
    fig = plots.plot_relative_gain(t_end=100.0, points=30)
    assert len(fig.axes) == 2
    for ax in fig.axes:
        assert_labelled(ax)
        # three pairs: the flow's curve and the closed form's markers each
        assert len(curves(ax)) == 6
    saved(fig, tmp_path)
    reduced = plots.relative_gain_curves(flow="reduced", t_end=100.0, points=30)
    exact = plots.relative_gain_curves(flow="exact", t_end=100.0, points=30)
    assert reduced.max_difference < 1e-6
    assert exact.max_difference > 100 * reduced.max_difference
    with pytest.raises(odeflow.ValidationError, match="pairs"):
        plots.relative_gain_curves(pairs=[(0, 19)])


def test_entropy_decreases_with_eta_z():
    """Paper Fig. 6 / Theorem 4: at fixed eta_Y a larger eta_Z gives sparser attention."""
    grid = plots.entropy_grid(eta_ys=(0.5, 2.0), eta_zs=(0.3, 1.0, 3.0), t_end=1e3)
    assert grid.entropy.shape == (2, 3)
    assert np.all(np.diff(grid.entropy, axis=1) < 0)  # down with eta_Z at fixed eta_Y
    assert np.all(np.diff(grid.entropy, axis=0) > 0)  # up with eta_Y at fixed eta_Z
    assert np.all(grid.entropy < grid.initial_entropy) and grid.initial_entropy < grid.max_entropy


def test_distinct_entropy_of_uniform_attention():
    data = odeflow.DataModel.preset("syn-small")
    traj = odeflow.solve(data, flow="reduced", t_span=(0, 1.0), t_eval=[0.0, 1.0])
    probs = data.probs(32)[data.distinct_tokens(32)]
    p = probs / probs.sum()
    assert plots.distinct_entropy(traj, 32)[0] == pytest.approx(-np.sum(p * np.log(p)))


def test_entropy_figure(tmp_path):
    grid = plots.entropy_grid(eta_ys=(1.0,), eta_zs=(0.3, 3.0), t_end=100.0)
    fig = plots.plot_entropy(grid)
    ax_z, ax_y = fig.axes
    for ax in fig.axes:
        assert_labelled(ax)
    # one line per eta_Y (left) or eta_Z (right), plus the t = 0 and uniform references
    assert len(curves(ax_z)) == 1 + 2
    assert len(curves(ax_y, min_points=1)) == 2 + 2
    assert np.allclose(curves(ax_z)[0].get_ydata(), grid.entropy[0])
    saved(fig, tmp_path)
    with pytest.raises(odeflow.ValidationError):
        plots.plot_entropy(grid, t_end=5.0)


def test_levels_figure_without_sgd(tmp_path):
    fig = plots.plot_levels(steps=50, sgd=False, points=30)
    (ax,) = fig.axes
    assert_labelled(ax)
    assert len(curves(ax)) == 2 * 4  # Level E and Level R for four tokens
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("Level E" in x for x in labels) and not any("SGD" in x for x in labels)
    saved(fig, tmp_path)


@pytest.mark.skipif(not sgd_available(), reason="odeflow.training is not importable")
def test_levels_figure_with_sgd(tmp_path):
    fig = plots.plot_levels(steps=30, sgd=True, batch_size=8, seq_len=16, points=20)
    (ax,) = fig.axes
    assert len(curves(ax)) == 3 * 4
    assert any("SGD" in t.get_text() for t in ax.get_legend().get_texts())
    saved(fig, tmp_path)


def test_given_axes_are_used():
    fig = Figure()
    ax = fig.add_subplot()
    assert plots.plot_levels(steps=20, sgd=False, points=10, ax=ax) is fig
    fig2 = Figure()
    axes = fig2.subplots(1, 2)
    assert plots.plot_margin(t_end=100.0, axes=axes) is fig2
    with pytest.raises(odeflow.ValidationError, match="axes"):
        plots.plot_margin(axes=[axes[0]])


def test_save_figure_rejects_unknown_suffix(tmp_path):
    with pytest.raises(odeflow.ValidationError, match="out"):
        plots.save_figure(Figure(), tmp_path / "figure.jpg")


# ------------------------------------------------------------------ registry, CLI
def test_registry_names_every_plot_function():
    assert set(plots.FIGURES) == {"margin", "scan-snap", "attention-map", "relative-gain",
                                  "entropy", "levels", "ih-subsets", "ih-classifier",
                                  "ih-copier", "ih-loss", "ts-accuracy", "ts-spectra"}
    for spec in plots.FIGURES.values():
        assert callable(spec.function)
        assert spec.function.__name__.startswith("plot_") or \
            spec.function.__name__.endswith("_figure")
    assert plots.figure_arguments("levels", t_end=40.0) == {"t_end": 40.0}
    assert plots.figure_arguments("relative-gain", flow="exact") == {"flow": "exact"}
    with pytest.raises(odeflow.ValidationError, match="eta_y"):
        plots.figure_arguments("entropy", eta_y=1.0)
    with pytest.raises(odeflow.ValidationError, match="name"):
        plots.make_figure("nope")


def test_cli_plot_one_figure(tmp_path, capsys):
    out = tmp_path / "margin.pdf"
    assert cli_main(["plot", "margin", "--t-end", "100", "--out", str(out)]) == 0
    assert out.read_bytes()[:4] == b"%PDF"
    assert cli_main(["plot", "entropy", "--eta-y", "1", "--out", str(tmp_path / "e.png")]) == 2
    assert "--eta-y" in capsys.readouterr().err


def test_cli_plot_all(tmp_path):
    outdir = tmp_path / "figures"
    assert cli_main(["plot", "all", "--outdir", str(outdir), "--t-end", "40"]) == 0
    written = sorted(p.stem for p in outdir.glob("*.png"))
    assert written == sorted(plots.FIGURES)
    assert all(p.stat().st_size > 5000 for p in outdir.glob("*.png"))


# ---------------------------------------------------------------------- gallery
def test_gallery_builds(tmp_path, monkeypatch):
    """docs/make_gallery.py writes the page and every picture it references."""
    spec = importlib.util.spec_from_file_location("make_gallery", ROOT / "docs" / "make_gallery.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "make_gallery", module)
    spec.loader.exec_module(module)
    module.build(tmp_path)
    page = (tmp_path / "gallery.md").read_text()
    images = [line.split()[-1] for line in page.splitlines() if line.startswith("```{figure}")]
    assert len(images) == 7
    for image in images:
        assert (tmp_path / image).stat().st_size > 5000
    assert page.count("\n## ") == 7 and "Eqn" in page


@pytest.fixture(scope="module")
def fig4_experiment():
    from odeflow.experiments import paper

    return paper.fig4(1, 6, progress=False)


def test_fig4_one_framed_legend_below_with_the_caption(fig4_experiment, tmp_path):
    """Item 8 of the first-hour issue: a legend with a background outside the data, the
    runs labelled alike in both panels, a short x-label, the heavy-ball flows' early
    start said on the figure."""
    from odeflow.plots.paper import plot_fig4

    fig = plot_fig4(fig4_experiment)
    assert all(ax.get_legend() is None for ax in fig.axes)  # no legend over the data
    (legend,) = fig.legends
    assert legend.get_frame_on() and legend.get_frame().get_alpha() == 1.0
    labels = [t.get_text() for t in legend.get_texts()]
    assert len(labels) == len(set(labels)) and "SGD runs, 1 seed (mean $\\pm$ sd)" in labels
    loss_ax, entropy_ax = fig.axes[:2]
    for ax in (loss_ax, entropy_ax):
        assert ax.get_xlabel() == "flow time $t_k$ of step $k$"
        runs = [line for line in ax.get_lines() if line.get_label().startswith("SGD runs")]
        assert len(runs) == 1 and runs[0].get_color() == plots.paper.series_colour(0)
    caption = legend.get_title().get_text()
    assert "warm-up map" in caption and "half a step before" in caption
    assert "3.526" in caption  # ln 34, the runs' loss at step 0
    saved(fig, tmp_path)


def test_recall_has_one_legend_and_a_title_with_steps_and_seeds(tmp_path):
    from odeflow.plots.paper import plot_recall

    thresholds = np.asarray(plots.paper.RECALL_THRESHOLDS)
    rows = [{"preset": p, "M": 33.0, "eta_z": ez, "ratio": q, "steps": 5, "seeds": 1,
             "recall": np.clip(1 - 3 * thresholds * ez, 0, 1)}
            for p in ("syn-medium-1", "syn-medium-3") for ez in (0.5, 3.0) for q in (1.0, 10.0)]
    fig = plot_recall(rows)
    assert all(ax.get_legend() is None for ax in fig.axes) and len(fig.legends) == 1
    assert "after 5 steps, 1 seed" in fig._suptitle.get_text()
    saved(fig, tmp_path)
