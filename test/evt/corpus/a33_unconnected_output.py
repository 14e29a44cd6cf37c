# expect: accept
# CUTLASS drops E (does not feed D) silently; coil joins it into the root.
def epi(accum, C):
    E = C * 2
    D = accum + 1
    return D, E
