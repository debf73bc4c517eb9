"""The runs beside the flow name the recorded steps ``record`` and the optimiser
``optimizer`` (docs/api.md, "One name per concept"): the old ``record_every``,
``momentum`` and ``records`` warn and give the same arrays."""

from __future__ import annotations

import json

import numpy as np
import pytest

import odeflow
from odeflow import Momentum, RenamedWarning, ValidationError
from odeflow.analysis.compare import compare_runs, gap_table
from odeflow.fields.exact import ExactFlow
from odeflow.fields.optimizers import GradientDescent
from odeflow.training import gradient_ascent, optimizer_steps, sgd_ensemble, train_sgd


@pytest.fixture(scope="module")
def data():
    return odeflow.DataModel.preset("syn-small")


def messages(record) -> set:
    return {str(w.message).split(" is now ")[0] for w in record}


def test_train_sgd_old_keywords_give_the_same_run(data):
    new = train_sgd(data, 1.0, 0.5, 12, 4, 8, optimizer=Momentum(0.5), seed=3, record=4,
                    progress=False)
    with pytest.warns(RenamedWarning) as record:
        old = train_sgd(data, 1.0, 0.5, 12, 4, 8, momentum=0.5, seed=3, record_every=4,
                        progress=False)
    assert messages(record) == {"'momentum'", "'record_every'"}
    assert all(w.filename == __file__ for w in record)
    with pytest.warns(RenamedWarning, match="in the place of 'optimizer' is the old 'momentum'"):
        positional = train_sgd(data, 1.0, 0.5, 12, 4, 8, 0.5, 3, 4, False)
    for run in (old, positional):
        assert np.array_equal(run.z_active, new.z_active)
        assert np.array_equal(run.decoder_lumped, new.decoder_lumped)
        assert np.array_equal(run.t, new.t) and run.meta == new.meta
    assert list(new.meta["recorded_steps"]) == [0, 4, 8, 12]


def test_train_sgd_momentum_zero_is_plain_steps(data):
    plain = train_sgd(data, 1.0, 0.5, 6, 4, 8, record=2, progress=False)
    with pytest.warns(RenamedWarning):
        old = train_sgd(data, 1.0, 0.5, 6, 4, 8, momentum=0.0, progress=False, record=2)
    by_object = train_sgd(data, 1.0, 0.5, 6, 4, 8, optimizer=GradientDescent(), record=2,
                          progress=False)
    for run in (old, by_object):
        assert np.array_equal(run.z_active, plain.z_active)
    assert plain.meta["momentum"] == 0.0


def test_sgd_ensemble_old_keywords_give_the_same_ensemble(data):
    new = sgd_ensemble(data, 1.0, 0.5, 10, 4, 8, seeds=[1, 2], optimizer=Momentum(0.9),
                       record=5, progress=False)
    with pytest.warns(RenamedWarning) as record:
        old = sgd_ensemble(data, 1.0, 0.5, 10, 4, 8, seeds=[1, 2], momentum=0.9,
                           record_every=5, progress=False)
    assert messages(record) == {"'momentum'", "'record_every'"}
    assert np.array_equal(old.mean_logits_active, new.mean_logits_active)
    assert np.array_equal(old.mean_attention_active, new.mean_attention_active)
    assert np.array_equal(old.t, new.t) and new.t.size == 3


def test_gradient_ascent_and_optimizer_steps_old_record_every(data):
    new = gradient_ascent(data, 1.0, 0.5, 9, record=3, progress=False)
    with pytest.warns(RenamedWarning, match="'record_every' is now 'record'"):
        old = gradient_ascent(data, 1.0, 0.5, 9, record_every=3, progress=False)
    assert np.array_equal(old.z_active, new.z_active) and np.array_equal(old.t, [0, 3, 6, 9])
    field = ExactFlow(data, 1.0, 0.5)
    twin = optimizer_steps(field, Momentum(0.9), 6, record=2, progress=False)
    with pytest.warns(RenamedWarning, match="'record_every' is now 'record'"):
        then = optimizer_steps(field, Momentum(0.9), 6, record_every=2, progress=False)
    assert np.array_equal(then.y, twin.y) and list(twin.steps) == [0, 2, 4, 6]


def test_record_takes_the_steps_themselves(data):
    """``record`` is a number of steps between records or the steps; the start and the
    end always."""
    sgd = train_sgd(data, 1.0, 0.5, 10, 4, 8, record=[7, 3], progress=False)
    assert list(sgd.meta["recorded_steps"]) == [0, 3, 7, 10]
    assert sgd.meta["record_every"] is None
    every = train_sgd(data, 1.0, 0.5, 10, 4, 8, record=1, progress=False)
    assert np.array_equal(sgd.z_active, every.z_active[[0, 3, 7, 10]])
    ga = gradient_ascent(data, 1.0, 0.5, 10, record=[5], progress=False)
    assert list(ga.t) == [0, 5, 10]
    twin = optimizer_steps(ExactFlow(data, 1.0, 0.5), Momentum(0.5), 10, record=(4,),
                           progress=False)
    assert list(twin.steps) == [0, 4, 10]
    cmp = compare_runs(data, steps=10, run="gradient_ascent", record=[2, 5], progress=False)
    assert list(cmp.t) == [0, 2, 5, 10]
    for bad in (0, [11], [1.5], "every"):
        with pytest.raises(ValidationError) as err:
            train_sgd(data, 1.0, 0.5, 10, 4, 8, record=bad, progress=False)
        assert err.value.field == "record"


def test_sgd_refuses_an_optimizer_it_cannot_take(data):
    with pytest.raises(ValidationError) as err:
        sgd_ensemble(data, 1.0, 0.5, 4, 4, 8, seeds=2, optimizer=odeflow.Adam(), progress=False)
    assert err.value.field == "optimizer" and "Momentum" in err.value.reason
    with pytest.warns(RenamedWarning), pytest.raises(ValidationError) as err:
        train_sgd(data, 1.0, 0.5, 4, 4, 8, momentum=1.5, progress=False)
    assert err.value.field == "momentum"
    with pytest.raises(ValidationError, match="give only"):
        train_sgd(data, 1.0, 0.5, 4, 4, 8, record=2, record_every=2, progress=False)


def test_gap_table_old_keywords_give_the_same_rows(data):
    kw = {"seq_lens": (8,), "batch_sizes": (4,), "seeds": 2, "progress": False}
    new = gap_table(data, 1.0, 5.0, 12, optimizer=Momentum(0.5), record=4, **kw)
    with pytest.warns(RenamedWarning) as record:
        old = gap_table(data, 1.0, 5.0, 12, momentum=0.5, record_every=4, **kw)
    assert messages(record) == {"'momentum'", "'record_every'"}

    def figures(rows):
        return [{k: v for k, v in row.items() if k != "wall_time"} for row in rows]

    assert figures(old) == figures(new) and new[0]["z_gap"] > 0
    plain = gap_table(data, 1.0, 5.0, 12, record=4, **kw)
    assert figures(plain) != figures(new)


def test_two_stage_reproduction_old_records(tmp_path):
    from odeflow.experiments.two_stage import run
    from odeflow.training.two_stage import log_spaced_steps

    kw = {"seeds": 1, "steps": 12, "eta": 0.25, "seq_len": 8, "sample_size": 20,
          "held_out": 40, "flow_points": 4, "progress": False}
    new = run(tmp_path / "new", record=log_spaced_steps(12, 4), **kw)
    with pytest.warns(RenamedWarning, match="'records' is now 'record'"):
        old = run(tmp_path / "old", records=4, **kw)
    for name in ("two_stage.csv", "stages.csv"):
        assert (tmp_path / "old" / name).read_text() == (tmp_path / "new" / name).read_text()
    assert [p.name for p in old.files] == [p.name for p in new.files]


def test_compare_cli_record_flag_and_its_old_name(capsys):
    from odeflow.cli import main

    args = ["compare", "--steps", "8", "--batch-size", "4", "--seq-len", "8", "--seeds", "2",
            "--momentum", "0.5", "--json", "--no-progress"]
    assert main([*args, "--record", "4"]) == 0
    new = capsys.readouterr()
    assert main([*args, "--record-every", "4"]) == 0
    old = capsys.readouterr()
    assert "warning: --record-every is now --record" in old.err and not new.err
    figures = [json.loads(out.out) for out in (new, old)]
    for f in figures:
        del f["run_wall_time"]
    assert figures[0] == figures[1] and figures[0]["t"][-1] == figures[0]["t"][-1]
    assert len(figures[0]["t"]) == 3 and figures[0]["momentum"] == 0.5
    assert main([*args, "--record", "4", "--record-every", "4"]) == 2
    assert "--record-every is the old name of --record" in capsys.readouterr().err


def test_record_follows_the_count_policy():
    """An integral float is that integer (odeflow.data.checks.check_count), as a number of
    steps and as listed steps; a fraction, a bool or text is refused naming record."""
    from odeflow.training import record_marks

    assert record_marks(2.0, 5).tolist() == record_marks(2, 5).tolist() == [0, 2, 4, 5]
    assert record_marks(np.float64(3.0), 7).tolist() == [0, 3, 6, 7]
    assert record_marks([1.0, 4.0], 5).tolist() == [0, 1, 4, 5]
    for bad in (2.5, True, "2", [1.5], [np.nan], [[1], [1, 2]], float("inf")):
        with pytest.raises(ValidationError, match="^record"):
            record_marks(bad, 5)


def test_every_family_reads_an_integer_record_as_every_n_steps():
    """record=5 is every 5 steps, with the start and the end, in the two-stage family's
    one run (train_run) and the induction family's run on one sample (train_sample), as
    in every trainer; something else is refused naming record."""
    from odeflow.training.induction import EmpiricalInduction, joint, sample_for, train_sample
    from odeflow.training.induction.finite_length import initial_parameters
    from odeflow.training.two_stage import train_run

    two_stage = odeflow.TwoStageData.preset("ts-default")
    options = {"seq_len": 6, "batch_size": 10, "held_out": 0, "progress": False}
    assert train_run(two_stage, 12, 0.2, record=5, **options).steps.tolist() == [0, 5, 10, 12]
    assert train_run(two_stage, 12, 0.2, record=5.0, **options).steps.tolist() == [0, 5, 10, 12]
    listed = train_run(two_stage, 12, 0.2, record=[3, 7], **options)
    assert listed.steps.tolist() == [3, 7]   # one run records exactly the steps listed
    induction = odeflow.InductionData.preset("ih-point")
    model = EmpiricalInduction(sample_for(induction, 30, 12, seed=1), induction.heads,
                               induction.subsets)
    theta0 = initial_parameters(model)
    run = train_sample(model, theta0, joint(12), record=5, progress=False)
    assert run.steps.tolist() == [0, 5, 10, 12]
    for bad in ("5", 0, 2.5):
        with pytest.raises(ValidationError, match="^record"):
            train_sample(model, theta0, joint(12), record=bad, progress=False)
        with pytest.raises(ValidationError, match="^record"):
            train_run(two_stage, 12, 0.2, record=bad, **options)
