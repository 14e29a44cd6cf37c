# expect: accept
def epi(accum, C):
    D = abs(accum - C)
    return D
