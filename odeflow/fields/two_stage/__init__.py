"""Fields of the two-stage family (odeflow's model of Gong et al. 2025, arXiv 2502.20681).

:mod:`.expectations` holds the inner expectation ``g(v) = E_x[y ReLU(x^T v)]``
in closed form, :mod:`.scoring` the outer expectation over the query (the
population loss and accuracy per query type), :mod:`.population` the population
gradient flow of ``W = diag(W_P, W_Q)``. The family is registered by
:mod:`odeflow.fields.families`, not here.
"""
