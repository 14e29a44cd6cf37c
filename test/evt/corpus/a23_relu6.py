# expect: accept
def epi(accum):
    D = minimum(maximum(accum, 0.0), 6.0)
    return D
