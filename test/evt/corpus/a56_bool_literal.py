# expect: accept
def epi(accum):
    D = accum * True + False
    return D
