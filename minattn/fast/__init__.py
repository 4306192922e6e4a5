"""Speed, apart from the readable references: each module here computes what a mechanism's
reference computes (blocked and banded kernels, FlexAttention and compiled routes, the GPU
dispatch, KV-cache decoders, bincount EM), imports the reference it must equal (tested equal in
float64), and is chosen explicitly by the caller — a function named `<name>_fast_<np|torch>` or
a kernel passed as `attend=` — never by an environment variable or a hidden dispatch inside a
reference. The measurements that justify a route are in benchmarks/README.md.
"""
