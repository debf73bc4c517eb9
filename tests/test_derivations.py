"""Tests of the sympy derivations in ``derivations/`` and of their front ends
(``odeflow derive``, ``python -m derivations``).

Each derivation's check runs once, through ``odeflow derive NAME`` in-process
(parametrized, so that the workers of pytest-xdist share them out); the run of
all of them in one subprocess is marked slow."""

from __future__ import annotations

import dataclasses
import importlib
import subprocess
import sys
from pathlib import Path

import mpmath
import pytest
import sympy as sp

from derivations import (
    MODULES,
    SYM,
    Derivation,
    all_derivations,
    cf1_decoder_margin,
    cf3_gamma_integral,
    cf6_snap,
)
from derivations import __main__ as derivations_main
from derivations.make_docs import render
from derivations.report import catalogue, find
from odeflow.cli import main as odeflow_main

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("name", [module.NAME for module in catalogue()])
def test_each_derivation_passes_through_odeflow_derive(name, capsys):
    code = odeflow_main(["derive", name])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.splitlines()[0].startswith(f"PASS {name}: ")
    assert max(map(len, out.splitlines())) <= 100
    assert out.splitlines()[-1].startswith("1 derivation passed")


def test_derive_list_names_every_derivation_without_running_them(capsys, monkeypatch):
    monkeypatch.setattr(cf3_gamma_integral, "derive", None)  # running one would fail
    assert odeflow_main(["derive", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[::2] == [f"{module.NAME:<7} {module.TITLE}" for module in catalogue()]
    assert [line.split()[0] for line in lines[1::2]] == [f"{name}:" for name in MODULES]
    assert max(map(len, lines)) <= 100


def test_a_derivation_is_found_by_result_or_module_name():
    assert find("CF-IH2") == find("cf_ih2") == find("cf_ih2_classifier") == "cf_ih2_classifier"
    assert find("cf1") == "cf1_decoder_margin"
    with pytest.raises(LookupError, match="CF1, CF2"):
        find("CF9")


def test_an_unknown_name_is_a_one_line_error(capsys):
    assert odeflow_main(["derive", "cf9"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "'cf9'" in err and "CF-IH2" in err
    assert derivations_main.main(["--quiet", "cf9"]) == 2


def test_a_failing_or_crashing_derivation_exits_one(capsys, monkeypatch):
    real = cf3_gamma_integral.derive()
    failing = dataclasses.replace(real, checker=lambda: (False, "[FAILED] forced"))
    monkeypatch.setattr(cf3_gamma_integral, "derive", lambda: failing)
    assert odeflow_main(["derive", "CF3"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("FAIL CF3: ") and "[FAILED] forced" in out
    assert out.splitlines()[-1].startswith("FAILED: CF3")

    def crash():
        raise RuntimeError("sympy gave up")

    monkeypatch.setattr(cf3_gamma_integral, "derive", crash)
    assert derivations_main.main(["--quiet", "CF3"]) == 1
    out = capsys.readouterr().out
    assert "FAIL cf3_gamma_integral: derivation raised RuntimeError: sympy gave up" in out


@pytest.mark.parametrize("module_name", MODULES)
def test_result_object_fields(module_name):
    result = importlib.import_module(f"derivations.{module_name}").derive()
    assert isinstance(result, Derivation)
    assert result.name.startswith("CF") and result.title and result.summary
    assert any(word in result.equation for word in ("Eqn", "Lemma", "Theorem", "Sec.", "stage"))
    assert "spec" not in result.equation  # users have the papers and docs/, not the spec
    assert set(result.latex) == set(result.exprs)
    assert all(isinstance(s, str) and s for s in result.latex.values())
    assert result.targets["main"] == (result.expr, result.symbols)
    assert set(result.expr.free_symbols) <= set(result.symbols)
    for key, (expr, syms) in result.targets.items():
        assert set(expr.free_symbols) <= set(syms), key
    # dict-style access works too
    assert result["name"] == result.name and result.as_dict()["equation"] == result.equation
    # the main expression evaluates at a generic point
    fn = result.lambdify()
    with mpmath.workdps(30):
        value = fn(
            *[mpmath.mpf("0.37") + i * mpmath.mpf("0.11") for i in range(len(result.symbols))]
        )
    assert mpmath.isfinite(value)


def test_sympy_itself_produces_lambertw():
    cf1 = cf1_decoder_margin.derive()
    implicit = cf1.exprs["implicit"]
    solutions = sp.solve(implicit, SYM.h)
    assert len(solutions) == 1
    assert solutions[0].has(sp.LambertW)
    assert sp.simplify(solutions[0] - cf1.expr) == 0
    assert cf1.exprs["h"].has(sp.LambertW)


def test_implicit_form_of_eqn_45():
    cf1 = cf1_decoder_margin.derive()
    M, h, t = SYM.M, SYM.h, SYM.t
    expected = sp.Eq(sp.exp(h) - 1 + (M - 1) * h, SYM.eta_Y * SYM.pi * M * t)
    assert sp.simplify(cf1.exprs["implicit"].lhs - expected.lhs) == 0
    assert sp.simplify(cf1.exprs["implicit"].rhs - expected.rhs) == 0


def test_eqn_128_has_no_integral_and_is_quadratic_in_h():
    cf3 = cf3_gamma_integral.derive()
    gamma_h = cf3.exprs["Gamma_h"].rhs
    assert not gamma_h.has(sp.Integral)
    M, h, eta, pi = SYM.M, SYM.h, SYM.eta_Y, SYM.pi
    assert sp.simplify(gamma_h - (M - 1) * h**2 / (2 * M * eta * pi)) == 0
    assert not cf3.expr.has(sp.Integral)
    assert cf3.expr.has(sp.LambertW)


def test_snap_at_transition_depends_on_learning_rate_ratio_only():
    cf6 = cf6_snap.derive()
    b_t0 = cf6.exprs["B_t0"].rhs
    assert SYM.eta_Y not in b_t0.free_symbols and SYM.eta_Z not in b_t0.free_symbols
    assert sp.Symbol("rho", positive=True) in b_t0.free_symbols


def test_all_derivations_in_order():
    names = [d.name for d in all_derivations()]
    assert names == [f"CF{i}" for i in range(1, 9)] + ["CF-IH1", "CF-IH2", "CF-TS1", "CF-TS2"]
    assert len(names) == len(MODULES)


def test_docs_page_renders():
    text = render(run_checks=False)
    assert text.count("$$") % 2 == 0 and "$$" in text
    for result in all_derivations():
        assert f"## {result.name}:" in text
    for eqn in ("Eqns 44-45", "Eqn 128", "Eqn 11", "Eqn 12", "Eqns 13-14"):
        assert eqn in text
    assert "python -m derivations" in text and "`odeflow derive CF1`" in text
    assert "spec" not in text.replace("inspect", "")


def test_python_m_derivations_runs_one_in_process(capsys):
    assert derivations_main.main(["--no-latex", "CF3"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("PASS CF3: ") and "--- Gamma_h" in out and "LaTeX:" not in out


@pytest.mark.slow  # every derivation again in one process (35 s); the suite runs each once
def test_command_line_exits_zero():
    proc = subprocess.run(
        [sys.executable, "-m", "derivations", "--quiet"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("PASS") == len(MODULES)
