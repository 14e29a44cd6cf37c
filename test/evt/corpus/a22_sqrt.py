# expect: accept
def epi(accum):
    D = sqrt(abs(accum))
    return D
