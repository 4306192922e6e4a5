"""Speed, apart from the mechanisms: each module here computes the same numbers as a reference
in minattn/<mechanism>.py, faster (blocked and banded kernels, fused or compiled routes, a
cached decoder, IBM Model 1's EM as bincounts), imports the reference it must equal (tested
equal in float64), and is chosen by the caller by name (`<name>_fast_<np|torch>`, or `attend=`
on a module), never behind the reference's back. The measurements that justify each route are
in benchmarks/README.md.
"""
