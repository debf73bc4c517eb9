"""One train/compare signature for every family (docs/api.md, "Training and runs beside
the flow"): odeflow.train and odeflow.compare call the family's declared targets with the
shared keywords; the old forms give the same results with a RenamedWarning."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import odeflow
from odeflow.errors import RenamedWarning, ValidationError
from odeflow.families import Family, register_family, unregister_family
from odeflow.training import Runs, record_marks, run_seeds
from tests.linear_family import Linear2, LinearData

SCAN = odeflow.DataModel.preset("syn-small")
INDUCTION = odeflow.InductionData.preset("ih-point")
TWO_STAGE = odeflow.TwoStageData.preset("ts-default")

#: The shared keywords, tiny sizes, for each family's trainer.
SHARED = {"steps": 4, "seeds": 2, "seed": 3, "record": 2, "progress": False}
OWN = {
    "scan_snap": {"batch_size": 4, "seq_len": 8, "eta_y": 0.5, "eta_z": 0.4,
                  "optimizer": odeflow.Momentum(0.5)},
    "induction": {"seq_len": 12, "sample_size": 30, "rates": {"c": 1.0, "a": 0.5},
                  "optimizer": odeflow.Momentum(0.5)},
    "two_stage": {"batch_size": 10, "seq_len": 6, "eta": 0.2, "held_out": 40,
                  "optimizer": odeflow.Momentum(0.5)},
}
DATA = {"scan_snap": SCAN, "induction": INDUCTION, "two_stage": TWO_STAGE}


@pytest.mark.parametrize("family", sorted(DATA))
def test_every_family_trains_through_odeflow_train(family):
    """The family's run result: seeds, recorded steps and their times, the loss with the
    seed axis first, one member per seed; equal to the family's own function."""
    run = odeflow.train(DATA[family], **SHARED, **OWN[family])
    assert run.seeds == [3, 4] and len(run) == 2
    assert run.steps.tolist() == [0, 2, 4] and run.t.shape == (3,)
    assert run.loss.shape[0] == 2 and np.all(np.isfinite(run.loss))
    target = odeflow.families.load(odeflow.families.family_of(DATA[family]).train)
    again = target(DATA[family], **SHARED, **OWN[family])
    assert np.array_equal(again.loss, run.loss)


def test_the_old_scan_snap_forms_warn_and_give_the_same_run():
    protocol = odeflow.Protocol(optimizer=odeflow.Adam(), eta_y=0.3, eta_z=0.2, steps=4,
                                batch_size=4, seq_len=8, init="uniform")
    new = odeflow.train(SCAN, **protocol.options(), seeds=[1, 2], record=2, progress=False)
    with pytest.warns(RenamedWarning) as record:
        old = odeflow.train(SCAN, protocol, [1, 2], 2, False)
    assert all(w.filename == __file__ for w in record)
    assert np.array_equal(old.z_active, new.z_active) and np.array_equal(old.loss, new.loss)


def test_the_old_induction_form_warns_and_is_train_sample():
    from odeflow.training.induction import (
        EmpiricalInduction,
        initial_parameters,
        joint,
        sample_for,
        train,
        train_sample,
    )

    runs = odeflow.train(INDUCTION, steps=5, seeds=[7], seq_len=12, sample_size=30,
                         record=[1, 3], progress=False)
    model = EmpiricalInduction(sample_for(INDUCTION, 30, 12, seed=7), INDUCTION.heads,
                               INDUCTION.subsets, loss="code")
    theta0 = initial_parameters(model, w_plus=INDUCTION.w_plus, w_minus=INDUCTION.w_minus,
                                c0=INDUCTION.c0, a0=INDUCTION.a0)
    with pytest.warns(RenamedWarning, match="now train_sample"):
        old = train(model, theta0, joint(5), record=[1, 3], progress=False)
    alone = train_sample(model, theta0, joint(5), record=[1, 3], progress=False)
    for run in (old, alone):
        assert np.array_equal(run.theta, runs[0].theta)
    assert runs.steps.tolist() == [0, 1, 3, 5]


def test_the_old_two_stage_form_warns_and_is_one_run():
    from odeflow.training.two_stage import train, train_run

    options = {"seq_len": 6, "batch_size": 10, "held_out": 40, "record": [0, 3],
               "progress": False}
    runs = odeflow.train(TWO_STAGE, steps=3, eta=0.2, seeds=[5], **options)
    with pytest.warns(RenamedWarning, match="now train"):
        old = train(TWO_STAGE, 3, 0.2, seed=5, **options)
    one = train_run(TWO_STAGE, 3, 0.2, seed=5, **options)
    for run in (old, one):
        assert np.array_equal(run.W_Q, runs[0].W_Q)
        assert np.array_equal(run.accuracy, runs[0].accuracy)
    with pytest.warns(RenamedWarning, match=r"'run.W_Q' is now 'runs\[0\].W_Q'"):
        assert np.array_equal(runs.W_Q, one.W_Q)


def test_the_old_two_stage_keyword_form_warns_before_the_new_loss():
    """train(data, steps=..., eta=...) is the old keyword form (one run, whose loss was
    the held-out loss) and the new one with one seed (loss: the training loss, seed axis
    first). Without seeds= reading loss warns first, at the caller; with seeds= it
    does not. steps and t are the one run's, as before."""
    import warnings

    from odeflow.training.two_stage import train

    options = {"steps": 3, "eta": 0.2, "seq_len": 6, "batch_size": 10, "held_out": 40,
               "record": [0, 3], "progress": False}
    for call in (train, odeflow.train):
        runs = call(TWO_STAGE, **options)
        with pytest.warns(RenamedWarning, match="held-out loss") as record:
            loss = runs.loss
        assert all(w.filename == __file__ for w in record)
        assert loss.shape == (1, 2) and np.array_equal(loss[0], runs[0].train_loss)
        assert np.array_equal(runs[0].loss, runs[0].scores["loss"])   # the old run.loss
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert runs.steps.tolist() == [0, 3] and np.array_equal(runs.t, runs[0].t)
            new = call(TWO_STAGE, seeds=1, **options)
            assert np.array_equal(new.loss, loss)


COMPARE = {
    "scan_snap": {"batch_size": 4, "seq_len": 8, "eta_y": 1.0, "eta_z": 0.5},
    "induction": {"seq_len": 12, "sample_size": 30},
    "two_stage": {"batch_size": 10, "seq_len": 6, "eta": 0.2, "held_out": 40},
}


@pytest.mark.parametrize("family", sorted(DATA))
def test_every_family_compares_through_odeflow_compare(family):
    """The comparison: recorded times, seeds, the flow at those times, one row each."""
    comp = odeflow.compare(DATA[family], steps=4, seeds=2, seed=1, record=2, progress=False,
                           **COMPARE[family])
    assert comp.seeds == [1, 2]
    np.testing.assert_allclose(comp.flow.t, comp.t)
    rows = comp.rows()
    assert len(rows) == comp.t.size == 3
    assert rows[-1]["t"] == pytest.approx(comp.t[-1])


def test_old_compare_forms_warn_and_give_the_same_comparison():
    from odeflow.analysis.compare import compare_runs
    from odeflow.training.two_stage import compare, log_spaced_steps

    new = odeflow.compare(SCAN, steps=6, eta_y=1.0, eta_z=0.5, batch_size=4, seq_len=8,
                          seeds=2, optimizer=odeflow.Momentum(0.5), record=3, progress=False)
    with pytest.warns(RenamedWarning) as record:
        old = compare_runs(SCAN, 1.0, 0.5, 6, batch_size=4, seq_len=8, seeds=2, momentum=0.5,
                           record_every=3, progress=False)
    assert {str(w.message).split(" ")[0] for w in record} >= {"'momentum'", "'record_every'"}
    assert np.array_equal(old.z_gap, new.z_gap)
    options = {"steps": 6, "eta": 0.2, "seq_len": 6, "batch_size": 10, "held_out": 40,
               "progress": False}
    now = compare(TWO_STAGE, seeds=1, record=log_spaced_steps(6, 3), **options)
    with pytest.warns(RenamedWarning):
        then = compare(TWO_STAGE, 1, records=3, **options)
    assert np.array_equal(then.run_mean("W_P"), now.run_mean("W_P"))


def test_an_unknown_option_is_refused_by_name():
    for call in (odeflow.train, odeflow.compare):
        with pytest.raises(ValidationError) as err:
            call(TWO_STAGE, steps=2, eta_y=1.0)
        assert err.value.field == "eta_y" and "two_stage" in err.value.reason
    with pytest.raises(ValidationError, match="^batch_size: the induction runs are full"):
        odeflow.train(INDUCTION, steps=2, batch_size=10)


@pytest.mark.parametrize("optimizer", [0.9, "adam", "sgd", odeflow.Protocol()])
def test_scan_snap_train_takes_an_optimiser_object_only(optimizer):
    """odeflow.train says what it takes, an odeflow optimiser (training.check_optimizer),
    not Protocol's string form."""
    with pytest.raises(ValidationError, match="^optimizer: must be an odeflow optimiser"):
        odeflow.train(SCAN, steps=2, batch_size=4, seq_len=8, optimizer=optimizer)


def test_shared_helpers_name_their_field():
    assert run_seeds(3, seed=4) == [4, 5, 6] and run_seeds([2, 9]) == [2, 9]
    with pytest.raises(ValidationError, match="^seed:"):
        run_seeds([2, 9], seed=1)
    assert record_marks(None, 5).tolist() == list(range(6))
    assert record_marks(2, 5).tolist() == [0, 2, 4, 5]
    assert record_marks([3], 5).tolist() == [0, 3, 5]
    for bad in ([7], [1.5], "often", 0):
        with pytest.raises(ValidationError, match="^record"):
            record_marks(bad, 5)


def linear_train(data, *, steps: int = 10, seeds=1, seed: int = 0, record=None,
                 progress=None, rate: float = 0.1):
    """Gradient steps on the linear network's population loss (deterministic: every
    seed's run is the same), for the user-family test below."""
    from tests.linear_family import LinearPopulation

    field = LinearPopulation(data, rate)
    marks = record_marks(record, steps)
    theta, kept = field.initial_state(), []
    for k in range(steps + 1):
        if k in marks:
            kept.append(field.loss(theta[None])[0])
        theta = theta + field.rhs(0.0, theta)
    run = type("LinearRun", (), {"steps": marks, "t": rate * marks, "loss": np.array(kept)})
    seeds = run_seeds(seeds, seed)
    return Runs([run] * len(seeds), seeds)


class Linear2Trained(Linear2):
    """The user family of tests/linear_family.py with a trainer of its own."""

    train = f"{__name__}:linear_train"


def test_a_user_family_is_trained_by_its_declared_trainer_or_refused_by_name():
    data = LinearData.preset("linear2-small")
    family = register_family(Linear2)
    try:
        for call in (odeflow.train, odeflow.compare):
            with pytest.raises(ValidationError) as err:
                call(data, steps=3)
            assert err.value.field == "data" and "'linear2'" in err.value.reason
        register_family(Linear2Trained)
        runs = odeflow.train(data, steps=6, seeds=2, record=3)
        assert runs.seeds == [0, 1] and runs.loss.shape == (2, 3)
        assert runs.loss[0, -1] < runs.loss[0, 0]
        with pytest.raises(ValidationError, match="^start: is not an option"):
            odeflow.train(data, steps=6, start=None)
    finally:
        unregister_family(family.name)
    assert isinstance(Linear2Trained(), Family)


#: Calls of the families' train/compare by an old form that modules of other work still
#: make (module, what): each is translated without a warning until it goes.
PENDING_OLD_CALLS: set = set()


def test_the_package_calls_train_and_compare_by_the_new_forms_only():
    """No module of odeflow calls a family's train/compare positionally after data or by
    an old keyword (read from the source), but those of PENDING_OLD_CALLS."""
    old = {"protocol", "record_every", "records", "momentum", "count", "length"}
    names = {"train", "compare", "compare_runs"}
    root = Path(odeflow.__file__).parent
    found = set()
    for path in root.rglob("*.py"):
        module = ".".join(path.relative_to(root.parent).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1]
                    in names):
                continue
            if len(node.args) > 1:
                found.add((module, "positional"))
            found |= {(module, kw.arg) for kw in node.keywords if kw.arg in old}
    assert found == PENDING_OLD_CALLS
