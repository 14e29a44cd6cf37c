# expect: accept
def epi(accum):
    D = exp(accum * 0.125)
    return D
