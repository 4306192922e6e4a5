"""The same numbers, faster: the kernels behind the mechanisms of minattn/<mechanism>.py.

A mechanism's file is the readable reference; each fast function here (`<name>_fast_np`,
`<name>_fast_torch`) imports the reference it must equal, is tested equal to it in float64,
and is chosen by name by its caller (or passed as `attend=`/`kernel=`), never behind the
reference's back. The measurements that justify a route live in benchmarks/README.md.
"""
