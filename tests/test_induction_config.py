"""Run configuration files of the induction-head family (issue 23): a ``family`` key picks
the data model's class from the data layer's registry; ``[run]`` works as for sequence
classes; bad fields are refused by name, at the library and at the command line."""

import pytest
import tomli_w

from odeflow.data import DataModel, InductionData, parse_config
from odeflow.data.forms import data_type, data_types
from odeflow.errors import ValidationError
from odeflow.families import families, find_preset
from odeflow.results import InductionTrajectory
from tests.cli_helpers import cli, one_error_line


def config_text(model, family="induction", run=None, nested=False) -> str:
    """A config holding ``model`` (top level, or in a ``[data]`` table) and ``run``."""
    doc = {"data": model.to_dict()} if nested else dict(model.to_dict())
    if run:
        doc["run"] = run
    return f'family = "{family}"\n' + tomli_w.dumps(doc)


def test_each_family_declares_its_data_model_type():
    assert data_type("induction") is InductionData and data_type("scan_snap") is DataModel
    # a config's family key finds the class its family declares
    assert {name: f.data_class for name, f in families().items()} == data_types()
    with pytest.raises(ValidationError, match="^family: unknown family 'ngram'"):
        data_type("ngram")


@pytest.mark.parametrize("preset", ["ih-point", "ih-paper"])
@pytest.mark.parametrize("nested", [False, True])
def test_round_trip_through_a_config(preset, nested):
    model = find_preset(preset)
    text = config_text(model, run={"t_end": 5.0, "loss": "code", "flow": "copier"},
                       nested=nested)
    read, options = parse_config(text)
    assert isinstance(read, InductionData) and read == model
    assert options == {"t_end": 5.0, "loss": "code", "flow": "copier"}


def test_family_inside_the_data_table():
    model = find_preset("ih-point")
    text = tomli_w.dumps({"data": {"family": "induction", **model.to_dict()}})
    assert parse_config(text)[0] == model
    with pytest.raises(ValidationError, match="^data.family"):
        parse_config('family = "scan_snap"\n' + text)


def test_a_config_without_family_is_still_sequence_classes():
    model = DataModel.preset("syn-small")
    assert parse_config(model.to_toml_string())[0] == model
    assert parse_config(config_text(model, family="scan_snap"))[0] == model


def test_the_class_reads_its_own_config_file(tmp_path):
    model = find_preset("ih-point")
    path = tmp_path / "ih.toml"
    path.write_text(config_text(model), encoding="utf-8")
    assert InductionData.from_toml(path) == model
    with pytest.raises(ValidationError, match="^family"):
        DataModel.from_toml_string(config_text(model))


@pytest.mark.parametrize("change, field", [
    (lambda d: d["prior"].update(alpha=-1.0), "prior.alpha"),
    (lambda d: d["prior"].update(colour=1), "prior.colour"),
    (lambda d: d["init"].update(c0=0.0), "init.c0"),
    (lambda d: d["init"].update(w_plus="big"), "init.w_plus"),
    (lambda d: d.update(degree=5), "degree"),
    (lambda d: d.pop("heads"), "heads"),
])
def test_bad_fields_are_refused_by_name(change, field):
    doc = find_preset("ih-paper").to_dict()
    change(doc)
    text = 'family = "induction"\n' + tomli_w.dumps(doc)
    with pytest.raises(ValidationError) as info:
        parse_config(text)
    assert info.value.field == field, str(info.value)


def test_bad_family_and_keys_are_refused_by_name():
    model = find_preset("ih-point")
    with pytest.raises(ValidationError, match="^family: unknown family"):
        parse_config(config_text(model, family="ngram"))
    with pytest.raises(ValidationError, match="^run.speed"):
        parse_config(config_text(model, run={"speed": 2.0}))
    with pytest.raises(ValidationError, match="^run.t_end"):
        parse_config(config_text(model, run={"t_end": -1.0}))
    with pytest.raises(ValidationError, match="^colour"):
        parse_config("colour = 1\n" + config_text(model))
    # an induction model without its family key: refused, with the family to add
    with pytest.raises(ValidationError, match='add family = "induction"'):
        parse_config(tomli_w.dumps(model.to_dict()))


def test_cli_run_with_an_induction_config(capsys, tmp_path):
    path = tmp_path / "ih.toml"
    path.write_text(config_text(find_preset("ih-point"),
                                run={"loss": "code", "flow": "copier", "t_end": 50.0}),
                    encoding="utf-8")
    out = tmp_path / "r.npz"
    code, text, err = cli(capsys, "run", "--config", path, "--t-end", "1", "--out", out,
                          "--rows", "2", "--no-progress")
    assert code == 0, err
    traj = InductionTrajectory.load(out)
    # the flag overrides [run] t_end; the [run] flow and loss are used
    assert traj.t[-1] == 1.0
    assert traj.meta["flow"] == "copier" and traj.meta["loss"] == "code"
    assert "flow=copier" in text


def test_cli_refuses_a_broken_induction_config_naming_the_field(capsys, tmp_path):
    doc = find_preset("ih-point").to_dict()
    doc["prior"]["kernel"][1] = [0.5, 0.6]
    path = tmp_path / "bad.toml"
    path.write_text('family = "induction"\n' + tomli_w.dumps(doc), encoding="utf-8")
    code, _, err = cli(capsys, "run", "--config", path, "--t-end", "1",
                       "--out", tmp_path / "x.npz", "--no-progress")
    assert code == 2 and "prior.kernel[1]" in one_error_line(err)
    assert not (tmp_path / "x.npz").exists()


def test_cli_refuses_a_rate_the_family_does_not_take(capsys, tmp_path):
    path = tmp_path / "eta.toml"
    path.write_text(config_text(find_preset("ih-point"), run={"eta_y": 2.0}),
                    encoding="utf-8")
    code, _, err = cli(capsys, "run", "--config", path, "--t-end", "1",
                       "--out", tmp_path / "x.npz", "--no-progress")
    assert code == 2 and "eta_y" in one_error_line(err)


def test_a_sequence_class_command_refuses_an_induction_config(capsys, tmp_path):
    path = tmp_path / "ih.toml"
    path.write_text(config_text(find_preset("ih-point")), encoding="utf-8")
    code, _, err = cli(capsys, "compare", "--config", path)
    assert code == 2 and "config" in one_error_line(err) and "induction" in err


def test_a_sweep_config_reads_the_model_of_its_family():
    from odeflow.sweeps import make_spec
    from odeflow.sweeps.config import parse_sweep_config

    sweep = '[sweep]\ntask = "exact"\n[sweep.grid]\neta_y = [1.0]\n'
    ih = find_preset("ih-point")
    kwargs = parse_sweep_config(config_text(ih) + sweep)
    assert kwargs["data"] == ih
    # a Scan-and-Snap task refuses the induction model, naming the task that takes it
    with pytest.raises(ValidationError, match="^data: is a 'induction' data model.*"
                                              "induction_flow"):
        make_spec(kwargs["task"], kwargs["grid"], data=kwargs["data"])
    ih_sweep = sweep.replace('"exact"', '"induction_flow"').replace("eta_y", "init.w_plus")
    kwargs = parse_sweep_config(config_text(ih) + ih_sweep)
    spec = make_spec(kwargs["task"], kwargs["grid"], data=kwargs["data"])
    assert spec.dims == ("init.w_plus",) and spec.data["family"] == "induction"
    syn = DataModel.preset("syn-small")
    kwargs = parse_sweep_config(config_text(syn, family="scan_snap") + sweep)
    assert kwargs["data"] == syn
