# expect: accept
def epi(accum, lo: "scalar"):
    D = clamp(accum, lo, 1.5)
    return D
