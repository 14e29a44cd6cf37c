# expect: accept
def epi(accum):
    E = accum
    F = accum
    D = accum
    return D, E, F
