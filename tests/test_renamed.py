"""One name per concept (docs/api.md): old keyword names are aliases that warn."""

from __future__ import annotations

import numpy as np
import pytest

import odeflow
from odeflow.errors import RenamedWarning, ValidationError, renamed, renamed_keywords


def test_renamed_warns_and_maps_old_names():
    with pytest.warns(RenamedWarning, match="'length' is now 'seq_len'"):
        out = renamed({"length": 3, "loss": "code"}, {"length": "seq_len"})
    assert out == {"seq_len": 3, "loss": "code"}
    assert issubclass(odeflow.RenamedWarning, DeprecationWarning)


def test_renamed_pairs_parts_of_start():
    renames = {"y0": ("start", 0), "z0": ("start", 1)}
    with pytest.warns(RenamedWarning, match=r"'z0' is now 'start': start=\(y0, z0\)"):
        assert renamed({"z0": 5}, renames) == {"start": (None, 5)}
    with pytest.warns(RenamedWarning):
        assert renamed({"z0": 5, "y0": 4}, renames) == {"start": (4, 5)}


def test_renamed_refuses_old_and_new_together():
    with pytest.raises(ValidationError, match="length: is the old name of 'seq_len'"):
        renamed({"length": 3, "seq_len": 4}, {"length": "seq_len"})


def test_renamed_keywords_keeps_signature_and_warns_at_caller():
    @renamed_keywords({"length": "seq_len"})
    def f(seq_len=1):
        return seq_len

    with pytest.warns(RenamedWarning) as record:
        assert f(length=5) == 5
    assert record[0].filename == __file__
    assert f.renamed == {"length": "seq_len"}
    assert f() == 1


def test_the_packages_own_calls_by_an_old_name_do_not_warn(recwarn):
    """A module of odeflow that still passes an old name (docs/api.md lists them) is
    translated silently; the warning is for users' code."""
    namespace = {"__name__": "odeflow.some_module", "renamed": renamed}
    exec("def call(options):\n    return renamed(options, {'length': 'seq_len'}, stacklevel=2)",
         namespace)
    assert namespace["call"]({"length": 3}) == {"seq_len": 3}
    assert not recwarn.list


def test_level_t_sample_size_is_sequences_per_class():
    """Level T's ``sample_size`` is its sequences per class (old ``samples_per_class``)."""
    from odeflow.data import sample_counts
    from odeflow.fields.finite_t import FiniteTFlow

    data = odeflow.DataModel.preset("syn-small")
    new = FiniteTFlow(data, 1.0, 1.0, seq_len=8, sample_size=3, seed=2)
    assert new.sample.sample_size == 3 and new.sample.size == 3 * data.num_classes
    with pytest.warns(RenamedWarning, match="'samples_per_class' is now 'sample_size'"):
        old = FiniteTFlow(data, 1.0, 1.0, seq_len=8, samples_per_class=3, seed=2)
    assert old.parameters() == new.parameters()
    with pytest.warns(RenamedWarning, match="'samples_per_class' is now 'sample_size'"):
        traj = odeflow.solve(data, flow="finite_t", seq_len=8, samples_per_class=3, seed=2,
                             t_span=(0.0, 1.0), progress=False)
    assert traj.meta["sample_size"] == 3
    with pytest.warns(RenamedWarning):
        assert sample_counts(data, 8, samples_per_class=3).samples_per_class == 3


def test_a_level_t_file_written_with_the_old_meta_key_loads(tmp_path):
    data = odeflow.DataModel.preset("syn-small")
    traj = odeflow.solve(data, flow="finite_t", seq_len=8, sample_size=3, seed=2,
                         t_span=(0.0, 1.0), progress=False)
    del traj.meta["sample_size"]          # as written before the rename
    from odeflow.results import FiniteTTrajectory

    back = FiniteTTrajectory.load(traj.save(tmp_path / "old.npz"))
    assert back.sample.sample_size == 3
    assert np.array_equal(back.attention(data.next_tokens[0]),
                          traj.attention(data.next_tokens[0]))


def test_scan_snap_start_is_one_pair_and_y0_z0_warn():
    from odeflow.fields import ExactFlow
    from odeflow.training import train_sgd

    data = odeflow.DataModel.preset("syn-small")
    y0, z0 = odeflow.training_start(data, 3)
    new = odeflow.solve(data, start=(y0, z0), t_span=(0.0, 5.0), progress=False)
    with pytest.warns(RenamedWarning) as record:
        old = odeflow.solve(data, y0=y0, z0=z0, t_span=(0.0, 5.0), progress=False)
    assert {str(w.message) for w in record} == {"'y0' is now 'start': start=(y0, z0)",
                                                "'z0' is now 'start': start=(y0, z0)"}
    assert np.array_equal(new.z_active, old.z_active)
    with pytest.warns(RenamedWarning, match="'z0' is now 'start'"):
        field = ExactFlow(data, 1.0, 0.1, z0=z0)
    assert np.array_equal(field.initial_state(),
                          ExactFlow(data, 1.0, 0.1, start=(None, z0)).initial_state())
    with pytest.warns(RenamedWarning, match="'z0' is now 'start'"):
        run = train_sgd(data, 1.0, 0.1, 2, 4, 8, z0=z0, progress=False)
    assert np.array_equal(run.z_active[0], z0[:, data.active_tokens])
    with pytest.raises(ValidationError, match="give only 'start'"):
        odeflow.solve(data, z0=z0, start=(None, z0))


@pytest.mark.parametrize("flow", ["reduced", "snap"])
def test_levels_without_a_decoder_refuse_a_decoder_start(flow):
    data = odeflow.DataModel.preset("snap-small" if flow == "snap" else "syn-small")
    y0, _ = odeflow.training_start(data, 0)
    with pytest.raises(ValidationError) as err:
        odeflow.solve(data, flow=flow, start=(y0, None), t_span=(0.0, 1.0))
    assert err.value.field == "start" and "Y(0) = 0" in err.value.reason
    with pytest.raises(ValidationError, match="start: must be a"):
        odeflow.solve(data, flow=flow, start=np.zeros((2, 3)), t_span=(0.0, 1.0))


def test_solve_ensemble_defaults_to_auto_as_solve():
    data = odeflow.DataModel.preset("syn-small")
    starts = [odeflow.training_start(data, s) for s in (0, 1)]
    auto = odeflow.solve_ensemble(data, starts, t_span=(0.0, 2.0), t_eval=[2.0],
                                  progress=False)
    rk45 = odeflow.solve_ensemble(data, starts, t_span=(0.0, 2.0), t_eval=[2.0],
                                  method="RK45", progress=False)
    assert auto[0].meta["method"] == "RK45"
    assert np.array_equal(auto[1].z_active, rk45[1].z_active)
    with pytest.raises(ValidationError) as err:
        odeflow.solve_ensemble(data, starts, method="Radau", t_span=(0.0, 1.0))
    assert err.value.field == "method" and "'auto'" in err.value.reason


def test_compare_levels_reads_its_old_flags_with_a_note(capsys):
    from odeflow.cli import main

    args = ["compare-levels", "--t-end", "5", "--eta-z", "1", "--seq-len", "8", "--json"]
    assert main([*args, "--sample-size", "2", "--seed", "1"]) == 0
    new = capsys.readouterr()
    assert main([*args, "--samples-per-class", "2", "--sample-seed", "1"]) == 0
    old = capsys.readouterr()
    assert "warning: --samples-per-class is now --sample-size" in old.err
    assert "warning: --sample-seed is now --seed" in old.err and not new.err
    import json

    def level_t(out):
        return [(r["samples_per_class"], r["z_deviation_finite_t"])
                for r in json.loads(out)["results"]]

    assert level_t(old.out) == level_t(new.out) and level_t(new.out)[0][0] == 2


@pytest.mark.parametrize("preset, flow", [("syn-small", "finite_t"), ("ts-default", "finite_n")])
def test_run_takes_the_sample_flags_for_every_flow_on_a_fixed_sample(tmp_path, capsys, preset,
                                                                      flow):
    from odeflow.cli import main

    out = tmp_path / "r.npz"
    assert main(["run", "--preset", preset, "--flow", flow, "--seq-len", "8", "--sample-size",
                 "3", "--seed", "4", "--t-end", "1", "--out", str(out), "--rows", "0",
                 "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "seq_len=8, sample_size=3, seed=4" in text
    assert main(["run", "--preset", preset, "--seed", "4", "--out", str(out)]) == 2
    assert "--seed: does not apply to flow" in capsys.readouterr().err


#: Calls of the renamed entry points by an old keyword that modules of other work still
#: make (module, keyword): each is translated without a warning until it goes.
PENDING_OLD_KEYWORDS: set = set()


def test_the_package_passes_only_new_keywords():
    """No module of odeflow calls a renamed entry point by an old keyword (read from the
    source), but those of PENDING_OLD_KEYWORDS; a pending one that is gone is struck."""
    import ast
    from pathlib import Path

    from odeflow.data.config import RUN_RENAMED

    old = {"y0", "z0", "samples_per_class", *RUN_RENAMED, "count"}
    entry_points = {"solve", "solve_batch", "solve_ensemble", "solve_schedule", "solve_snap",
                    "distance_to_sgd", "distance_to_exact", "sample_size_error", "sample_counts",
                    "sample_sequences", "sample_for", "compare", "train_sgd", "sgd_ensemble",
                    "gradient_ascent", "level_predictions", "optimizer_flows", "discrete_twins",
                    "flow_at", "ExactFlow", "FiniteTFlow", "ReducedFlow", "SnapFlow",
                    "FiniteLengthFlow", "field_class"}
    root = Path(odeflow.__file__).parent
    found = set()
    for path in root.rglob("*.py"):
        module = ".".join(path.relative_to(root.parent).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] \
                    in entry_points:
                found |= {(module, kw.arg) for kw in node.keywords if kw.arg in old}
    assert found == PENDING_OLD_KEYWORDS


#: Old keywords of the runs beside the flow -> the entry points that renamed them
#: (``record_every`` -> ``record``, ``momentum`` -> ``optimizer``, ``records`` -> ``record``).
RECORD_AND_OPTIMIZER_RENAMES = {
    "record_every": {"train", "compare_runs", "train_sgd", "sgd_ensemble", "gradient_ascent",
                     "optimizer_steps", "gap_table"},
    "momentum": {"compare_runs", "train_sgd", "sgd_ensemble", "gap_table"},
    "records": {"compare", "run"},
}

#: Such calls that modules of other work still make (module, keyword): translated without
#: a warning until they go.
PENDING_RECORD_AND_OPTIMIZER: set = set()


def test_the_package_records_and_steps_by_the_new_names():
    """No module of odeflow passes ``record_every``, ``momentum`` or ``records`` to an
    entry point that renamed it (read from the source), but those pending."""
    import ast
    from pathlib import Path

    root = Path(odeflow.__file__).parent
    found = set()
    for path in root.rglob("*.py"):
        module = ".".join(path.relative_to(root.parent).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            name = ast.unparse(node.func).split(".")[-1]
            found |= {(module, kw.arg) for kw in node.keywords
                      if name in RECORD_AND_OPTIMIZER_RENAMES.get(kw.arg, ())}
    assert found == PENDING_RECORD_AND_OPTIMIZER


def test_solve_takes_its_old_positional_form_for_one_release():
    """``solve(data, flow, eta_y, eta_z, t_span, ...)``: the rates and the solve's options
    are keywords now (the signature names no family's rates); the old positional form
    means the keywords and warns at the caller; a rate given twice is refused."""
    import inspect

    data = odeflow.DataModel.preset("syn-small")
    with pytest.warns(odeflow.RenamedWarning, match="eta_y=, eta_z=, t_span=") as caught:
        old = odeflow.solve(data, "exact", 2.0, 0.5, (0.0, 5.0), progress=False)
    assert caught[0].filename == __file__
    new = odeflow.solve(data, "exact", eta_y=2.0, eta_z=0.5, t_span=(0.0, 5.0),
                        progress=False)
    assert np.array_equal(old.z_active, new.z_active) and np.array_equal(old.t, new.t)
    with pytest.raises(odeflow.ValidationError, match="^eta_y: given by position and by"):
        odeflow.solve(data, "exact", 2.0, eta_y=1.0)
    with pytest.raises(odeflow.ValidationError, match="^solve: takes at most"):
        odeflow.solve(data, "exact", *range(13))
    assert "eta_y" not in inspect.signature(odeflow.solve).parameters
