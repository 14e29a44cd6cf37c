# expect: accept
def epi(accum):
    E = accum + 1
    D = E * 2
    return D, E
