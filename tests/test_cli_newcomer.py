"""The command line a newcomer meets: quick start-up, one-line mistakes with the nearest
valid spelling, messages in the command line's words, paths typed by hand, help texts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from odeflow.cli import build_parser, catalog, command_modules
from tests.cli_helpers import cli, one_error_line

DOCS = Path(__file__).resolve().parents[1] / "docs"

HEAVY = ("numpy", "scipy", "matplotlib", "dask", "xarray", "zarr")


def modules_after(code: str) -> set:
    """The modules a fresh interpreter has loaded after running ``code``."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120, check=True)
    return set(json.loads(done.stdout.splitlines()[-1]))


# ------------------------------------------------------------------ start-up
def test_every_help_imports_no_numerical_stack():
    verbs = [m.replace("_", "-") for m in command_modules()]
    calls = "\n".join(f"    main({argv!r})" for argv in [["--help"]] +
                      [[verb, "--help"] for verb in verbs])
    code = ("import contextlib, io\nfrom odeflow.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            + "\n".join(f"  try:\n  {line}\n  except SystemExit:\n    pass"
                        for line in calls.splitlines()))
    loaded = modules_after(code)
    assert not {m for m in loaded if m.split(".")[0] in HEAVY}, sorted(loaded)
    assert "odeflow.fields" not in loaded and "odeflow.solver" not in loaded


def test_run_imports_no_plotting_or_sweep_stack(tmp_path):
    out = tmp_path / "r.npz"
    loaded = modules_after("from odeflow.cli import main\n"
                           f"assert main(['run', '--no-progress', '--out', {str(out)!r}]) == 0")
    assert out.is_file()
    for heavy in ("matplotlib", "dask", "xarray", "zarr", "odeflow.sweeps"):
        assert not {m for m in loaded if m == heavy or m.startswith(heavy + ".")}, heavy


def test_import_odeflow_is_light_and_the_flat_api_loads_on_use():
    loaded = modules_after("import odeflow")
    assert not {m for m in loaded if m.split(".")[0] in HEAVY}
    import odeflow

    for name in odeflow.__all__:
        assert getattr(odeflow, name) is not None, name
    assert callable(odeflow.sweep) and odeflow.sweep.__module__ == "odeflow.sweeps.run"
    assert callable(odeflow.solve) and odeflow.solve.__module__.startswith("odeflow.solver")
    with pytest.raises(AttributeError, match="no attribute 'sovle'"):
        odeflow.sovle  # noqa: B018


def test_the_catalog_agrees_with_the_registries():
    import odeflow.analysis.verification as verify_module
    from odeflow.analysis.check_registry import registered_checks
    from odeflow.analysis.compare import RUNS
    from odeflow.data import DEFAULT_PRESET, PRESETS
    from odeflow.families import families
    from odeflow.solver import MAX_NFEV, METHODS

    for name, family in families().items():   # the declarations' text against the classes
        assert set(family.preset_names) == set(family.presets()), name
        assert family.default_flow in family.flows, name
        for flow, target in family.flows.items():
            assert family.field_class(flow).name == flow, (name, target)
    assert catalog.scan_snap_presets() == sorted(PRESETS)
    assert catalog.DEFAULT_PRESET == DEFAULT_PRESET
    assert catalog.METHODS == tuple(METHODS) and catalog.MAX_NFEV == MAX_NFEV
    assert catalog.check_names() == tuple(registered_checks())
    assert catalog.RUNS == tuple(RUNS)
    assert catalog.VERIFY_DEFAULTS == {
        "rtol": verify_module.DEFAULT_RTOL, "atol": verify_module.DEFAULT_ATOL,
        "method": verify_module.DEFAULT_METHOD, "tolerance": verify_module.DEFAULT_TOLERANCE,
        "t_min": verify_module.T_MIN, "t_max": verify_module.T_MAX}


def test_top_level_help_lists_every_family_and_command(capsys):
    code, out, _ = cli(capsys, "--help")
    assert code == 0
    for entry in catalog.families().values():
        assert entry.title in out
        assert all(flow in out for flow in entry.flows)
    assert all(m.replace("_", "-") in out for m in command_modules())


# ------------------------------------------------------------------ mistakes
@pytest.mark.parametrize("argv, expected", [
    (["run", "--etay", "1"], "--etay: unknown flag of odeflow run; did you mean --eta-y?"),
    (["run", "--t-end", "abc"], "--t-end: must be a number, got 'abc'"),
    (["run", "--rows", "x"], "--rows: must be a whole number, got 'x'"),
    (["run", "--method", "rk4"], "did you mean RK45?"),
    (["run", "--flow", "reducd"], "did you mean reduced?"),
    (["run", "--preset", "ih-poin"], "did you mean ih-point?"),
    (["plot", "scansnap"], "did you mean scan-snap?"),
    (["reproduce", "fig7"], "did you mean fig6?"),
    (["verify", "--only", "CF7"], "invalid choice 'CF7'"),
    (["rnu"], "did you mean run?"),
    (["run", "stray"], "unexpected argument 'stray' for odeflow run"),
])
def test_a_mistake_is_one_line_with_the_nearest_spelling(capsys, argv, expected):
    code, out, err = cli(capsys, *argv)
    line = one_error_line(err)
    assert code == 2 and out == "" and "usage:" not in err
    assert line.startswith("odeflow: error: ") and expected in line, line


#: A positional argument each command needs before its flags are read.
POSITIONAL = {"plot": ["margin"], "sweep": ["grid.toml"], "reproduce": ["fig4"]}


@pytest.mark.parametrize("verb", [m.replace("_", "-") for m in command_modules()])
def test_every_command_names_the_flag_a_typo_meant(capsys, verb):
    parser = build_parser().commands[verb]
    flags = [o for a in parser._actions for o in a.option_strings
             if o.startswith("--") and len(o) > 6 and o != "--help"]
    assert flags, verb
    flag = flags[0]
    typo = flag[:4] + flag[5:]  # one letter dropped: --rtol -> --rol
    code, _, err = cli(capsys, verb, *POSITIONAL.get(verb, []), typo)
    line = one_error_line(err)
    assert code == 2 and f"did you mean {flag}?" in line, line


def test_method_names_are_taken_in_any_case():
    parser = build_parser()
    assert parser.parse_args(["run", "--method", "rk45"]).method == "RK45"
    assert parser.parse_args(["verify", "--method", "lsoda"]).method == "LSODA"
    assert parser.parse_args(["run", "--method", "AUTO"]).method == "auto"


# ------------------------------------------------------------------ vocabulary
@pytest.mark.parametrize("argv, expected", [
    (["run", "--preset", "ih-point", "--eta-y", "1"],
     "--eta-y: does not apply to flow population of induction heads (ih-point); that flow "
     "takes --loss, --stages"),
    (["run", "--preset", "ih-point", "--flow", "exact"],
     "--flow: 'exact' is not a flow of induction heads (ih-point); its flows: population, "
     "copier, finite_l"),
    (["run", "--preset", "ih-point", "--flow", "copier", "--stages", "1,2"],
     "--stages: does not apply to flow copier"),
    (["run", "--loss", "nll"], "--loss: does not apply to flow exact of Scan and Snap"),
    (["run", "--seq-len", "10"], "that flow takes --eta-y, --eta-z"),
    (["compare", "--preset", "ih-paper"], "--preset: 'ih-paper' is a preset of another "
                                          "model family"),
    (["compare", "--seq-lens", "8"], "--seq-lens: only with --table"),
    (["compare-levels", "--sgd-seeds", "2"], "--sgd-seeds: only with --seq-len"),
    (["compare-levels", "--seq-len", "8", "--momentum", "0.5"],
     "--momentum: only with --sgd-seeds"),
    (["plot", "margin", "--eta-z", "1"],
     "--eta-z: figure margin does not take it; it takes --preset/--config, --eta-y, --t-end"),
])
def test_refusals_speak_in_flags(capsys, argv, expected):
    code, _, err = cli(capsys, *argv)
    line = one_error_line(err)
    assert code == 2 and expected in line and "['" not in line, line


def test_a_config_option_of_another_family_is_named_as_its_key(tmp_path, capsys):
    config = tmp_path / "ih.toml"
    config.write_text('family = "induction"\nvocab_size = 2\nn_gram = 3\nheads = 2\n'
                      'degree = 2\n\n[prior]\nkind = "point"\nkernel = [[0.4992, 0.5008], '
                      '[0.0081, 0.9919], [0.8004, 0.1996], [0.108, 0.892]]\n\n[run]\n'
                      'eta_z = 1.0\n')
    code, _, err = cli(capsys, "run", "--config", config, "--t-end", "1")
    line = one_error_line(err)
    assert code == 2 and line.startswith("odeflow: error: run.eta_z: does not apply"), line


SWEEP = """[sweep]
task = "exact"
preset = "syn-small"

[sweep.settings]
t_end = 1.0

[sweep.grid]
eta_z = [0.1, 0.2]
"""


def test_a_seed_grid_key_points_to_the_seeds_list(tmp_path, capsys):
    config = tmp_path / "grid.toml"
    config.write_text(SWEEP.replace('"exact"', '"sgd"').replace("t_end = 1.0", "steps = 2")
                      + "seed = [0, 1]\n")
    code, _, err = cli(capsys, "sweep", config, "--backend", "serial", "--out",
                       tmp_path / "s.zarr")
    line = one_error_line(err)
    assert code == 2 and "sweep.grid.seed:" in line and "[sweep] seeds = [" in line, line


def test_a_task_parameter_in_the_sweep_table_points_to_settings(tmp_path, capsys):
    config = tmp_path / "grid.toml"
    config.write_text(SWEEP.replace('preset = "syn-small"', 'preset = "syn-small"\nt_end = 1'))
    code, _, err = cli(capsys, "sweep", config, "--backend", "serial")
    line = one_error_line(err)
    assert code == 2 and "sweep.t_end: unknown key" in line and "[sweep.settings]" in line


@pytest.mark.parametrize("name", ["s.zarr", "s.nc"])
def test_an_existing_store_is_refused_pointing_to_resume(tmp_path, capsys, name):
    config = tmp_path / "grid.toml"
    config.write_text(SWEEP)
    store = tmp_path / name
    args = ("sweep", config, "--backend", "serial", "--no-progress", "--rows", "0", "--out",
            store)
    assert cli(capsys, *args)[0] == 0
    code, _, err = cli(capsys, *args)
    line = one_error_line(err)
    assert code == 2 and "add --resume" in line and "resume=True" not in line, line
    assert cli(capsys, *args, "--resume")[0] == 0


# ------------------------------------------------------------------ writing files
def _sweep_config(tmp_path) -> Path:
    config = tmp_path / "grid.toml"
    config.write_text(SWEEP)
    return config


@pytest.mark.parametrize("verb", ["run", "plot", "sweep", "reproduce", "compare"])
def test_a_typed_path_into_a_missing_folder_is_refused(tmp_path, capsys, verb):
    missing = tmp_path / "no" / "such"
    argv = {"run": ["run", "--out", missing / "r.npz"],
            "plot": ["plot", "margin", "--out", missing / "m.png"],
            "sweep": ["sweep", _sweep_config(tmp_path), "--backend", "serial", "--out",
                      missing / "s.zarr"],
            "reproduce": ["reproduce", "fig4", "--out", missing / "dir"],
            "compare": ["compare", "--out", missing / "c.json"]}[verb]
    code, out, err = cli(capsys, *argv)
    line = one_error_line(err)
    assert code == 2 and out == "" and "--mkdir" in line, line
    assert not (tmp_path / "no").exists()


def test_mkdir_makes_the_missing_folders(tmp_path, capsys):
    out = tmp_path / "a" / "b" / "r.npz"
    code, stdout, _ = cli(capsys, "run", "--t-end", "1", "--no-progress", "--rows", "0",
                          "--mkdir", "--out", out)
    assert code == 0 and out.is_file() and f"saved {out}\n" in stdout


def test_the_default_folder_is_made_and_a_rerun_says_it_replaced_the_file(
        tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = ("run", "--t-end", "1", "--no-progress", "--rows", "0")
    code, first, _ = cli(capsys, *argv)
    assert code == 0 and (tmp_path / "results" / "syn-small-exact.npz").is_file()
    assert "replaced" not in first
    code, second, _ = cli(capsys, *argv)
    assert code == 0 and "saved results/syn-small-exact.npz (replaced the earlier file)" \
        in second


# ------------------------------------------------------------------ help texts
def test_reproduce_help_describes_each_experiment_and_its_flags(capsys):
    code, out, _ = cli(capsys, "reproduce", "--help")
    assert code == 0
    for name in ("fig4", "fig5", "fig6", "induction"):
        assert f"\n  {name}" in out, name
    assert "--sizes and --same-start to fig6 only" in " ".join(out.split())


def test_reproduce_refuses_a_flag_of_another_experiment(capsys):
    code, _, err = cli(capsys, "reproduce", "fig4", "--sizes", "1")
    assert code == 2 and one_error_line(err) == "odeflow: error: --sizes: only for fig6, not fig4"


def test_run_help_names_every_flow_of_every_family(capsys):
    code, out, _ = cli(capsys, "run", "--help")
    assert code == 0
    for entry in catalog.families().values():
        assert all(flow in out for flow in entry.flows)


def test_docs_cli_synopses_are_complete():
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    sweep = text[text.index("odeflow sweep CONFIG"):]
    assert "--batch N" in sweep[:sweep.index("```")]
    run = text[text.index("odeflow run [--preset"):]
    run = run[:run.index("```")]
    for entry in catalog.families().values():
        assert all(flow in run for flow in entry.flows)
    assert "--mkdir" in run and "spec section" not in text
    assert "## Writing files" in text
