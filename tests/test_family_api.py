"""The family API and the one solve path (issue 30): options compose across families or are
refused by name, and the two-stage family is served through its declaration alone."""

import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import odeflow
from odeflow.families import families, family_named, family_of
from odeflow.fields.induction import Schedule

IH = odeflow.InductionData.preset("ih-point")
DOCS = Path(__file__).resolve().parent.parent / "docs"


def family_page_problems(family) -> list:
    """What is amiss with the docs page ``family`` declares (``docs``): missing, not in a
    toctree of ``docs/index.md``, or not named by ``odeflow --help``."""
    from odeflow.cli import build_parser

    blocks = re.findall(r"```\{toctree\}\n(.*?)```", (DOCS / "index.md").read_text(), re.S)
    listed = {line.strip() for block in blocks for line in block.splitlines()
              if line.strip() and not line.startswith(":")}
    shown = " ".join(build_parser().format_help().split())
    return [problem for problem, wrong in (
        ("no page", not (family.docs and (DOCS / family.docs).is_file())),
        ("not in the toctree", family.docs.removesuffix(".md") not in listed),
        ("not in odeflow --help", f"docs: docs/{family.docs}" not in shown)) if wrong]


def test_every_family_is_found_from_its_data_and_declares_its_presets():
    for name, family in families().items():
        for preset in family.preset_list():
            data = family.preset(preset)
            assert family_of(data) is family, (name, preset)
    assert family_of(None) is family_named("scan_snap")
    with pytest.raises(odeflow.ValidationError, match="^data: "):
        family_of(object())


def test_schedule_with_an_optimiser_resets_its_state_at_each_stage():
    schedule = Schedule.staged(10, 10, 10)
    traj = odeflow.solve(IH, schedule=schedule, optimizer=odeflow.Momentum(0.5), progress=False)
    assert traj.t[0] == 0.0 and traj.t[-1] == 30.0
    assert traj.meta["optimizer"]["kind"] == "momentum"
    # each stage starts at rest: the velocity at a stage's first step is that of a fresh
    # optimiser from the stage's start, the same as the first stage's own solve
    first = odeflow.solve(IH, optimizer=odeflow.Momentum(0.5), rates={"c": 1.0, "w": 0.0,
                                                                     "a": 0.0},
                          t_span=(0.0, 10.0), t_eval=traj.t[traj.t <= 10.0], progress=False)
    np.testing.assert_allclose(traj.loss[traj.t <= 10.0], first.loss, rtol=1e-6)
    plain = odeflow.solve(IH, schedule=schedule, progress=False)
    assert abs(traj.loss[-1] - plain.loss[-1]) > 1e-4      # the optimiser is not dropped


def test_schedule_refusals_name_the_option():
    with pytest.raises(odeflow.ValidationError, match=r"^schedule\[0\]\.duration: "):
        odeflow.solve(IH, schedule=Schedule.staged(2.5, 2, 2), optimizer=odeflow.Adam(),
                      progress=False)
    with pytest.raises(odeflow.ValidationError, match="^events: "):
        odeflow.solve(IH, schedule=Schedule.staged(2, 2, 2), events=lambda t, y: y[0],
                      progress=False)
    with pytest.raises(odeflow.ValidationError, match="^dense_output: "):
        odeflow.solve(IH, schedule=Schedule.staged(2, 2, 2), dense_output=True,
                      optimizer=odeflow.Adam(), progress=False)


def test_dense_output_of_a_schedule_spans_every_stage():
    traj = odeflow.solve(IH, schedule=Schedule.staged(4, 4, 4), dense_output=True,
                         progress=False)
    assert traj.sol is not None and traj.sol.t_min == 0.0 and traj.sol.t_max == 12.0
    np.testing.assert_allclose(traj.sol(traj.t[1:-1]), traj.y[:, 1:-1], atol=1e-9)


def test_ensemble_of_starts_for_another_family_equals_the_separate_solves():
    data = odeflow.TwoStageData.preset("ts-default")
    starts = [None, (0.03 * np.eye(2), 0.02 * np.eye(2))]
    t_eval = np.array([0.0, 0.5, 2.0])
    members = odeflow.solve_ensemble(data, starts, t_span=(0.0, 2.0), t_eval=t_eval,
                                     progress=False)
    for start, member in zip(starts, members, strict=True):
        alone = odeflow.solve(data, start=start, t_span=(0.0, 2.0), t_eval=t_eval,
                              method="RK45", progress=False)
        np.testing.assert_allclose(member.W_Q, alone.W_Q, rtol=1e-5, atol=1e-9)


def test_two_stage_family_through_the_flat_api_and_the_optimiser_flows():
    data = odeflow.TwoStageData.preset("ts-default")
    assert "TwoStageData" in odeflow.__all__
    traj = odeflow.solve(data, flow="population", t_span=(0.0, 2.0),
                         t_eval=np.array([0.0, 1.0, 2.0]), progress=False)
    for name in ("accuracy_p_only", "accuracy_q_only", "accuracy_both", "loss", "loss_p_only",
                 "loss_q_only", "W_P", "W_Q"):
        assert np.asarray(getattr(traj, name)).shape[0] == 3, name
    heavy = odeflow.solve(data, optimizer=odeflow.Momentum(0.9), t_span=(0.0, 20.0),
                          progress=False)
    assert heavy.meta["optimizer"]["kind"] == "momentum" and "velocity" in heavy.series


def test_ensemble_with_an_optimiser_wraps_the_parameter_level_of_each_member():
    starts = [None, None]
    members = odeflow.solve_ensemble(IH, starts, optimizer=odeflow.Momentum(0.5),
                                     t_span=(0.0, 5.0), t_eval=np.arange(6.0), progress=False)
    alone = odeflow.solve(IH, optimizer=odeflow.Momentum(0.5), t_span=(0.0, 5.0),
                          t_eval=np.arange(6.0), method="RK45", progress=False)
    for member in members:
        assert member.meta["optimizer"]["kind"] == "momentum"
        np.testing.assert_allclose(member.loss, alone.loss, rtol=1e-5)


def test_an_induction_optimiser_flow_keeps_its_series_through_a_file(tmp_path):
    from odeflow.results.induction import InductionTrajectory

    traj = odeflow.solve(IH, optimizer=odeflow.Momentum(0.5), t_span=(0.0, 5.0),
                         progress=False)
    path = traj.save(tmp_path / "ih.npz")
    loaded = InductionTrajectory.load(path)
    assert loaded.optimizer["kind"] == "momentum"
    np.testing.assert_array_equal(loaded.velocity, traj.velocity)
    np.testing.assert_array_equal(loaded.steps, traj.steps)
    plain = InductionTrajectory.load(odeflow.solve(IH, t_span=(0.0, 5.0), progress=False)
                                     .save(tmp_path / "plain.npz"))
    assert plain.series == {} and plain.optimizer is None
    with pytest.raises(odeflow.ValidationError, match="^steps: "):
        plain.steps  # noqa: B018


def test_two_stage_checks_run_in_verify_and_fail_on_a_planted_error(monkeypatch):
    from odeflow.analysis.two_stage import closed_forms

    report = odeflow.verify(checks=["CF-TS1", "CF-TS2"])
    assert {r.check for r in report.rows} == {"CF-TS1", "CF-TS2"} and report.passed
    real = closed_forms.stage_one_margin
    monkeypatch.setattr(closed_forms, "stage_one_margin",
                        lambda data, t: real(data, t) * (1 + 1e-6))
    assert not odeflow.verify(checks=["CF-TS2"]).passed


def test_a_stage_takes_the_defaults_of_solve():
    import inspect

    from odeflow.solver.schedule import SOLVE_DEFAULTS

    parameters = inspect.signature(odeflow.solve).parameters
    assert {k: parameters[k].default for k in SOLVE_DEFAULTS} == SOLVE_DEFAULTS


@pytest.mark.parametrize("option", [{"dense_output": True}, {"events": lambda t, y: y[0]}])
def test_stacks_refuse_the_options_of_one_integration_by_name(option):
    data = odeflow.TwoStageData.preset("ts-default")
    with pytest.raises(odeflow.ValidationError, match=f"^{next(iter(option))}: .*solve_ensemble"):
        odeflow.solve_ensemble(data, [None], t_span=(0.0, 1.0), **option)


def test_a_two_stage_optimiser_flow_keeps_its_series_through_a_file(tmp_path):
    from odeflow.results.two_stage import TwoStageTrajectory

    data = odeflow.TwoStageData.preset("ts-default")
    traj = odeflow.solve(data, optimizer=odeflow.Momentum(0.9), t_span=(0.0, 5.0),
                         progress=False)
    loaded = TwoStageTrajectory.load(traj.save(tmp_path / "ts.npz"))
    assert loaded.optimizer["kind"] == "momentum"
    np.testing.assert_array_equal(loaded.velocity, traj.velocity)
    np.testing.assert_array_equal(loaded.W_Q, traj.W_Q)


def test_every_family_page_exists_is_in_the_toctree_and_in_the_help():
    assert {name: family_page_problems(f) for name, f in families().items()} == \
        dict.fromkeys(families(), [])
    lost = type("Lost", (odeflow.families.Family,), {"name": "lost", "docs": "lost.md"})()
    assert family_page_problems(lost) == ["no page", "not in the toctree",
                                          "not in odeflow --help"]


@given(st.data())
def test_every_family_hook_draws_its_own_data_models(data):
    """A family whose ``strategies`` module has a hook (``DATA_MODELS``) draws its own data
    models; ``odeflow.testing.family_data_models`` draws from every such family."""
    from odeflow.testing import family_data_models

    hooked = [f for f in families().values() if f.data_models() is not None]
    assert {"scan_snap", "induction"} <= {f.name for f in hooked}
    assert all(f.data_models() is not None for f in families().values() if f.strategies)
    for family in hooked:
        assert family_of(data.draw(family.data_models())) is family
    assert family_of(data.draw(family_data_models())) in hooked
    with pytest.raises(odeflow.ValidationError, match=r"^names: .*\['no_such'\]"):
        family_data_models(["scan_snap", "no_such"])


@pytest.mark.parametrize("name, entry, why", [
    ("speed", (complex, None, "x"), "type must be"),
    ("speed", (float, ("nope",), "x"), "flows must be"),
    ("speed", (float, None), "must be (type, flows, help)"),
    ("speed", (float, None, 3), "help and convert must be strings"),
    ("t_end", (float, None, "x"), "shared options"),
    ("rows", (int, None, "x"), "odeflow run's own flags"),
])
def test_a_bad_run_option_is_refused_naming_it(name, entry, why):
    from odeflow.families import as_family

    bad = type("Bad", (type(family_named("scan_snap")),),
               {"name": "bad", "run_options": {name: entry}})
    with pytest.raises(odeflow.ValidationError, match=re.escape(why)) as info:
        as_family(bad)
    assert info.value.field == f"family.run_options.{name}"


def test_a_run_option_of_another_type_than_another_familys_is_refused():
    """One flag per name: a family declaring ``loss`` as a number, where the induction
    family declares it as the choices nll/code, is refused at registration naming it."""
    from odeflow.families import register_family

    bad = type("LossAsNumber", (type(family_named("scan_snap")),),
               {"name": "loss_as_number",
                "run_options": {"loss": (float, None, "a loss weight")}})
    with pytest.raises(odeflow.ValidationError, match="'induction' declares it") as info:
        register_family(bad)
    assert info.value.field == "family.run_options.loss"
    assert "loss_as_number" not in odeflow.families.FAMILIES
