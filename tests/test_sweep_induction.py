"""Sweeps of the induction-head family (issue 23): ``task = "induction_flow"`` over model
fields (``init.w_plus``, ``prior.alpha``) and the solve's options (``loss``), through the
API and the CLI; each point equals a direct :func:`odeflow.solve` at its settings."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

xr = pytest.importorskip("xarray")
pytest.importorskip("zarr")

import odeflow  # noqa: E402
from odeflow.data.induction import POINT_KERNEL, InductionData  # noqa: E402
from odeflow.errors import ValidationError  # noqa: E402
from odeflow.sweeps import TASKS, make_spec, open_store, register, sweep  # noqa: E402
from odeflow.sweeps.induction import INDUCTION_FLOW, run_induction_flow  # noqa: E402
from odeflow.sweeps.journal import read_journal  # noqa: E402
from tests.cli_helpers import cli_in  # noqa: E402
from tests.sweep_helpers import assert_same_numbers  # noqa: E402

GRID = {"init.w_plus": [1.0, 3.0], "loss": ["nll", "code"]}
SETTINGS = {"t_end": 0.5}

CONFIG = """
[sweep]
task = "induction_flow"
preset = "ih-point"
backend = "serial"
[sweep.grid]
init.w_plus = [1.0, 3.0]
loss = ["nll", "code"]
[sweep.settings]
t_end = 0.5
"""

#: A small Dirichlet model of its own in the config file (4 kernels), swept over alpha.
DIRICHLET = """
family = "induction"
vocab_size = 2
n_gram = 2
heads = 2
degree = 1
[prior]
kind = "dirichlet"
alpha = 0.5
num_kernels = 4
seed = 3
[sweep]
task = "induction_flow"
backend = "serial"
[sweep.grid]
prior.alpha = [0.5, 2.0]
flow = ["population", "copier"]
[sweep.settings]
t_end = 0.5
"""


def point_model(w_plus: float) -> InductionData:
    """ih-point with ``w+ = w_plus``, built directly (not through the sweep's edits)."""
    return InductionData(2, 3, 2, 2, prior="point", kernel=POINT_KERNEL, w_plus=w_plus,
                         w_minus=0.1, c0=0.01, a0=0.01)


@pytest.fixture(scope="module")
def swept():
    return sweep("induction_flow", GRID, settings=SETTINGS, data="ih-point", backend="serial")


def test_every_point_equals_a_direct_solve(swept):
    times = swept.time.values
    assert swept.subset.values.tolist() == ["{}", "{1}", "{2}", "{1,2}"]
    assert (swept.error.values == "").all() and (swept.status.values == 0).all()
    for w_plus in GRID["init.w_plus"]:
        for loss in GRID["loss"]:
            direct = odeflow.solve(point_model(w_plus), loss=loss, t_span=(0.0, 0.5),
                                   t_eval=times, progress=False)
            point = swept.sel({"init.w_plus": w_plus, "loss": loss})
            np.testing.assert_allclose(point.a.values, direct.a, rtol=1e-12)
            np.testing.assert_allclose(point.population_loss.values, direct.loss, rtol=1e-12)
            np.testing.assert_allclose(point.subset_weights.values, direct.subset_weights.T,
                                       rtol=1e-12)
            np.testing.assert_allclose(point.copier_logits.values,
                                       np.moveaxis(direct.copier_logits, 0, -1), rtol=1e-12)
            assert int(point.nfev) == direct.stats["nfev"]
    # the swept values reach the solve: the points differ
    assert not np.allclose(swept.a.values[0, 0], swept.a.values[1, 0])
    assert not np.allclose(swept.a.values[0, 0], swept.a.values[0, 1])


def test_the_cli_writes_the_same_sweep(swept, tmp_path):
    cfg = tmp_path / "ih.toml"
    cfg.write_text(CONFIG)
    store = tmp_path / "ih.zarr"
    done = cli_in(tmp_path, "sweep", str(cfg), "--out", str(store), "--no-progress")
    assert done.returncode == 0, done.stderr
    assert "population_loss(end)" in done.stdout
    assert_same_numbers(open_store(store), swept)
    plotted = cli_in(tmp_path, "plot", "sweep", "--store", str(store), "--var", "population_loss",
                     "--out", str(tmp_path / "loss.png"))
    assert plotted.returncode == 0, plotted.stderr
    assert (tmp_path / "loss.png").stat().st_size > 0
    default = cli_in(tmp_path, "plot", "sweep", "--store", str(store))
    assert default.returncode == 0, default.stderr  # no entropy here: the task's first output
    assert "sweep a ->" in default.stdout and (tmp_path / "sweep-a.png").stat().st_size > 0
    refused = cli_in(tmp_path, "plot", "sweep", "--store", str(store), "--var", "entropy", "--out",
                     str(tmp_path / "e.png"))
    assert refused.returncode == 2 and "var:" in refused.stderr, refused.stderr


def test_a_dirichlet_model_of_the_config_swept_over_alpha(tmp_path):
    cfg = tmp_path / "dir.toml"
    cfg.write_text(DIRICHLET)
    store = tmp_path / "dir.zarr"
    done = cli_in(tmp_path, "sweep", str(cfg), "--out", str(store), "--no-progress")
    assert done.returncode == 0, done.stderr
    ds = open_store(store)
    assert (ds.error.values == "").all()
    assert np.isnan(ds.copier_logits.sel(flow="copier").values).all()  # no w in the copier
    model = InductionData(2, 2, 2, 1, prior="dirichlet", alpha=2.0, num_kernels=4, seed=3)
    direct = odeflow.solve(model, flow="copier", t_span=(0.0, 0.5), t_eval=ds.time.values,
                           progress=False)
    point = ds.sel({"prior.alpha": 2.0, "flow": "copier"})
    np.testing.assert_allclose(point.population_loss.values, direct.loss, rtol=1e-12)
    # another alpha, other kernels: another loss at t = 0
    assert ds.population_loss.values[0, 0, 0] != ds.population_loss.values[1, 0, 0]


@pytest.mark.parametrize("grid, field", [
    ({"prior.nope": [1.0]}, "grid.prior.nope"),
    ({"prior.alpha": [1.0]}, "grid.prior.alpha"),  # ih-point has a point prior: no alpha
    ({"init.w_plus": [1.0, "x"]}, "grid.init.w_plus[1]"),
    ({"init.c0": [0.0]}, "grid.init.c0[0]"),  # refused by the model itself
    ({"loss": ["mse"]}, "grid.loss[0]"),
    ({"flow": ["exact"]}, "grid.flow[0]"),
    ({"rate_w": [-1.0]}, "grid.rate_w[0]"),
    ({"population_loss": [1.0]}, "grid.population_loss"),
])
def test_a_bad_key_or_value_is_refused_by_name(grid, field):
    with pytest.raises(ValidationError) as err:
        sweep("induction_flow", grid, settings=SETTINGS, data="ih-point", backend="serial")
    assert err.value.field == field


def test_rate_w_is_not_swept_for_the_copier_flow_alone():
    with pytest.raises(ValidationError) as err:
        sweep("induction_flow", {"rate_w": [0.5, 1.0]}, settings={**SETTINGS, "flow": "copier"},
              data="ih-point", backend="serial")
    assert err.value.field == "grid.rate_w"
    spec = make_spec("induction_flow", {"flow": ["population", "copier"],
                                        "rate_w": [0.5, 1.0]}, data="ih-point")
    assert spec.shape == (2, 2)  # the population points differ


def test_a_fixed_rate_w_is_refused_for_the_copier_flow_alone():
    with pytest.raises(ValidationError) as err:
        make_spec("induction_flow", {"loss": ["nll", "code"]},
                  settings={**SETTINGS, "flow": "copier", "rate_w": 0.5}, data="ih-point")
    assert err.value.field == "settings.rate_w" and "ignored" in err.value.reason
    spec = make_spec("induction_flow", {"loss": ["nll", "code"]},
                     settings={**SETTINGS, "flow": "copier", "rate_w": 1.0}, data="ih-point")
    assert spec.shape == (2,)  # the default rate is harmless


def test_the_finite_length_level_is_swept_over_its_sample():
    """``flow = "finite_l"`` with ``seq_len`` swept: each point equals the direct solve on
    the sample of that length (``sample_size``, ``seed`` fixed), and the points differ."""
    settings = {**SETTINGS, "flow": "finite_l", "loss": "code", "sample_size": 120,
                "seed": 5}
    ds = sweep("induction_flow", {"seq_len": [8, 40]}, settings=settings, data="ih-point",
               backend="serial")
    assert (ds.error.values == "").all() and (ds.status.values == 0).all()
    for length in (8, 40):
        direct = odeflow.solve(InductionData.preset("ih-point"), flow="finite_l", loss="code",
                               seq_len=length, sample_size=120, seed=5, t_span=(0.0, 0.5),
                               t_eval=ds.time.values, progress=False)
        point = ds.sel(seq_len=length)
        np.testing.assert_allclose(point.a.values, direct.a, rtol=1e-12)
        np.testing.assert_allclose(point.population_loss.values, direct.loss, rtol=1e-12)
    assert not np.allclose(ds.population_loss.values[0], ds.population_loss.values[1])


@pytest.mark.parametrize("grid, settings, field", [
    ({"seq_len": [8, 40]}, {}, "grid.seq_len"),
    ({"loss": ["nll", "code"]}, {"sample_size": 50}, "settings.sample_size"),
    ({"loss": ["nll", "code"]}, {"seed": 2, "flow": "copier"}, "settings.seed"),
    ({"seed": [-1, 0]}, {"flow": "finite_l"}, "grid.seed[0]"),
])
def test_sample_parameters_need_the_finite_length_flow(grid, settings, field):
    with pytest.raises(ValidationError) as err:
        make_spec("induction_flow", grid, settings={**SETTINGS, **settings}, data="ih-point")
    assert err.value.field == field


def test_a_model_of_the_other_family_is_refused_by_name():
    with pytest.raises(ValidationError) as err:
        sweep("exact", {"eta_y": [1.0]}, data="ih-point", backend="serial")
    assert err.value.field == "preset" and "induction_flow" in err.value.reason
    with pytest.raises(ValidationError) as err:
        sweep("induction_flow", {"t_end": [1.0]}, data="syn-small", backend="serial")
    assert err.value.field == "preset"


def test_a_bad_alpha_in_a_config_exits_2_before_any_point(tmp_path):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(DIRICHLET.replace("prior.alpha = [0.5, 2.0]", "prior.alpha = [0.5, -1]"))
    store = tmp_path / "bad.zarr"
    done = cli_in(tmp_path, "sweep", str(cfg), "--out", str(store), "--no-progress")
    assert done.returncode == 2
    assert "grid.prior.alpha[1]" in done.stderr, done.stderr
    assert not store.exists()


STOP = {"at": None}


def stops_at(data, values, times):
    if (values["init.w_plus"], values["loss"]) == STOP["at"]:
        raise KeyboardInterrupt
    return run_induction_flow(data, values, times)


def test_an_interrupted_sweep_resumes_to_the_uninterrupted_result(swept, tmp_path):
    register(replace(INDUCTION_FLOW, name="induction_stops", run=stops_at))
    try:
        path = tmp_path / "s.zarr"
        STOP["at"] = (3.0, "nll")
        with pytest.raises(KeyboardInterrupt):
            sweep("induction_stops", GRID, settings=SETTINGS, data="ih-point",
                  backend="serial", store=path)
        assert len(read_journal(path)) == 2
        STOP["at"] = None
        ds = sweep("induction_stops", GRID, settings=SETTINGS, data="ih-point",
                   backend="serial", store=path, resume=True)
        assert ds.attrs["already_done"] == 2 and ds.attrs["computed_now"] == 2
        assert_same_numbers(open_store(path), swept)
    finally:
        TASKS.pop("induction_stops", None)
        STOP["at"] = None


def _as_written_before(store: Path) -> None:
    """Rewrite a store of ``seq_len`` x settings ``sample_size``, ``seed`` as the same
    sweep wrote it before their renames (``length`` swept; ``sequences``, ``sample_seed``
    fixed), with its integrity record written again for the renamed arrays."""
    import json

    import zarr

    from odeflow.sweeps.integrity import write_record

    if (store / "seq_len").exists():
        (store / "seq_len").rename(store / "length")
    for meta_file in store.glob("*/zarr.json"):
        meta = json.loads(meta_file.read_text())
        meta["dimension_names"] = ["length" if d == "seq_len" else d
                                   for d in meta.get("dimension_names") or []]
        meta_file.write_text(json.dumps(meta))
    root = json.loads((store / "zarr.json").read_text())
    attrs = root["attributes"]
    attrs.pop("odeflow_integrity", None)
    spec = json.loads(attrs["odeflow_sweep"])
    spec["grid"] = {("length" if k == "seq_len" else k): v for k, v in spec["grid"].items()}
    spec["settings"]["sequences"] = spec["settings"].pop("sample_size")
    spec["settings"]["sample_seed"] = spec["settings"].pop("seed")
    attrs["odeflow_sweep"] = json.dumps(spec, sort_keys=True)
    (store / "zarr.json").write_text(json.dumps(root))
    names = sorted(p.parent.name for p in store.glob("*/zarr.json"))
    write_record(store, names, zarr.open_array(store / "computed", mode="r")[...])


def test_a_store_written_with_the_old_parameter_names_reads_as_the_new(tmp_path):
    """A sweep stored before ``length``, ``sequences``, ``sample_seed`` were renamed
    ``seq_len``, ``sample_size``, ``seed`` opens with the new names (its values as
    they were); resuming it is refused by name."""
    settings = {**SETTINGS, "flow": "finite_l", "loss": "code", "sample_size": 60, "seed": 0}
    store = tmp_path / "old.zarr"
    ds = sweep("induction_flow", {"seq_len": [8, 12]}, settings=settings, data="ih-point",
               backend="serial", store=store)
    _as_written_before(store)
    old = open_store(store)
    assert list(old.seq_len.values) == [8, 12] and "length" not in old.dims
    np.testing.assert_array_equal(old.a.values, ds.a.values)
    with pytest.raises(ValidationError) as err:
        sweep("induction_flow", {"seq_len": [8, 12]}, settings=settings, data="ih-point",
              backend="serial", store=store, resume=True)
    assert err.value.field == "store" and "renamed" in err.value.reason
    # renamed settings only: the arrays are the same, and the store resumes
    fixed = tmp_path / "fixed.zarr"
    grid = {"loss": ["code", "nll"]}
    settings = {**{k: v for k, v in settings.items() if k != "loss"}, "seq_len": 24}
    first = sweep("induction_flow", grid, settings=settings, data="ih-point",
                  backend="serial", store=fixed)
    _as_written_before(fixed)
    again = sweep("induction_flow", grid, settings=settings, data="ih-point",
                  backend="serial", store=fixed, resume=True)
    np.testing.assert_array_equal(again.a.values, first.a.values)


def test_a_store_with_a_sample_seed_reopens(tmp_path):
    settings = {**SETTINGS, "flow": "finite_l", "loss": "code", "sample_size": 60, "seed": 5}
    store = tmp_path / "s.zarr"
    sweep("induction_flow", {"seq_len": [8, 12]}, settings=settings, data="ih-point",
          backend="serial", store=store)
    open_store(store)


def test_old_parameter_names_in_a_grid_and_settings_warn_and_are_read_as_new():
    from odeflow.errors import RenamedWarning
    from odeflow.sweeps import make_spec

    with pytest.warns(RenamedWarning) as caught:
        spec = make_spec("induction_flow", {"sequences": [10, 20]},
                         settings={"flow": "finite_l", "sample_seed": 3})
    assert {str(w.message) for w in caught} == {"'sequences' is now 'sample_size'",
                                                "'sample_seed' is now 'seed'"}
    assert spec.grid == {"sample_size": [10, 20]} and spec.settings["seed"] == 3
