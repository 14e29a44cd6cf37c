# expect: accept
def epi(accum):
    D = silu(accum)
    return D
