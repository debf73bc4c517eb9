"""Tests of the sympy derivations in ``derivations/``."""

from __future__ import annotations

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
from derivations.make_docs import render

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("module_name", MODULES)
def test_derivation_checks_pass(module_name):
    module = importlib.import_module(f"derivations.{module_name}")
    result = module.derive()
    passed, detail = result.check()
    assert passed, f"{result.name} failed:\n{detail}"


@pytest.mark.parametrize("module_name", MODULES)
def test_result_object_fields(module_name):
    result = importlib.import_module(f"derivations.{module_name}").derive()
    assert isinstance(result, Derivation)
    assert result.name.startswith("CF") and result.title and result.summary
    assert any(word in result.equation for word in ("Eqn", "Lemma", "Theorem", "spec section"))
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
    assert names == [f"CF{i}" for i in range(1, 8)] + ["CF-IH1", "CF-IH2"]
    assert len(names) == len(MODULES)


def test_docs_page_renders():
    text = render(run_checks=False)
    assert text.count("$$") % 2 == 0 and "$$" in text
    for result in all_derivations():
        assert f"## {result.name}:" in text
    for eqn in ("Eqns 44-45", "Eqn 128", "Eqn 11", "Eqn 12", "Eqns 13-14"):
        assert eqn in text
    assert "python -m derivations" in text


def test_command_line_exits_zero():
    proc = subprocess.run(
        [sys.executable, "-m", "derivations", "--quiet"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("PASS") == len(MODULES)
