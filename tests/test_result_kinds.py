"""Kinds of Scan and Snap result: each lists its series, and files in the
``odeflow-trajectory/1`` layout, written here by hand as earlier versions wrote
them, load as the kind of their flow."""

from __future__ import annotations

import json

import numpy as np

import odeflow
from odeflow import DataModel, Trajectory
from odeflow.results.reduced import REDUCED_SERIES
from odeflow.results.trajectory import KINDS, ReducedTrajectory

DATA = DataModel.preset("syn-small")


def write_by_hand(path, arrays: dict, flow: str, layout: str = "lumped") -> None:
    """An ``.npz`` in the layout odeflow has written since ``odeflow-trajectory/1``."""
    metadata = {"format": "odeflow-trajectory/1", "data": DATA.to_dict(),
                "decoder_layout": layout, "stats": {"method": "RK45", "nfev": 7},
                "meta": {"flow": flow, "eta_y": 1.0}}
    np.savez(path, metadata=np.array(json.dumps(metadata)), **arrays)


def dense_arrays(n: int, rng) -> dict:
    q, L, M = DATA.query_tokens.size, DATA.active_tokens.size, DATA.vocab_size
    R = np.asarray(DATA.output_multiplicity).size
    return {"t": np.linspace(0.0, 3.0, n), "z_base": np.zeros((q, M)),
            "z_active": rng.normal(size=(n, q, L)), "decoder_lumped": rng.normal(size=(n, R, L))}


def test_kinds_list_their_series():
    assert Trajectory.SERIES == ()
    assert ReducedTrajectory.SERIES == REDUCED_SERIES == ("margin", "B", "gamma_integral")
    assert KINDS["reduced"] is ReducedTrajectory


def test_hand_written_level_e_file_loads_with_its_values(tmp_path):
    rng = np.random.default_rng(0)
    arrays = dense_arrays(5, rng)
    write_by_hand(tmp_path / "e.npz", arrays, "exact")
    traj = Trajectory.load(tmp_path / "e.npz")
    assert type(traj) is Trajectory
    np.testing.assert_array_equal(traj.z_active, arrays["z_active"])
    np.testing.assert_array_equal(traj.decoder_lumped, arrays["decoder_lumped"])
    assert traj.stats["nfev"] == 7 and traj.flow == "exact"
    K = DATA.num_classes
    Y = traj.decoder_at(2)
    np.testing.assert_array_equal(Y[np.ix_(DATA.next_tokens, DATA.active_tokens)],
                                  arrays["decoder_lumped"][2, :K])


def test_hand_written_level_r_file_loads_as_its_kind(tmp_path):
    rng = np.random.default_rng(1)
    n, K = 4, DATA.num_classes
    arrays = dense_arrays(n, rng)
    series = {name: rng.normal(size=(n, K)) for name in REDUCED_SERIES}
    arrays.update({f"series__{name}": v for name, v in series.items()})
    write_by_hand(tmp_path / "r.npz", arrays, "reduced")
    traj = Trajectory.load(tmp_path / "r.npz")
    assert isinstance(traj, ReducedTrajectory)
    assert set(traj.series) == set(ReducedTrajectory.SERIES)
    want = series["margin"][:, 0] if DATA.uniform_weights else series["margin"]
    np.testing.assert_array_equal(traj.margin, want)
    np.testing.assert_array_equal(traj.B(int(DATA.next_tokens[1])), series["B"][:, 1])


def test_hand_written_compact_optimiser_file_loads(tmp_path):
    rng = np.random.default_rng(2)
    n = 3
    rows = np.repeat(np.arange(DATA.query_tokens.size), 2)
    tokens = np.tile(DATA.active_tokens[:2], DATA.query_tokens.size)
    arrays = {"t": np.arange(n, dtype=float), "z_base": np.zeros((DATA.query_tokens.size,
                                                                   DATA.vocab_size)),
              "z_by_logit": rng.normal(size=(rows.size, n)), "logit_query": rows,
              "logit_token": tokens, "series__velocity": rng.normal(size=(n, 6)),
              "series__flow_time": np.array([0.0, 1.0, 2.9])}
    write_by_hand(tmp_path / "m.npz", arrays, "exact")
    traj = Trajectory.load(tmp_path / "m.npz")
    traj.meta["optimizer"] = {"kind": "momentum", "mu": 0.9}
    np.testing.assert_array_equal(traj.velocity, arrays["series__velocity"])
    np.testing.assert_array_equal(traj.flow_time, arrays["series__flow_time"])
    q0 = int(DATA.query_tokens[0])
    np.testing.assert_array_equal(traj.logits(q0, tokens=DATA.active_tokens[:2]),
                                  arrays["z_by_logit"][:2].T)


def test_solved_reduced_round_trips_as_its_kind(tmp_path):
    traj = odeflow.solve(DATA, flow="reduced", t_span=(0.0, 2.0), progress=False)
    back = Trajectory.load(traj.save(tmp_path / "r.npz"))
    assert isinstance(back, ReducedTrajectory)
    np.testing.assert_array_equal(back.gamma_integral, traj.gamma_integral)
    exact = Trajectory.load(odeflow.solve(DATA, t_span=(0.0, 2.0), progress=False)
                            .save(tmp_path / "e.npz"))
    assert not isinstance(exact, ReducedTrajectory)
    assert not hasattr(exact, "margin")        # Level R's series are Level R's kind only


def test_a_level_t_file_loads_as_its_kind(tmp_path):
    from odeflow.results import FiniteTTrajectory

    data = odeflow.DataModel.preset("syn-small")
    traj = odeflow.solve(data, flow="finite_t", seq_len=8, sample_size=2, t_span=(0.0, 2.0),
                         progress=False)
    loaded = odeflow.Trajectory.load(traj.save(tmp_path / "t.npz"))
    assert type(loaded) is FiniteTTrajectory
    np.testing.assert_array_equal(loaded.z_active, traj.z_active)
