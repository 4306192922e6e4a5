"""Speed, apart from the math: each module here computes the same numbers as a mechanism's
reference in `minattn/<mechanism>.py` (blocked and banded kernels, FlexAttention and compiled
routes, the relative shift, key/value caches, the bincount EM), imports that reference, is
tested equal to it in float64, and runs only when a caller chooses it by name (a
`<name>_fast_<np|torch>` function, or `attend=` on a module) — never behind the reference's
back. The measurements that justify each route are in benchmarks/README.md.
"""
